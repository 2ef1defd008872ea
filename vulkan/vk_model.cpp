// vk_model.cpp — weights upload, context buffers, and the forward pass: one command buffer per pass
// (per chunk of layers when the pass can be cancelled), submitted once and waited on with a fence.
//
// The decoder is cpu/cpu_forward.cpp's, step for step, so that both backends round alike: RMSNorm,
// Q/K/V products (+ biases), rope, K/V rows stored in the cache, attention, output product added to
// the residual, RMSNorm, gate/up products, SwiGLU, down product added to the residual; at the end the
// output norm of the rows whose logits are wanted and the vocabulary product.
#include "vk_model.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

namespace ember::vk {

Hp hparams(const ember_mod_model_desc &d) {
    Hp h{d.n_vocab, d.n_embd, d.n_layer, d.n_head, d.n_head_kv, d.head_dim, d.n_ff, d.n_rot, d.rope_neox != 0,
         d.norm_eps, d.rope_theta, d.rope_freq_scale};
    if (h.head_dim == 0 || h.head_dim > 256 || h.n_head_kv == 0 || h.n_head % h.n_head_kv != 0 || h.n_rot % 2 != 0 ||
        h.n_rot > h.head_dim)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan: head_dim %u (at most 256), n_head %u, n_head_kv %u, n_rot %u unsupported",
             h.head_dim, h.n_head, h.n_head_kv, h.n_rot);
    return h;
}

Model::Model(Device &device, const ember_mod_model_desc &d) : dev(device), hp(hparams(d)) {
    std::vector<uint32_t> packed;
    std::map<const ember_mod_tensor *, WeightRef> done;  // tied tensors (output = tok_embd) stored once
    auto add = [&](const ember_mod_tensor *t) -> WeightRef {
        if (!t) fail(EMBER_ERR_INVALID_MODEL, "vulkan: a required tensor is missing");
        if (auto it = done.find(t); it != done.end()) return it->second;
        WeightRef w;
        w.type = static_cast<DType>(t->type);
        w.n_in = static_cast<uint32_t>(t->ne[0]);
        w.n_out = static_cast<uint32_t>(t->n_dims > 1 ? t->ne[1] : 1);
        if (!weight_type_supported(w.type))
            fail(EMBER_ERR_UNSUPPORTED, "vulkan: weight type %s (tensor of %u x %u) is not supported yet",
                 dtype_name(w.type), w.n_out, w.n_in);
        w.off = static_cast<uint32_t>(packed.size());
        pack_weight(w.type, t->data, w.n_in, w.n_out, packed);
        done.emplace(t, w);
        return w;
    };
    auto vec = [&](const ember_mod_tensor *t) -> uint32_t {
        if (!t) return kNone;
        if (t->type != 0) fail(EMBER_ERR_UNSUPPORTED, "vulkan: norm and bias vectors must be F32");
        return add(t).off;
    };
    tok_embd = add(d.tok_embd);
    output = add(d.output);
    output_norm = vec(d.output_norm);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const ember_mod_layer &l = d.layers[il];
        LayerRefs r;
        r.attn_norm = vec(l.attn_norm), r.ffn_norm = vec(l.ffn_norm);
        r.bq = vec(l.bq), r.bk = vec(l.bk), r.bv = vec(l.bv), r.bo = vec(l.bo);
        r.wq = add(l.wq), r.wk = add(l.wk), r.wv = add(l.wv), r.wo = add(l.wo);
        r.gate = add(l.ffn_gate), r.up = add(l.ffn_up), r.down = add(l.ffn_down);
        layers.push_back(r);
    }
    // freq[i] = freq_scale * theta^(-2i/n_rot) / freq_factors[i], in double (cpu/rope.cpp).
    const float *ff = d.rope_freqs ? static_cast<const float *>(d.rope_freqs->data) : nullptr;
    for (uint32_t i = 0; i < hp.n_rot / 2; ++i) {
        double f = static_cast<double>(hp.freq_scale) *
                   std::pow(static_cast<double>(hp.theta), -2.0 * i / static_cast<double>(hp.n_rot));
        if (ff) f /= static_cast<double>(ff[i]);
        rope_freq.push_back(f);
    }
    weights = dev.create_buffer(packed.size() * 4, false);
    try {
        dev.upload(weights, 0, packed.data(), packed.size() * 4);
    } catch (...) {
        dev.destroy(weights);
        throw;
    }
}

Model::~Model() { dev.destroy(weights); }

ContextSizes context_sizes(const ember_mod_model_desc &d, const ember_mod_context_params &p) {
    const Hp hp = hparams(d);
    if (p.kv_type != static_cast<uint32_t>(DType::F16) && p.kv_type != static_cast<uint32_t>(DType::Q8_0))
        fail(EMBER_ERR_UNSUPPORTED, "vulkan: KV cache type %u unsupported", p.kv_type);
    if (p.kv_type == static_cast<uint32_t>(DType::F16) && hp.n_kv() % 2 != 0)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan: an F16 KV cache needs an even K/V row width (got %u)", hp.n_kv());
    ContextSizes z;
    z.n_layer = hp.n_layer;
    z.kv_row_bytes = dtype_row_bytes(static_cast<DType>(p.kv_type), hp.n_kv());
    z.kv_layer_bytes = size_t{p.n_blocks} * p.block_size * z.kv_row_bytes;
    z.rows = std::max(p.n_batch, p.n_logits);
    const size_t rows = z.rows, max_in = std::max({hp.n_embd, hp.n_q(), hp.n_ff});
    size_t at = 0;
    auto take = [&](size_t n) {
        const size_t o = at;
        at += (n + 15) & ~size_t{15};
        if (at > 0xffffffffu) fail(EMBER_ERR_UNSUPPORTED, "vulkan: activations beyond 2^32 words");
        return static_cast<uint32_t>(o);
    };
    z.x = take(rows * hp.n_embd), z.xn = take(rows * hp.n_embd);
    z.q = take(rows * hp.n_q()), z.attn = take(rows * hp.n_q());
    z.k = take(rows * hp.n_kv()), z.v = take(rows * hp.n_kv());
    z.gate = take(rows * hp.n_ff), z.up = take(rows * hp.n_ff);
    z.logits = take(size_t{p.n_logits} * hp.n_vocab);
    z.xq = take(rows * max_in / 4), z.xd = take(rows * max_in / 32 + 1), z.xs = take(rows * max_in / 32 + 1);
    z.part = take(attention_part_floats(z.rows, hp.n_head, hp.head_dim));
    z.acts_words = at;
    if (z.kv_layer_bytes * hp.n_layer > 0xffffffffu)
        fail(EMBER_ERR_UNSUPPORTED, "vulkan: a KV cache of more than 4 GiB per K or V is not supported yet");
    return z;
}

Context::Context(Model &m, const ember_mod_context_params &p) : m_(m), dev_(m.dev), p_(p) {
    if (p.n_blocks == 0 || p.block_size == 0 || p.n_batch == 0 || p.n_logits == 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "n_blocks, block_size, n_batch and n_logits must be positive");
    kv_type_ = static_cast<DType>(p.kv_type);
    // The sizes need the description only for hyper-parameters, which the model kept.
    ember_mod_model_desc d{};
    d.n_vocab = m.hp.n_vocab, d.n_embd = m.hp.n_embd, d.n_layer = m.hp.n_layer, d.n_head = m.hp.n_head;
    d.n_head_kv = m.hp.n_head_kv, d.head_dim = m.hp.head_dim, d.n_ff = m.hp.n_ff, d.n_rot = m.hp.n_rot;
    z_ = context_sizes(d, p);
    const DeviceApi &f = dev_.fn();
    try {
        acts_ = dev_.create_buffer(z_.acts_words * 4, false);
        kc_ = dev_.create_buffer(z_.kv_layer_bytes * m.hp.n_layer, false);
        vc_ = dev_.create_buffer(z_.kv_layer_bytes * m.hp.n_layer, false);
        io_ = dev_.create_buffer(4096, true);
        const Buffer *bufs[5] = {&m.weights, &acts_, &kc_, &vc_, &io_};
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
    dev_.destroy(acts_), dev_.destroy(kc_), dev_.destroy(vc_), dev_.destroy(io_);
}

void Context::ensure_io(size_t words) {
    if (io_.size >= words * 4) return;
    // Grows (never shrinks); the descriptor set is rewritten to the new buffer. No pass is in flight
    // (forward waits for its own), so the old buffer can go at once.
    Buffer bigger = dev_.create_buffer(std::max(words * 4, io_.size * 2), true);
    dev_.destroy(io_);
    io_ = bigger;
    const Buffer *bufs[5] = {&m_.weights, &acts_, &kc_, &vc_, &io_};
    bind_.update(dev_, bufs);
}

void Context::mm(Recorder &r, const WeightRef &w, uint32_t x_off, uint32_t rows, uint32_t y_off, uint32_t bias,
                 bool acc, uint32_t &quantized_for) {
    const Recorder::QActs q{z_.xq, z_.xd, z_.xs};
    if (w.quantized() && quantized_for != x_off) {
        r.quantize(x_off, w.n_in, rows, q);
        quantized_for = x_off;
    }
    r.matmul(w, x_off, q, rows, y_off, bias, acc);
}

void Context::record_layer(Recorder &r, uint32_t il, uint32_t n, uint32_t io_pos, uint32_t io_rows, uint32_t io_tab,
                           uint32_t io_cs, uint32_t max_keys) {
    const Hp &hp = m_.hp;
    const LayerRefs &L = m_.layers[il];
    const uint32_t layer_byte = static_cast<uint32_t>(il * z_.kv_layer_bytes);
    const uint32_t row_bytes = static_cast<uint32_t>(z_.kv_row_bytes);
    uint32_t qf = kNone;
    r.rmsnorm(z_.x, z_.xn, L.attn_norm, hp.n_embd, n, kNone, hp.eps);
    mm(r, L.wq, z_.xn, n, z_.q, L.bq, false, qf);
    mm(r, L.wk, z_.xn, n, z_.k, L.bk, false, qf);
    mm(r, L.wv, z_.xn, n, z_.v, L.bv, false, qf);
    if (hp.n_rot > 0) {
        r.rope(z_.q, n, hp.n_head, hp.head_dim, hp.n_rot, hp.neox, io_cs);
        r.rope(z_.k, n, hp.n_head_kv, hp.head_dim, hp.n_rot, hp.neox, io_cs);
    }
    r.kv_store(z_.k, z_.v, n, hp.n_kv(), io_rows, layer_byte, row_bytes, kv_type_);
    Recorder::Attn a{z_.q, z_.attn, hp.n_head, hp.n_head_kv, hp.head_dim, io_pos, io_tab, p_.block_size, layer_byte,
                     row_bytes, kv_type_, 1.0f / std::sqrt(static_cast<float>(hp.head_dim))};
    a.chunk = attention_chunk(n, max_keys);
    if (a.chunk) a.n_split = (max_keys + a.chunk - 1) / a.chunk, a.part_off = z_.part;
    r.attention(a, n);
    qf = kNone;
    mm(r, L.wo, z_.attn, n, z_.x, L.bo, true, qf);
    r.rmsnorm(z_.x, z_.xn, L.ffn_norm, hp.n_embd, n, kNone, hp.eps);
    qf = kNone;
    mm(r, L.gate, z_.xn, n, z_.gate, kNone, false, qf);
    mm(r, L.up, z_.xn, n, z_.up, kNone, false, qf);
    r.swiglu(z_.gate, z_.up, z_.gate, n * hp.n_ff);
    qf = kNone;
    mm(r, L.down, z_.gate, n, z_.x, kNone, true, qf);
}

void Context::forward(const ember_mod_batch &b) {
    const Hp &hp = m_.hp;
    const uint32_t n = b.n_tokens, nl = b.n_logits, bs = p_.block_size;
    if (n == 0 || n > p_.n_batch || nl > p_.n_logits)
        fail(EMBER_ERR_INTERNAL, "vulkan forward: %u tokens / %u logits exceed the context's %u / %u", n, nl, p_.n_batch,
             p_.n_logits);
    for (uint32_t t = 0; t < n; ++t) {
        if (b.tokens[t] < 0 || static_cast<uint32_t>(b.tokens[t]) >= hp.n_vocab)
            fail(EMBER_ERR_INTERNAL, "vulkan forward: token %d out of range", b.tokens[t]);
        const int32_t block = b.pos[t] < 0 ? -1 : b.tables[t][b.pos[t] / static_cast<int32_t>(bs)];
        if (b.pos[t] < 0 || block < 0 || static_cast<uint32_t>(block) >= p_.n_blocks)
            fail(EMBER_ERR_INTERNAL, "vulkan forward: token %u at position %d maps to block %d of %u", t, b.pos[t], block,
                 p_.n_blocks);
    }
    // io: tokens, positions, cache rows, table offsets, logits rows, the distinct block tables, the
    // rope cosines and sines, then room for the logits.
    const uint32_t io_tok = 0, io_pos = n, io_rows = 2 * n, io_tab = 3 * n, io_lrows = 4 * n;
    std::map<const int32_t *, uint32_t> table_len;
    uint32_t max_keys = 0;
    for (uint32_t t = 0; t < n; ++t) {
        max_keys = std::max(max_keys, static_cast<uint32_t>(b.pos[t]) + 1);
        uint32_t &len = table_len[b.tables[t]];
        len = std::max(len, static_cast<uint32_t>(b.pos[t]) / bs + 1);
    }
    size_t words = io_lrows + nl;
    std::map<const int32_t *, uint32_t> table_at;
    for (auto [tab, len] : table_len) table_at[tab] = static_cast<uint32_t>(words), words += len;
    const uint32_t io_cs = static_cast<uint32_t>(words);
    words += size_t{n} * hp.n_rot;
    const uint32_t io_logits = static_cast<uint32_t>(words);
    words += size_t{nl} * hp.n_vocab;
    ensure_io(words);
    auto *io = static_cast<int32_t *>(io_.map);
    auto *iof = static_cast<float *>(io_.map);
    for (uint32_t t = 0; t < n; ++t) {
        io[io_tok + t] = b.tokens[t];
        io[io_pos + t] = b.pos[t];
        io[io_rows + t] = b.tables[t][b.pos[t] / bs] * static_cast<int32_t>(bs) + b.pos[t] % static_cast<int32_t>(bs);
        io[io_tab + t] = static_cast<int32_t>(table_at[b.tables[t]]);
        // cos and sin of pos * freq[i], formed in double as on the CPU.
        const uint32_t half = hp.n_rot / 2;
        for (uint32_t i = 0; i < half; ++i) {
            const double a = static_cast<double>(b.pos[t]) * m_.rope_freq[i];
            iof[io_cs + t * hp.n_rot + i] = static_cast<float>(std::cos(a));
            iof[io_cs + t * hp.n_rot + half + i] = static_cast<float>(std::sin(a));
        }
    }
    for (uint32_t i = 0; i < nl; ++i) {
        if (b.logits_rows[i] < 0 || static_cast<uint32_t>(b.logits_rows[i]) >= n)
            fail(EMBER_ERR_INTERNAL, "vulkan forward: logits row %d of %u", b.logits_rows[i], n);
        io[io_lrows + i] = b.logits_rows[i];
    }
    for (auto [tab, at] : table_at) std::memcpy(io + at, tab, table_len[tab] * sizeof(int32_t));

    // One command buffer for the pass; when it may be cancelled and is long (a prompt chunk), one per
    // few layers, with the flag checked between them.
    const bool chunked = b.cancel && n >= 32;
    const uint32_t per_chunk = chunked ? 1 : hp.n_layer;
    const DeviceApi &f = dev_.fn();
    uint32_t il = 0;
    bool first = true;
    while (true) {
        if (chunked && b.cancel(b.cancel_data)) fail(EMBER_ERR_CANCELLED, "vulkan forward cancelled");
        VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
        check(f.vkResetCommandBuffer(cb_, 0), "vkResetCommandBuffer");
        check(f.vkBeginCommandBuffer(cb_, &bi), "vkBeginCommandBuffer");
        Recorder r(dev_, cb_, bind_.set);
        if (first) r.get_rows(m_.tok_embd, io_tok, n, z_.x);
        first = false;
        const uint32_t end = std::min(hp.n_layer, il + per_chunk);
        for (; il < end; ++il) record_layer(r, il, n, io_pos, io_rows, io_tab, io_cs, max_keys);
        const bool last = il == hp.n_layer;
        if (last && nl > 0) {
            r.rmsnorm(z_.x, z_.xn, m_.output_norm, hp.n_embd, nl, io_lrows, hp.eps);
            uint32_t qf = kNone;
            mm(r, m_.output, z_.xn, nl, z_.logits, kNone, false, qf);
            r.to_transfer();
            VkBufferCopy c{size_t{z_.logits} * 4, size_t{io_logits} * 4, size_t{nl} * hp.n_vocab * 4};
            f.vkCmdCopyBuffer(cb_, acts_.buf, io_.buf, 1, &c);
        }
        check(f.vkEndCommandBuffer(cb_), "vkEndCommandBuffer");
        dev_.submit_wait(cb_, fence_);
        dev_.throw_if_validation();
        if (last) break;
    }
    if (nl > 0) std::memcpy(b.logits, iof + io_logits, size_t{nl} * hp.n_vocab * sizeof(float));
}

size_t Context::row_off(uint32_t il, const int32_t *table, uint32_t p) const {
    const uint32_t bs = p_.block_size;
    return il * z_.kv_layer_bytes + (static_cast<size_t>(table[p / bs]) * bs + p % bs) * z_.kv_row_bytes;
}

void Context::copy_block(int32_t src, int32_t dst) {
    if (src == dst) return;
    if (src < 0 || dst < 0 || static_cast<uint32_t>(src) >= p_.n_blocks || static_cast<uint32_t>(dst) >= p_.n_blocks)
        fail(EMBER_ERR_INTERNAL, "vulkan copy_block: %d -> %d of %u", src, dst, p_.n_blocks);
    const size_t block = size_t{p_.block_size} * z_.kv_row_bytes;
    std::vector<VkBufferCopy> c;
    for (uint32_t il = 0; il < m_.hp.n_layer; ++il)
        c.push_back({il * z_.kv_layer_bytes + src * block, il * z_.kv_layer_bytes + dst * block, block});
    dev_.run_once([&](VkCommandBuffer cb) {
        dev_.fn().vkCmdCopyBuffer(cb, kc_.buf, kc_.buf, static_cast<uint32_t>(c.size()), c.data());
        dev_.fn().vkCmdCopyBuffer(cb, vc_.buf, vc_.buf, static_cast<uint32_t>(c.size()), c.data());
    });
}

// Layout (the CPU's): for each layer, the K rows of positions 0..n-1, then their V rows.
void Context::read_kv(const int32_t *table, uint32_t n, uint8_t *dst) {
    if (n == 0) return;
    const size_t row = z_.kv_row_bytes, per_layer = 2 * n * row;
    Buffer st = dev_.create_buffer(per_layer * m_.hp.n_layer, true);
    try {
        std::vector<VkBufferCopy> ck, cv;
        for (uint32_t il = 0; il < m_.hp.n_layer; ++il)
            for (uint32_t p = 0; p < n; ++p) {
                ck.push_back({row_off(il, table, p), il * per_layer + p * row, row});
                cv.push_back({row_off(il, table, p), il * per_layer + (n + p) * row, row});
            }
        dev_.run_once([&](VkCommandBuffer cb) {
            dev_.fn().vkCmdCopyBuffer(cb, kc_.buf, st.buf, static_cast<uint32_t>(ck.size()), ck.data());
            dev_.fn().vkCmdCopyBuffer(cb, vc_.buf, st.buf, static_cast<uint32_t>(cv.size()), cv.data());
        });
        std::memcpy(dst, st.map, per_layer * m_.hp.n_layer);
    } catch (...) {
        dev_.destroy(st);
        throw;
    }
    dev_.destroy(st);
}

void Context::write_kv(const int32_t *table, uint32_t n, const uint8_t *src) {
    if (n == 0) return;
    const size_t row = z_.kv_row_bytes, per_layer = 2 * n * row;
    Buffer st = dev_.create_buffer(per_layer * m_.hp.n_layer, true);
    try {
        std::memcpy(st.map, src, per_layer * m_.hp.n_layer);
        std::vector<VkBufferCopy> ck, cv;
        for (uint32_t il = 0; il < m_.hp.n_layer; ++il)
            for (uint32_t p = 0; p < n; ++p) {
                ck.push_back({il * per_layer + p * row, row_off(il, table, p), row});
                cv.push_back({il * per_layer + (n + p) * row, row_off(il, table, p), row});
            }
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

} // namespace ember::vk
