// vk_exec.cpp — descriptor sets and kernel recording (see vk_exec.hpp). The push-constant structs
// mirror the `P` blocks of shaders/*.comp field for field.
#include "vk_exec.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace ember::vk {

void Bindings::create(Device &dev, const Buffer *const (&bufs)[kBindingCount]) {
    const DeviceApi &d = dev.fn();
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kBindingCount};
    VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pi.maxSets = 1;
    pi.poolSizeCount = 1;
    pi.pPoolSizes = &size;
    check(d.vkCreateDescriptorPool(dev.device(), &pi, nullptr, &pool), "vkCreateDescriptorPool");
    VkDescriptorSetLayout layout = dev.set_layout();
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    check(d.vkAllocateDescriptorSets(dev.device(), &ai, &set), "vkAllocateDescriptorSets");
    update(dev, bufs);
}

void Bindings::update(Device &dev, const Buffer *const (&bufs)[kBindingCount]) {
    VkDescriptorBufferInfo info[kBindingCount];
    VkWriteDescriptorSet w[kBindingCount];
    for (uint32_t i = 0; i < kBindingCount; ++i) {
        info[i] = {bufs[i]->buf, 0, VK_WHOLE_SIZE};
        w[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        w[i].dstSet = set;
        w[i].dstBinding = i;
        w[i].descriptorCount = 1;
        w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        w[i].pBufferInfo = &info[i];
    }
    dev.fn().vkUpdateDescriptorSets(dev.device(), kBindingCount, w, 0, nullptr);
}

void Bindings::destroy(Device &dev) {
    if (pool) dev.fn().vkDestroyDescriptorPool(dev.device(), pool, nullptr);
    pool = VK_NULL_HANDLE;
    set = VK_NULL_HANDLE;
}

Recorder::Recorder(Device &dev, VkCommandBuffer cb, VkDescriptorSet set) : dev_(dev), cb_(cb) {
    dev.fn().vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, dev.layout(), 0, 1, &set, 0, nullptr);
}

void Recorder::dispatch(Pipe p, const void *pc, uint32_t pc_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
    const DeviceApi &d = dev_.fn();
    if (gx == 0 || gy == 0 || gz == 0) return;
    if (!first_) {
        VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
        d.vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                               nullptr, 0, nullptr);
    }
    first_ = false;
    d.vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, dev_.pipeline(p));
    d.vkCmdPushConstants(cb_, dev_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_bytes, pc);
    d.vkCmdDispatch(cb_, gx, gy, gz);
}

void Recorder::dispatch_flat(Pipe p, const void *pc, uint32_t pc_bytes, uint64_t n_groups) {
    constexpr uint64_t kMaxX = 65535;
    if (n_groups == 0) return;
    const uint64_t gy = (n_groups + kMaxX - 1) / kMaxX;
    if (gy > kMaxX) fail(EMBER_ERR_UNSUPPORTED, "vulkan: a dispatch of %llu workgroups", (unsigned long long)n_groups);
    dispatch(p, pc, pc_bytes, static_cast<uint32_t>(gy == 1 ? n_groups : kMaxX), static_cast<uint32_t>(gy));
}

void Recorder::to_transfer() {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
    dev_.fn().vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                                   nullptr, 0, nullptr);
}

void Recorder::quantize(uint32_t x_off, uint32_t n_in, uint32_t rows, const QActs &q) {
    struct { uint32_t x_off, n_in, n_blocks, q_off, d_off, s_off; } pc{x_off, n_in, rows * (n_in / 32), q.q_off, q.d_off,
                                                                      q.s_off};
    dispatch_flat(kQuantizeActs, &pc, sizeof pc, groups(pc.n_blocks, 64));
}

void Recorder::matmul(const WeightRef &w, uint32_t x_off, const QActs &q, uint32_t rows, uint32_t y_off,
                      uint32_t bias_off, bool accumulate) {
    Pipe p = kMatmulF32;
    switch (weight_layout(w.type)) {  // throws, naming the type, for one the shaders do not take
    case Layout::F32: p = kMatmulF32; break;
    case Layout::F16: p = kMatmulF16; break;
    case Layout::BF16: p = kMatmulBF16; break;
    case Layout::Q8: p = kMatmulQ8_0; break;
    case Layout::Q4: p = kMatmulQ4_0; break;
    case Layout::K: p = kMatmulK; break;
    case Layout::K2: p = kMatmulK2; break;
    }
    struct {
        uint32_t w_off, n_in, n_out, x_off, xd_off, y_off, bias_off, accumulate, y_stride, o_base, xs_off, n_tokens;
    } pc{w.off, w.n_in, w.n_out, w.quantized() ? q.q_off : x_off, q.d_off, y_off, bias_off, accumulate ? 1u : 0u,
         w.n_out, 0, q.s_off, rows};
    // 64 outputs per workgroup; at most 65535 groups per dispatch (the least maxComputeWorkGroupCount).
    constexpr uint32_t kMaxRows = 65535u * 64u;
    for (uint32_t o = 0; o < w.n_out; o += kMaxRows) {
        pc.o_base = o;
        dispatch(p, &pc, sizeof pc, static_cast<uint32_t>(groups(std::min(kMaxRows, w.n_out - o), 64)),
                 static_cast<uint32_t>(groups(rows, 8)));  // 8: TT
    }
}

void Recorder::rmsnorm(uint32_t x_off, uint32_t y_off, uint32_t w_off, uint32_t n, uint32_t groups_per_row,
                       uint32_t rows, uint32_t rows_off, float eps, bool center, uint32_t b_off) {
    const uint64_t n_groups = uint64_t{rows} * groups_per_row;
    if (n_groups > 0xffffffffu) fail(EMBER_ERR_UNSUPPORTED, "vulkan rmsnorm: %llu groups", (unsigned long long)n_groups);
    struct { uint32_t x_off, y_off, w_off, n, gpr, n_groups, rows_off; float eps; uint32_t center, b_off; } pc{
        x_off, y_off, w_off, n, groups_per_row, static_cast<uint32_t>(n_groups), rows_off, eps, center ? 1u : 0u, b_off};
    dispatch_flat(kRmsNorm, &pc, sizeof pc, n_groups);
}

void Recorder::rope(uint32_t x_off, uint32_t rows, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot, bool neox,
                    uint32_t cs_off) {
    struct { uint32_t x_off, n_tokens, n_heads, head_dim, n_rot, neox, cs_off; } pc{x_off, rows, n_heads, head_dim, n_rot,
                                                                                  neox ? 1u : 0u, cs_off};
    dispatch_flat(kRope, &pc, sizeof pc, groups(uint64_t{rows} * n_heads * (n_rot / 2), 64));
}

void Recorder::swiglu(uint32_t g_off, uint32_t u_off, uint32_t o_off, uint32_t n) {
    struct { uint32_t g_off, u_off, o_off, n; } pc{g_off, u_off, o_off, n};
    dispatch_flat(kSwiglu, &pc, sizeof pc, groups(n, 64));
}

// elementwise.comp's push constants; x2_div: the values per gate of SIGMOID_MUL, the row width of
// ADD_POS_ROWS (1 for the other ops); pos_off: ADD_POS_ROWS's positions.
struct ElementwisePc {
    uint32_t op, x_off, x2_off, y_off, n;
    float a, b;
    uint32_t x2_div, pos_off;
};

void Recorder::elementwise(Ew op, uint32_t x_off, uint32_t x2_off, uint32_t y_off, uint32_t n, float a, float b) {
    const ElementwisePc pc{static_cast<uint32_t>(op), x_off, x2_off, y_off, n, a, b, 1, 0};
    dispatch_flat(kElementwise, &pc, sizeof pc, groups(n, 64));
}

void Recorder::add_pos_rows(uint32_t x_off, uint32_t table_off, uint32_t rows, uint32_t width, uint32_t pos_off) {
    const uint64_t n = uint64_t{rows} * width;
    if (n > 0xffffffffu) fail(EMBER_ERR_UNSUPPORTED, "vulkan add_pos_rows: %llu values", (unsigned long long)n);
    const ElementwisePc pc{7, x_off, table_off, x_off, static_cast<uint32_t>(n), 0, 0, width, pos_off};
    dispatch_flat(kElementwise, &pc, sizeof pc, groups(n, 64));
}

void Recorder::copy_cols(uint32_t x_off, uint32_t y_off, uint32_t rows, const Cols &c) {
    const uint64_t total = uint64_t{rows} * c.groups * c.n;
    if (total > 0xffffffffu) fail(EMBER_ERR_UNSUPPORTED, "vulkan copy_cols: %llu values", (unsigned long long)total);
    struct { uint32_t x_off, y_off, total, x_width, groups, stride, off, n, y_width, y_col; } pc{
        x_off, y_off, static_cast<uint32_t>(total), c.x_width, c.groups, c.x_width / c.groups, c.off, c.n, c.y_width, c.y_col};
    dispatch_flat(kCopyCols, &pc, sizeof pc, groups(total, 64));
}

void Recorder::sigmoid_mul(uint32_t x_off, uint32_t g_off, uint32_t y_off, uint32_t rows, uint32_t width, uint32_t g_width) {
    const uint32_t n = rows * width;
    const ElementwisePc pc{4, x_off, g_off, y_off, n, 0, 0, g_width == 1 ? width : 1, 0};
    dispatch_flat(kElementwise, &pc, sizeof pc, groups(n, 64));
}

void Recorder::ssm_conv(uint32_t x_off, uint32_t y_off, uint32_t c, uint32_t k, uint32_t w_off, const States &s,
                        uint32_t b_off, bool silu) {
    struct { uint32_t x_off, y_off, c, k, w_off, runs_off, n_runs, slot_floats, state_off, b_off, silu; } pc{
        x_off, y_off, c, k, w_off, s.runs_off, s.n_runs, s.slot_floats, s.state_off, b_off, silu ? 1u : 0u};
    dispatch_flat(kSsmConv, &pc, sizeof pc, groups(uint64_t{s.n_runs} * c, 64));
}

void Recorder::ssm_scan(const Scan &sc, const States &s) {
    struct {
        uint32_t xbc_off, dt_off, y_off, n_head, head_dim, n_group, d_state, a_off, d_off, dtb_off;
        uint32_t runs_off, slot_floats, state_off;
    } pc{sc.xbc_off, sc.dt_off, sc.y_off, sc.n_head, sc.head_dim, sc.n_group, sc.d_state, sc.a_off, sc.d_off, sc.dtb_off,
         s.runs_off, s.slot_floats, s.state_off};
    // One workgroup per (head, run): at most 65535 of each.
    if (s.n_runs > 65535 || sc.n_head > 65535)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan ssm_scan: %u heads of %u sequences", sc.n_head, s.n_runs);
    dispatch(kSsmScan, &pc, sizeof pc, sc.n_head, s.n_runs);
}

void Recorder::gated_delta(const Delta &d, const States &s) {
    struct {
        uint32_t qkv_off, a_off, b_off, y_off, n_head, n_head_k, s, grouped, dt_off, decay_off;
        float eps, scale;
        uint32_t runs_off, slot_floats, state_off;
    } pc{d.qkv_off, d.a_off, d.b_off, d.y_off, d.n_head, d.n_head_k, d.head_dim, d.grouped, d.dt_off, d.decay_off,
         d.eps, d.scale, s.runs_off, s.slot_floats, s.state_off};
    // One workgroup per (value head, run): at most 65535 runs (a batch's sequences) and heads.
    if (s.n_runs > 65535 || d.n_head > 65535)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan gated_delta: %u heads of %u sequences", d.n_head, s.n_runs);
    dispatch(kGatedDelta, &pc, sizeof pc, d.n_head, s.n_runs);
}

void Recorder::add(uint32_t y_off, uint32_t x_off, uint32_t n) {
    struct { uint32_t y_off, x_off, n; } pc{y_off, x_off, n};
    dispatch_flat(kAdd, &pc, sizeof pc, groups(n, 64));
}

void Recorder::moe_combine(uint32_t outs_off, uint32_t y_off, uint32_t rows, uint32_t n_out, uint32_t k, uint32_t pos_off,
                           uint32_t gate_off) {
    struct { uint32_t outs_off, y_off, n_tokens, n_out, k, pos_off, w_off; } pc{outs_off, y_off, rows, n_out, k, pos_off,
                                                                              gate_off};
    dispatch_flat(kMoeCombine, &pc, sizeof pc, groups(uint64_t{rows} * n_out, 64));
}

void Recorder::gather(uint32_t x_off, uint32_t y_off, uint32_t width, uint32_t rows, uint32_t rows_off, uint32_t scale_off) {
    struct { uint32_t x_off, y_off, width, rows, rows_off, scale_off; } pc{x_off, y_off, width, rows, rows_off, scale_off};
    dispatch_flat(kGather, &pc, sizeof pc, groups(uint64_t{rows} * width, 64));
}

void Recorder::get_rows(const WeightRef &w, uint32_t ids_off, uint32_t rows, uint32_t y_off) {
    struct { uint32_t w_off, type, n_in, n_out, ids_off, y_off, n_tokens; } pc{
        w.off, static_cast<uint32_t>(weight_layout(w.type)), w.n_in, w.n_out, ids_off, y_off, rows};
    dispatch_flat(kGetRows, &pc, sizeof pc, groups(uint64_t{rows} * w.n_in, 64));
}

void Recorder::kv_store(uint32_t k_off, uint32_t v_off, uint32_t rows, uint32_t n_kv, uint32_t rows_off,
                        uint32_t layer_byte, uint32_t row_bytes, DType type) {
    struct { uint32_t k_off, v_off, n_tokens, n_kv, rows_off, layer_byte, row_bytes, type; } pc{
        k_off, v_off, rows, n_kv, rows_off, layer_byte, row_bytes, static_cast<uint32_t>(type)};
    const uint32_t per_token = type == DType::F16 ? n_kv / 2 : n_kv / 32;
    dispatch_flat(kKvStore, &pc, sizeof pc, groups(uint64_t{rows} * per_token, 64));
}

uint32_t attention_chunk(uint32_t rows, uint32_t max_keys) {
    if (rows > kMaxSplitRows || max_keys <= 64) return 0;
    const uint32_t per = (max_keys + kMaxSplits - 1) / kMaxSplits;
    return std::max(64u, (per + 63) / 64 * 64);
}

void Recorder::attention(const Attn &a, uint32_t rows) {
    struct {
        uint32_t q_off, o_off, n_head, n_head_kv, head_dim, pos_off, tab_off, block_size, layer_byte, row_bytes, type;
        float scale;
        uint32_t chunk, n_split, part_off, window;
        float softcap;
        uint32_t sink_off, local_chunk;
        float temp_scale, temp_offset;
        uint32_t temp_floor;
    } pc{a.q_off,      a.o_off,     a.n_head, a.n_head_kv, a.head_dim, a.pos_off,   a.tab_off, a.block_size,
         a.layer_byte, a.row_bytes, static_cast<uint32_t>(a.type), a.scale, a.chunk, a.n_split, a.part_off, a.window,
         a.softcap,    a.sink_off,  a.local_chunk, a.temp_scale, a.temp_offset, a.temp_floor};
    dispatch(kAttention, &pc, sizeof pc, a.n_head, rows, a.chunk ? a.n_split : 1);
    if (!a.chunk) return;
    struct { uint32_t part_off, o_off, n_tokens, n_head, head_dim, n_split, sink_off; } mc{
        a.part_off, a.o_off, rows, a.n_head, a.head_dim, a.n_split, a.sink_off};
    dispatch_flat(kAttentionMerge, &mc, sizeof mc, groups(uint64_t{rows} * a.n_head * a.head_dim, 64));
}

} // namespace ember::vk
