// vk_model.cpp — tensor upload, context buffers, and the forward pass: the program's steps
// (vk_program.hpp) recorded in order into one command buffer per pass (per decoder layer when the pass
// can be cancelled), submitted once and waited on with a fence.
#include "vk_model.hpp"

#include "backend/backend.hpp"
#include "backend/program_read.hpp"
#include "backend/state_runs.hpp"
#include "backend/window_blocks.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>

namespace ember::vk {

Model::Model(Device &device, const ember_mod_model_desc &d) : dev(device), prog(plan_program(d)) {
    input_buf = desc_input_buf(d);
    if (input_buf >= 0 && (static_cast<uint32_t>(input_buf) >= d.n_bufs || d.bufs[input_buf].rows != EMBER_GRAPH_ROWS_TOKENS))
        fail(EMBER_ERR_INVALID_MODEL, "vulkan: the program's input buffer %d is not a buffer of token rows", input_buf);
    std::vector<uint32_t> packed;
    std::map<const void *, size_t> done;  // a tensor listed twice (by two names, say) is stored once
    for (uint32_t i = 0; i < d.n_tensors; ++i) {
        const ember_mod_tensor &t = d.tensors[i];
        WeightRef w;
        w.type = static_cast<DType>(t.type);
        w.n_in = static_cast<uint32_t>(t.ne[0]);
        w.n_out = static_cast<uint32_t>(t.n_dims > 1 ? t.ne[1] : 1);
        // MOE's 3-D expert stacks: each expert's matrix packed on its own, one after another (vk_moe.hpp).
        const uint32_t n_mat = static_cast<uint32_t>(t.n_dims > 2 ? t.ne[2] : 1);
        if (auto it = done.find(t.data); n_mat == 1 && it != done.end()) {
            const WeightRef &o = tensors[it->second];
            if (o.type == w.type && o.n_in == w.n_in && o.n_out == w.n_out) {
                tensors.push_back(o);
                continue;
            }
        }
        if (packed.size() + packed_words(w.type, w.n_in, w.n_out) * n_mat > 0xffffffffu)
            fail(EMBER_ERR_UNSUPPORTED, "vulkan: weights beyond 2^32 words (16 GiB) are not supported");
        w.off = static_cast<uint32_t>(packed.size());
        const size_t mat_bytes = dtype_row_bytes(w.type, w.n_in) * w.n_out;
        for (uint32_t e = 0; e < n_mat; ++e)
            pack_weight(w.type, static_cast<const uint8_t *>(t.data) + e * mat_bytes, w.n_in, w.n_out, packed);
        done.emplace(t.data, tensors.size());
        tensors.push_back(w);
    }
    for (const ember_graph_node &n : prog.nodes)
        if (n.op == EMBER_GRAPH_MOE && n.sel_bias >= 0) {
            const float *v = static_cast<const float *>(d.tensors[n.sel_bias].data);
            sel_bias[n.sel_bias].assign(v, v + n.n_expert);
        }
    if (packed.empty()) packed.push_back(0);
    weights = dev.create_buffer(packed.size() * 4, false);
    try {
        dev.upload(weights, 0, packed.data(), packed.size() * 4);
    } catch (...) {
        dev.destroy(weights);
        throw;
    }
}

Model::~Model() { dev.destroy(weights); }

ContextSizes context_sizes(const Program &prog, const ember_mod_context_params &p) {
    const DType kv = static_cast<DType>(p.kv_type);
    if (kv != DType::F16 && kv != DType::Q8_0 && kv != DType::Q4_0)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan: KV cache type %u unsupported", p.kv_type);
    if (prog.kv_width % (kv == DType::F16 ? 2 : 32) != 0)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan: a %s KV cache of rows of %u values", dtype_name(kv), prog.kv_width);
    ContextSizes z;
    z.n_layer = prog.n_layer;
    z.kv_row_bytes = dtype_row_bytes(kv, prog.kv_width);
    const uint32_t n_window = context_window_blocks(p);
    z.windowed = window_pool_layers(prog.nodes, prog.n_layer, n_window);
    z.has_kv = prog.has_kv;
    for (uint32_t il = 0; il < prog.n_layer; ++il) {
        z.kv_layer_off.push_back(z.kv_bytes);
        if (z.has_kv[il]) z.kv_bytes += size_t{z.windowed[il] ? n_window : p.n_blocks} * p.block_size * z.kv_row_bytes;
    }
    if (z.kv_bytes > 0xffffffffu)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan: a KV cache of more than 4 GiB per K or V is not supported yet");
    size_t at = 0;
    auto take = [&](size_t n) {
        const size_t o = at;
        at += (n + 15) & ~size_t{15};
        if (at > 0xffffffffu) fail(EMBER_ERR_UNSUPPORTED, "vulkan: activations beyond 2^32 words");
        return static_cast<uint32_t>(o);
    };
    for (size_t i = 0; i < prog.bufs.size(); ++i) {
        const auto b = static_cast<int32_t>(i);
        z.buf_off.push_back(prog.buf_used[i] ? take(size_t{prog.rows(b, p.n_batch, p.n_logits)} * prog.width(b)) : kNone);
    }
    const size_t q = std::max(size_t{p.n_batch} * prog.quant_width[EMBER_GRAPH_ROWS_TOKENS],
                              size_t{p.n_logits} * prog.quant_width[EMBER_GRAPH_ROWS_LOGITS]);
    z.xq = take(q / 4), z.xd = take(q / 32 + 1), z.xs = take(q / 32 + 1);
    size_t part = 0;
    for (const ember_graph_node &n : prog.nodes)
        if (n.op == EMBER_GRAPH_ATTENTION || n.op == EMBER_GRAPH_ATTENTION_EXT)
            part = std::max(part, attention_part_floats(p.n_batch, n.n_head, n.head_dim));
    z.part = take(part);
    // MOE: an expert gets at most every token of a pass (each token picks it once at most).
    if (prog.moe_experts) {
        const size_t rows = std::max(p.n_batch, p.n_logits);
        z.moe.xin = take(rows * prog.moe_in), z.moe.g = take(rows * prog.moe_ff), z.moe.u = take(rows * prog.moe_ff);
        z.moe.outs = take(rows * prog.moe_used * prog.moe_out);
        z.moe.q = {z.xq, z.xd, z.xs};
    }
    z.acts_words = at;
    // The recurrent states, addressed by the shaders in floats (32-bit indices).
    z.n_state_slots = p.struct_size >= offsetof(ember_mod_context_params, n_state_slots) + sizeof p.n_state_slots
                          ? p.n_state_slots : 0;
    const uint64_t state_floats = uint64_t{z.n_state_slots} * prog.state_floats;
    if (state_floats > 0xffffffffu)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan: %u recurrent states of %u floats (at most 2^32 floats in all)", z.n_state_slots,
             prog.state_floats);
    z.state_bytes = static_cast<size_t>(state_floats) * sizeof(float);
    return z;
}

Context::Context(Model &m, const ember_mod_context_params &p) : m_(m), dev_(m.dev), p_(p) {
    if (p.n_blocks == 0 || p.block_size == 0 || p.n_batch == 0 || p.n_logits == 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "n_blocks, block_size, n_batch and n_logits must be positive");
    kv_type_ = static_cast<DType>(p.kv_type);
    p_.n_window_blocks = context_window_blocks(p);   // 0 from a core whose params end before it
    z_ = context_sizes(m.prog, p);
    if (m.prog.state_floats > 0 && z_.n_state_slots == 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan: a model with recurrent layers needs state slots in its context");
    const DeviceApi &f = dev_.fn();
    try {
        acts_ = dev_.create_buffer(z_.acts_words * 4, false);
        // (A buffer is never empty: a model of recurrent layers only has no K/V rows, one without state no
        // states, and each is still bound.)
        kc_ = dev_.create_buffer(std::max<size_t>(z_.kv_bytes, 16), false);
        vc_ = dev_.create_buffer(std::max<size_t>(z_.kv_bytes, 16), false);
        io_ = dev_.create_buffer(4096, true);
        states_ = dev_.create_buffer(std::max<size_t>(z_.state_bytes, 16), false);
        if (z_.state_bytes > 0) {
            // A slot no sequence has written reads as the zero state.
            const Buffer &st = states_;
            dev_.run_once([&](VkCommandBuffer cb) { f.vkCmdFillBuffer(cb, st.buf, 0, VK_WHOLE_SIZE, 0); });
        }
        const Buffer *bufs[kBindingCount] = {&m.weights, &acts_, &kc_, &vc_, &io_, &states_};
        bind_.create(dev_, bufs);
        VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
        pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
        check(f.vkCreateCommandPool(dev_.device(), &pci, nullptr, &pool_), "vkCreateCommandPool");
        VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        ai.commandPool = pool_;
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        ai.commandBufferCount = 1;
        check(f.vkAllocateCommandBuffers(dev_.device(), &ai, &cb_), "vkAllocateCommandBuffers");
        VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        check(f.vkCreateFence(dev_.device(), &fci, nullptr, &fence_), "vkCreateFence");
    } catch (...) {
        release();
        throw;
    }
}

Context::~Context() { release(); }

void Context::release() {
    const DeviceApi &f = dev_.fn();
    if (fence_) f.vkDestroyFence(dev_.device(), fence_, nullptr);
    if (pool_) f.vkDestroyCommandPool(dev_.device(), pool_, nullptr);
    fence_ = VK_NULL_HANDLE, pool_ = VK_NULL_HANDLE;
    bind_.destroy(dev_);
    dev_.destroy(acts_), dev_.destroy(kc_), dev_.destroy(vc_), dev_.destroy(io_), dev_.destroy(states_);
}

void Context::ensure_io(size_t words) {
    if (io_.size >= words * 4) return;
    // Grows (never shrinks); the descriptor set is rewritten to the new buffer. No pass is in flight
    // (forward waits for its own), so the old buffer can go at once.
    Buffer bigger = dev_.create_buffer(std::max(words * 4, io_.size * 2), true);
    dev_.destroy(io_);
    io_ = bigger;
    const Buffer *bufs[kBindingCount] = {&m_.weights, &acts_, &kc_, &vc_, &io_, &states_};
    bind_.update(dev_, bufs);
}

// io: tokens, positions, cache rows, table offsets, logits rows, (with a window pool) the window layers'
// cache rows and table offsets, the distinct block tables (window tables among them), each rope set's
// cosines and sines, MOE's router logits and routing lists, the state runs, then room for the logits.
Context::Io Context::fill_io(const ember_mod_batch &b) {
    const Program &P = m_.prog;
    const uint32_t n = b.n_tokens, nl = b.n_logits, bs = p_.block_size;
    Io io;
    const bool split = p_.n_window_blocks > 0;
    io.tok = 0, io.pos = n, io.rows = 2 * n, io.tab = 3 * n, io.lrows = 4 * n;
    io.wrows = split ? io.lrows + nl : kNone, io.wtab = split ? io.lrows + nl + n : kNone;
    std::map<const int32_t *, uint32_t> table_len;
    io.max_keys = 0;
    for (uint32_t t = 0; t < n; ++t) {
        io.max_keys = std::max(io.max_keys, static_cast<uint32_t>(b.pos[t]) + 1);
        for (const int32_t *tab : {b.tables[t], split ? b.window_tables[t] : nullptr}) {
            if (!tab) continue;
            uint32_t &len = table_len[tab];
            len = std::max(len, static_cast<uint32_t>(b.pos[t]) / bs + 1);
        }
    }
    size_t words = io.lrows + nl + (split ? 2 * n : 0);
    io.seq_last = static_cast<uint32_t>(words), words += n;
    std::map<const int32_t *, uint32_t> table_at;
    for (auto [tab, len] : table_len) table_at[tab] = static_cast<uint32_t>(words), words += len;
    for (const RopeSet &rs : P.ropes) io.rope.push_back(static_cast<uint32_t>(words)), words += size_t{n} * rs.n_rot;
    const size_t slots = size_t{std::max(n, nl)} * P.moe_used;
    io.moe_logits = static_cast<uint32_t>(words), words += size_t{std::max(n, nl)} * P.moe_experts;
    io.moe.token = static_cast<uint32_t>(words), io.moe.pos = static_cast<uint32_t>(words + slots);
    io.moe.gate = static_cast<uint32_t>(words + 2 * slots), io.moe.row_gate = static_cast<uint32_t>(words + 3 * slots);
    words += 4 * slots;
    uint32_t n_runs = 0;
    const std::vector<int32_t> runs = state_runs(b, n_runs);
    io.runs = static_cast<uint32_t>(words), io.n_runs = n_runs, words += runs.size();
    io.inputs = io.hidden = kNone;
    if (P.input_width) {
        if (b.struct_size < offsetof(ember_mod_batch, inputs) + sizeof b.inputs || !b.inputs)
            fail(EMBER_ERR_INTERNAL, "vulkan forward: the program reads input rows the batch does not have");
        io.inputs = static_cast<uint32_t>(words), words += size_t{n} * P.input_width;
    }
    if (batch_hidden(b)) {
        if (P.hidden_buf < 0) fail(EMBER_ERR_INTERNAL, "vulkan forward: hidden rows asked of a program without them");
        io.hidden = static_cast<uint32_t>(words), words += size_t{n} * P.width(P.hidden_buf);
    }
    io.input = static_cast<uint32_t>(words);
    if (m_.input_buf >= 0) words += size_t{n} * P.width(m_.input_buf);
    io.logits = static_cast<uint32_t>(words);
    words += size_t{nl} * P.n_vocab;
    if (words > 0xffffffffu) fail(EMBER_ERR_UNSUPPORTED, "vulkan forward: a pass of %zu words of inputs and logits", words);
    ensure_io(words);
    auto *w = static_cast<int32_t *>(io_.map);
    for (uint32_t t = 0; t < n; ++t) {
        w[io.tok + t] = b.tokens[t];
        w[io.pos + t] = b.pos[t];
        w[io.rows + t] = b.tables[t][b.pos[t] / bs] * static_cast<int32_t>(bs) + b.pos[t] % static_cast<int32_t>(bs);
        w[io.tab + t] = static_cast<int32_t>(table_at[b.tables[t]]);
        if (!split) continue;
        const int32_t *wt = b.window_tables[t];
        w[io.wrows + t] = wt[b.pos[t] / bs] * static_cast<int32_t>(bs) + b.pos[t] % static_cast<int32_t>(bs);
        w[io.wtab + t] = static_cast<int32_t>(table_at[wt]);
    }
    for (uint32_t i = 0; i < nl; ++i) w[io.lrows + i] = b.logits_rows[i];
    // A sequence's tokens are consecutive with one block table (graph.h): each gets its run's last position,
    // which the attention under the SEQUENCE mask reads in place of the token's own.
    for (uint32_t t0 = 0; t0 < n;) {
        uint32_t t1 = t0 + 1;
        int32_t last = b.pos[t0];
        while (t1 < n && b.tables[t1] == b.tables[t0]) last = std::max(last, b.pos[t1++]);
        for (uint32_t t = t0; t < t1; ++t) w[io.seq_last + t] = last;
        t0 = t1;
    }
    if (io.inputs != kNone) std::memcpy(w + io.inputs, b.inputs, size_t{n} * P.input_width * sizeof(float));
    for (auto [tab, at] : table_at) std::memcpy(w + at, tab, table_len[tab] * sizeof(int32_t));
    if (!runs.empty()) std::memcpy(w + io.runs, runs.data(), runs.size() * sizeof(int32_t));
    if (m_.input_buf >= 0) {
        if (b.struct_size < offsetof(ember_mod_batch, input) + sizeof b.input || !b.input)
            fail(EMBER_ERR_INTERNAL, "vulkan forward: a program with an input buffer needs the batch's input rows");
        std::memcpy(w + io.input, b.input, size_t{n} * P.width(m_.input_buf) * sizeof(float));
    }
    for (size_t k = 0; k < P.ropes.size(); ++k)
        rope_table(P.ropes[k].freq, b.pos, n, static_cast<float *>(io_.map) + io.rope[k], P.ropes[k].mscale);
    return io;
}

void Context::record(Recorder &r, const Step &s, const Io &io, uint32_t n, uint32_t nl) {
    const Program &P = m_.prog;
    const ember_graph_node &nd = P.nodes[s.node];
    const uint32_t rows = P.rows(nd.op == EMBER_GRAPH_KV_STORE ? nd.src : s.dst, n, nl);
    if (rows == 0) return;  // no logits wanted: the output's steps have nothing to do
    // A window layer's rows: its own pool's cache, rows and tables (the others' when there is none). An
    // attention node reads the cache of ember_graph_kv_layer (a shared one: an earlier layer's).
    const int32_t kl = ember_graph_kv_layer(&nd);
    const bool cached = kl >= 0 && static_cast<uint32_t>(kl) < z_.n_layer;
    const bool win = cached && z_.windowed[static_cast<size_t>(kl)];
    const uint32_t layer_byte = cached ? static_cast<uint32_t>(z_.kv_layer_off[static_cast<size_t>(kl)]) : 0;
    const uint32_t cache_rows = win ? io.wrows : io.rows, tables = win ? io.wtab : io.tab;
    const uint32_t row_bytes = static_cast<uint32_t>(z_.kv_row_bytes);
    switch (nd.op) {
    case EMBER_GRAPH_GET_ROWS: r.get_rows(m_.tensors[static_cast<size_t>(nd.w)], io.tok, rows, off(s.dst)); break;
    case EMBER_GRAPH_RMS_NORM:
        r.rmsnorm(off(s.src), off(s.dst), m_.vec(nd.w), nd.n, P.width(s.dst) / nd.n, rows, s.gathered ? io.lrows : kNone,
                  nd.eps);
        break;
    case EMBER_GRAPH_LAYER_NORM:
        r.rmsnorm(off(s.src), off(s.dst), m_.vec(nd.w), P.width(s.dst), 1, rows, kNone, nd.eps, true, m_.vec(nd.b));
        break;
    case EMBER_GRAPH_GELU:
        r.elementwise(Recorder::Ew::Gelu, off(s.src), kNone, off(s.dst), rows * P.width(s.dst));
        break;
    case EMBER_GRAPH_ADD_POS_ROWS: {
        const WeightRef &t = m_.tensors[static_cast<size_t>(nd.w)];
        if (io.max_keys > t.n_out)
            fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan forward: position %u is past the position table's %u rows",
                 io.max_keys - 1, t.n_out);
        r.add_pos_rows(off(s.dst), t.off, rows, P.width(s.dst), io.pos);
        break;
    }
    case EMBER_GRAPH_MATMUL: {
        const WeightRef &w = m_.tensors[static_cast<size_t>(nd.w)];
        const Recorder::QActs q{z_.xq, z_.xd, z_.xs};
        if (s.quantize) r.quantize(off(s.src), w.n_in, rows, q);
        r.matmul(w, off(s.src), q, rows, off(s.dst), m_.vec(nd.b), s.accumulate);
        break;
    }
    case EMBER_GRAPH_ROPE:
    case EMBER_GRAPH_ROPE_YARN:
        r.rope(off(s.dst), rows, nd.n_head, nd.head_dim, nd.n_rot, nd.rope_mode == EMBER_GRAPH_ROPE_NEOX, io.rope[s.rope]);
        break;
    case EMBER_GRAPH_KV_STORE:
        r.kv_store(off(nd.src), off(nd.src2), rows, P.width(nd.src), cache_rows, layer_byte, row_bytes, kv_type_);
        break;
    case EMBER_GRAPH_ATTENTION:
    case EMBER_GRAPH_ATTENTION_EXT: {
        Recorder::Attn a{off(s.src), off(s.dst), nd.n_head, nd.n_head_kv, nd.head_dim, io.pos, tables, p_.block_size,
                         layer_byte, row_bytes, kv_type_, nd.scale};
        if (nd.op == EMBER_GRAPH_ATTENTION_EXT) {
            a.window = nd.window, a.softcap = nd.softcap, a.sink_off = m_.vec(nd.w);
            a.local_chunk = nd.attn_local_chunk, a.temp_scale = nd.attn_temp_scale;
            a.temp_offset = nd.attn_temp_offset, a.temp_floor = nd.attn_temp_floor;
            // Both ways: a query sees its sequence's keys up to the last one in the pass, so attention.comp
            // reads that position where it reads the query's own (max_keys already covers it).
            if (nd.attn_mask == EMBER_GRAPH_MASK_SEQUENCE) a.pos_off = io.seq_last;
        }
        // Under a window (or in a local chunk) a query sees at most `window` keys: the splits cover those.
        uint32_t keys = a.window ? std::min(io.max_keys, a.window) : io.max_keys;
        if (a.local_chunk) keys = std::min(keys, a.local_chunk);
        a.chunk = attention_chunk(rows, keys);
        if (a.chunk) a.n_split = (keys + a.chunk - 1) / a.chunk, a.part_off = z_.part;
        r.attention(a, rows);
        break;
    }
    case EMBER_GRAPH_ADD: r.add(off(s.dst), off(s.src), rows * P.width(s.dst)); break;
    case EMBER_GRAPH_SWIGLU: r.swiglu(off(nd.src), off(nd.src2), off(s.dst), rows * P.width(s.dst)); break;
    case EMBER_GRAPH_SCALE:
        r.elementwise(Recorder::Ew::Scale, off(s.src), kNone, off(s.dst), rows * P.width(s.dst), nd.scale);
        break;
    case EMBER_GRAPH_SOFTCAP:
        r.elementwise(Recorder::Ew::Softcap, off(s.src), kNone, off(s.dst), rows * P.width(s.dst), nd.softcap);
        break;
    case EMBER_GRAPH_GEGLU:
        r.elementwise(Recorder::Ew::Geglu, off(nd.src), off(nd.src2), off(s.dst), rows * P.width(s.dst));
        break;
    case EMBER_GRAPH_MOE: {
        // route_ is this node's (forward read its router logits back first).
        const auto expert = [&](int32_t t, uint32_t *stride) {
            const WeightRef &w = m_.tensors[static_cast<size_t>(t)];
            *stride = static_cast<uint32_t>(packed_words(w.type, w.n_in, w.n_out));
            return w;
        };
        MoeExperts e;
        e.gate = expert(nd.w, &e.gate_stride), e.up = expert(nd.w2, &e.up_stride), e.down = expert(nd.w3, &e.down_stride);
        e.gate_b = m_.vec(nd.b), e.up_b = m_.vec(nd.b2), e.down_b = m_.vec(nd.b3);
        e.act = nd.moe_act, e.alpha = nd.act_alpha, e.limit = nd.act_limit;
        moe_record(r, e, route_, io.moe, z_.moe, off(s.src), off(s.dst), rows, nd.n_expert_used);
        break;
    }
    case EMBER_GRAPH_GATHER_LOGITS: r.gather(off(s.src), off(s.dst), P.width(s.dst), rows, io.lrows); break;
    case EMBER_GRAPH_INPUT_ROWS: {
        // A transfer from io into the activations, between the kernels before and after it.
        const DeviceApi &f = dev_.fn();
        VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        mb.srcAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        f.vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, nullptr,
                               0, nullptr);
        const VkBufferCopy c{size_t{io.inputs} * 4, size_t{off(s.dst)} * 4, size_t{rows} * P.width(s.dst) * 4};
        f.vkCmdCopyBuffer(cb_, io_.buf, acts_.buf, 1, &c);
        mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
        f.vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr,
                               0, nullptr);
        break;
    }
    case EMBER_GRAPH_COPY_COLS:
        r.copy_cols(off(nd.src), off(s.dst), rows, {P.width(nd.src), nd.n_head, nd.n, nd.head_dim, P.width(s.dst), nd.n_rot});
        break;
    case EMBER_GRAPH_SIGMOID_MUL:
        r.sigmoid_mul(off(nd.src), off(nd.src2), off(s.dst), rows, P.width(s.dst), P.width(nd.src2));
        break;
    case EMBER_GRAPH_SSM_CONV: {
        const Recorder::States st{io.runs, io.n_runs, P.state_floats, nd.state_offset};
        r.ssm_conv(off(nd.src), off(s.dst), P.width(nd.src), m_.tensors[static_cast<size_t>(nd.w)].n_in, m_.vec(nd.w), st,
                   nd.b >= 0 ? m_.vec(nd.b) : Recorder::kNoBias, nd.n == EMBER_GRAPH_SSM_CONV_SILU);
        break;
    }
    case EMBER_GRAPH_SSM_SCAN: {
        const Recorder::States st{io.runs, io.n_runs, P.state_floats, nd.state_offset};
        r.ssm_scan({off(nd.src), off(nd.src2), off(s.dst), nd.n_head, nd.head_dim, nd.n_head_kv, nd.n, m_.vec(nd.w),
                    m_.vec(nd.w2), m_.vec(nd.b)},
                   st);
        break;
    }
    case EMBER_GRAPH_MUL:
        r.elementwise(Recorder::Ew::Mul, off(nd.src), off(nd.src2), off(s.dst), rows * P.width(s.dst));
        break;
    case EMBER_GRAPH_GATED_DELTA: {
        const Recorder::States st{io.runs, io.n_runs, P.state_floats, nd.state_offset};
        const Recorder::Delta d{off(nd.src), off(nd.src2), off(nd.src3), off(s.dst), nd.n_head, nd.n_head_kv, nd.head_dim,
                                nd.n, m_.vec(nd.w), m_.vec(nd.w2), nd.eps, nd.scale};
        r.gated_delta(d, st);
        break;
    }
    default: fail(EMBER_ERR_INTERNAL, "vulkan: op %u", nd.op);
    }
}

void Context::forward(const ember_mod_batch &b) {
    const Program &P = m_.prog;
    const uint32_t n = b.n_tokens, nl = b.n_logits, bs = p_.block_size;
    if (n == 0 || n > p_.n_batch || nl > p_.n_logits)
        fail(EMBER_ERR_INTERNAL, "vulkan forward: %u tokens / %u logits exceed the context's %u / %u", n, nl, p_.n_batch,
             p_.n_logits);
    for (uint32_t t = 0; t < n; ++t) {
        if (b.tokens[t] < 0 || static_cast<uint32_t>(b.tokens[t]) >= P.n_token_ids)
            fail(EMBER_ERR_INTERNAL, "vulkan forward: token %d out of range", b.tokens[t]);
        const int32_t block = b.pos[t] < 0 ? -1 : b.tables[t][b.pos[t] / static_cast<int32_t>(bs)];
        if (b.pos[t] < 0 || block < 0 || static_cast<uint32_t>(block) >= p_.n_blocks)
            fail(EMBER_ERR_INTERNAL, "vulkan forward: token %u at position %d maps to block %d of %u", t, b.pos[t], block,
                 p_.n_blocks);
        if (p_.n_window_blocks == 0) continue;
        // (Only the token's own window block is checked: the window layers read no further back than the
        // window, which the window table keeps; see kv/window_table.hpp.)
        if (b.struct_size < offsetof(ember_mod_batch, window_tables) + sizeof b.window_tables || !b.window_tables)
            fail(EMBER_ERR_INTERNAL, "vulkan forward: a context with window blocks needs the batch's window tables");
        const int32_t wblock = b.window_tables[t][b.pos[t] / static_cast<int32_t>(bs)];
        if (wblock < 0 || static_cast<uint32_t>(wblock) >= p_.n_window_blocks)
            fail(EMBER_ERR_INTERNAL, "vulkan forward: token %u at position %d maps to window block %d of %u", t, b.pos[t],
                 wblock, p_.n_window_blocks);
    }
    for (uint32_t i = 0; i < nl; ++i)
        if (b.logits_rows[i] < 0 || static_cast<uint32_t>(b.logits_rows[i]) >= n)
            fail(EMBER_ERR_INTERNAL, "vulkan forward: logits row %d of %u", b.logits_rows[i], n);
    const Io io = fill_io(b);

    // One command buffer for the pass; when it may be cancelled and is long (a prompt chunk), one per
    // decoder layer (the first with what precedes it, the last with what follows), the flag checked
    // before each.
    const bool chunked = b.cancel && n >= 32;
    const DeviceApi &f = dev_.fn();
    size_t si = 0;
    size_t routed = SIZE_MAX;  // the MOE step whose route_ is made
    while (true) {
        if (chunked && b.cancel(b.cancel_data)) fail(EMBER_ERR_CANCELLED, "vulkan forward cancelled");
        VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        check(f.vkResetCommandBuffer(cb_, 0), "vkResetCommandBuffer");
        check(f.vkBeginCommandBuffer(cb_, &bi), "vkBeginCommandBuffer");
        Recorder r(dev_, cb_, bind_.set);
        if (si == 0 && m_.input_buf >= 0) record_input(io, n);
        bool has_layer = false;
        const ember_graph_node *route = nullptr;  // a MOE node whose router logits this buffer ends with
        for (; si < P.steps.size(); ++si) {
            const int32_t layer = P.steps[si].layer;
            const bool in_decoder = layer >= 0 && static_cast<uint32_t>(layer) < P.n_layer;
            if (chunked && in_decoder && has_layer && layer != P.steps[si - 1].layer) break;
            const ember_graph_node &nd = P.nodes[P.steps[si].node];
            if (nd.op == EMBER_GRAPH_MOE && routed != si && P.rows(nd.dst, n, nl) > 0) {
                route = &nd;
                break;
            }
            has_layer |= in_decoder;
            record(r, P.steps[si], io, n, nl);
        }
        if (route) {
            // The router logits to the host: the routing decides which experts the next buffer runs.
            const uint32_t rows = P.rows(route->dst, n, nl);
            r.to_transfer();
            VkBufferCopy c{size_t{off(route->src2)} * 4, size_t{io.moe_logits} * 4, size_t{rows} * route->n_expert * 4};
            f.vkCmdCopyBuffer(cb_, acts_.buf, io_.buf, 1, &c);
            check(f.vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
            dev_.submit_wait(cb_, fence_);
            route_ = moe_route(static_cast<const float *>(io_.map) + io.moe_logits, rows, route->n_expert,
                               route->n_expert_used, route->moe_gating, m_.sel_bias_of(route->sel_bias));
            moe_put_route(route_, io.moe, static_cast<int32_t *>(io_.map));
            routed = si;
            continue;
        }
        const bool last = si == P.steps.size();
        if (last && (nl > 0 || io.hidden != kNone)) r.to_transfer();
        if (last && nl > 0) {
            VkBufferCopy c{size_t{off(P.logits_buf)} * 4, size_t{io.logits} * 4, size_t{nl} * P.n_vocab * 4};
            f.vkCmdCopyBuffer(cb_, acts_.buf, io_.buf, 1, &c);
        }
        if (last && io.hidden != kNone) {
            VkBufferCopy c{size_t{off(P.hidden_buf)} * 4, size_t{io.hidden} * 4, size_t{n} * P.width(P.hidden_buf) * 4};
            f.vkCmdCopyBuffer(cb_, acts_.buf, io_.buf, 1, &c);
        }
        check(f.vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
        dev_.submit_wait(cb_, fence_);
        if (last) break;
    }
    if (nl > 0) std::memcpy(b.logits, static_cast<const float *>(io_.map) + io.logits, size_t{nl} * P.n_vocab * sizeof(float));
    if (io.hidden != kNone)
        std::memcpy(batch_hidden(b), static_cast<const float *>(io_.map) + io.hidden, size_t{n} * P.width(P.hidden_buf) * sizeof(float));
}

// The input rows (a part of a program cut across devices) into their buffer, before the first dispatch.
void Context::record_input(const Io &io, uint32_t n) {
    const DeviceApi &f = dev_.fn();
    VkBufferCopy c{size_t{io.input} * 4, size_t{off(m_.input_buf)} * 4, size_t{n} * m_.prog.width(m_.input_buf) * 4};
    f.vkCmdCopyBuffer(cb_, io_.buf, acts_.buf, 1, &c);
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    f.vkCmdPipelineBarrier(cb_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr,
                           0, nullptr);
}

size_t Context::row_off(uint32_t il, int32_t block, uint32_t p) const {
    const uint32_t bs = p_.block_size;
    return z_.kv_layer_off[il] + (static_cast<size_t>(block) * bs + p % bs) * z_.kv_row_bytes;
}

void Context::copy_block(int32_t src, int32_t dst) {
    if (src == dst) return;
    const CopyBlockIds ids = copy_block_ids(src, dst, p_.n_blocks, p_.n_window_blocks, "vulkan");
    const size_t block = size_t{p_.block_size} * z_.kv_row_bytes;
    std::vector<VkBufferCopy> c;
    for (uint32_t il = 0; il < m_.prog.n_layer; ++il)
        if (z_.has_kv[il] && z_.windowed[il] == ids.window)
            c.push_back({z_.kv_layer_off[il] + ids.src * block, z_.kv_layer_off[il] + ids.dst * block, block});
    if (c.empty()) return;   // (a copy of no regions is invalid usage)
    dev_.run_once([&](VkCommandBuffer cb) {
        dev_.fn().vkCmdCopyBuffer(cb, kc_.buf, kc_.buf, static_cast<uint32_t>(c.size()), c.data());
        dev_.fn().vkCmdCopyBuffer(cb, vc_.buf, vc_.buf, static_cast<uint32_t>(c.size()), c.data());
    });
}

// With a window pool, `table` is ceil(n / block_size) main blocks, then as many window blocks.
void Context::kv_copies(const int32_t *table, uint32_t n, bool to_stage, std::vector<VkBufferCopy> &ck,
                        std::vector<VkBufferCopy> &cv) const {
    const size_t row = z_.kv_row_bytes, per_layer = 2 * size_t{n} * row;
    const uint32_t bs = p_.block_size, nb = (n + bs - 1) / bs;
    size_t at = 0;   // the staging of the layer: the layers that keep rows, one after another
    for (uint32_t il = 0; il < m_.prog.n_layer; ++il) {
        if (!z_.has_kv[il]) continue;
        const int32_t *t = z_.windowed[il] ? table + nb : table;
        for (uint32_t p = 0; p < n; ++p) {
            if (t[p / bs] < 0) continue;   // released: no window layer reads it again
            const size_t cache = row_off(il, t[p / bs], p), k = at + p * row, v = k + n * row;
            ck.push_back(to_stage ? VkBufferCopy{cache, k, row} : VkBufferCopy{k, cache, row});
            cv.push_back(to_stage ? VkBufferCopy{cache, v, row} : VkBufferCopy{v, cache, row});
        }
        at += per_layer;
    }
}

size_t Context::kv_stage_bytes(uint32_t n) const {
    size_t layers = 0;
    for (bool k : z_.has_kv) layers += k ? 1 : 0;
    return 2 * size_t{n} * z_.kv_row_bytes * layers;
}

// Layout (the CPU's): for each layer that keeps rows, the K rows of positions 0..n-1, then their V rows;
// the rows of released window blocks read as zeros and are not written back.
void Context::read_kv(const int32_t *table, uint32_t n, uint8_t *dst) {
    const size_t bytes = kv_stage_bytes(n);
    if (bytes == 0) return;   // no positions, or no layer keeps rows
    Buffer st = dev_.create_buffer(bytes, true);
    try {
        std::vector<VkBufferCopy> ck, cv;
        kv_copies(table, n, true, ck, cv);
        std::memset(st.map, 0, bytes);   // (host writes before a submission are visible to it)
        if (!ck.empty())
            dev_.run_once([&](VkCommandBuffer cb) {
                dev_.fn().vkCmdCopyBuffer(cb, kc_.buf, st.buf, static_cast<uint32_t>(ck.size()), ck.data());
                dev_.fn().vkCmdCopyBuffer(cb, vc_.buf, st.buf, static_cast<uint32_t>(cv.size()), cv.data());
            });
        std::memcpy(dst, st.map, bytes);
    } catch (...) {
        dev_.destroy(st);
        throw;
    }
    dev_.destroy(st);
}

void Context::write_kv(const int32_t *table, uint32_t n, const uint8_t *src) {
    const size_t bytes = kv_stage_bytes(n);
    if (bytes == 0) return;   // no positions, or no layer keeps rows
    Buffer st = dev_.create_buffer(bytes, true);
    try {
        std::memcpy(st.map, src, bytes);
        std::vector<VkBufferCopy> ck, cv;
        kv_copies(table, n, false, ck, cv);
        if (!ck.empty())
            dev_.run_once([&](VkCommandBuffer cb) {
                dev_.fn().vkCmdCopyBuffer(cb, st.buf, kc_.buf, static_cast<uint32_t>(ck.size()), ck.data());
                dev_.fn().vkCmdCopyBuffer(cb, st.buf, vc_.buf, static_cast<uint32_t>(cv.size()), cv.data());
            });
    } catch (...) {
        dev_.destroy(st);
        throw;
    }
    dev_.destroy(st);
}

void Context::check_slot(int32_t slot, const char *what) const {
    if (slot < 0 || static_cast<uint32_t>(slot) >= z_.n_state_slots)
        fail(EMBER_ERR_INTERNAL, "vulkan %s: state slot %d of %u", what, slot, z_.n_state_slots);
}

std::vector<int32_t> Context::state_runs(const ember_mod_batch &b, uint32_t &n_runs) const {
    std::vector<int32_t> runs;   // t0, t1, slot, src, keep per run, then the kept slots of every token
    n_runs = 0;
    if (m_.prog.state_floats == 0) return runs;
    const std::vector<SlotRun> sr = slot_runs(b, z_.n_state_slots, "vulkan forward");
    const int32_t *keep = kept_slots(b, z_.n_state_slots, sr, "vulkan forward");
    n_runs = static_cast<uint32_t>(sr.size());
    const int32_t list = static_cast<int32_t>(5 * sr.size());   // the kept slots' place after the runs
    for (const SlotRun &r : sr)
        runs.insert(runs.end(), {static_cast<int32_t>(r.t0), static_cast<int32_t>(r.t1), r.slot, r.from,
                                 keep ? list + static_cast<int32_t>(r.t0) : -1});
    if (keep) runs.insert(runs.end(), keep, keep + b.n_tokens);
    return runs;
}

void Context::copy_state(int32_t src, int32_t dst) {
    check_slot(src, "copy_state");
    check_slot(dst, "copy_state");
    if (src == dst) return;
    const size_t bytes = size_t{m_.prog.state_floats} * sizeof(float);
    dev_.run_once([&](VkCommandBuffer cb) {
        const VkBufferCopy c{static_cast<size_t>(src) * bytes, static_cast<size_t>(dst) * bytes, bytes};
        dev_.fn().vkCmdCopyBuffer(cb, states_.buf, states_.buf, 1, &c);
    });
}

void Context::read_state(int32_t slot, float *dst) {
    check_slot(slot, "read_state");
    const size_t bytes = size_t{m_.prog.state_floats} * sizeof(float);
    dev_.download(states_, static_cast<size_t>(slot) * bytes, dst, bytes);
}

void Context::write_state(int32_t slot, const float *src) {
    check_slot(slot, "write_state");
    const size_t bytes = size_t{m_.prog.state_floats} * sizeof(float);
    dev_.upload(states_, static_cast<size_t>(slot) * bytes, src, bytes);
}

} // namespace ember::vk
