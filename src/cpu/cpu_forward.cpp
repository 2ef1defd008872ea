// cpu_forward.cpp — the decoder forward pass on the CPU.
//
// One layer: x += Wo·attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x)); x += Wd·(silu(Wg·n(x)) * Wu·n(x)),
// with n() an RMSNorm. Matrix products and attention are threaded inside the kernels. The elementwise
// steps are split across the threads by token rows when a prompt chunk is long enough to pay for the
// dispatch; for one token (decode) they take a few microseconds and run on the calling thread.
#include "cpu/cpu_context.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ember::cpu {

namespace {

WeightView view(const TensorRef *t) {
    WeightView w;
    w.type = t->type;
    w.n_in = t->ne[0];
    w.n_out = t->ne[1];
    w.data = t->data;
    w.row_bytes = dtype_row_bytes(t->type, static_cast<uint64_t>(t->ne[0]));
    return w;
}

const float *f32(const TensorRef *t) { return t ? static_cast<const float *>(t->data) : nullptr; }

// Below this many token rows an elementwise step runs on the calling thread (a dispatch costs more).
constexpr uint32_t kMinRowsToSplit = 4;

// fn(begin, end) over token rows [0, n), split across the pool when worthwhile.
template <class F>
void for_rows(ThreadPool &pool, uint32_t n, F &&fn) {
    if (n < kMinRowsToSplit || pool.size() == 1) {
        fn(int64_t{0}, int64_t{n});
        return;
    }
    pool.parallel_for(n, fn);
}

template <class T>
void resize(std::vector<T> &v, size_t n) {
    v.assign(n, T{});
}

} // namespace

CpuContextSizes cpu_context_sizes(const ModelDesc &desc, const ContextParams &params) {
    const HParams &hp = desc.hp;
    CpuContextSizes z;
    z.kv_rows = static_cast<size_t>(params.n_blocks) * params.block_size * hp.n_layer;
    z.kv_row_bytes = kv_row_bytes(hp, params.kv_type);
    z.rows = std::max(params.n_batch, params.n_logits);
    z.embd = hp.n_embd;
    z.q = hp.n_embd_q();
    z.kv = hp.n_embd_kv();
    z.ff = hp.n_ff;
    // The widest quantized matmul input: any of the embedding, attention output or FFN hidden rows.
    for (size_t n_in : {z.embd, z.q, z.ff})
        if (n_in % 32 == 0) z.scratch = std::max(z.scratch, matmul_scratch_bytes(static_cast<int64_t>(n_in), static_cast<int64_t>(z.rows)));
    return z;
}

CpuContext::CpuContext(const ModelDesc &desc, const ContextParams &params)
    : desc_(desc), params_(params) {
    if (auto *other = dynamic_cast<const CpuContext *>(params.share_threads_with))
        pool_ = other->pool_;
    else
        pool_ = std::make_shared<ThreadPool>(static_cast<int>(params.n_threads < 1 ? 1 : params.n_threads));
    if (params_.n_blocks == 0 || params_.block_size == 0 || params_.n_batch == 0 || params_.n_logits == 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "n_blocks, block_size, n_batch and n_logits must be positive");
    check_kv_type(desc.hp, params_.kv_type);
    const CpuContextSizes z = cpu_context_sizes(desc, params_);
    row_bytes_ = z.kv_row_bytes;
    layer_stride_ = z.kv_rows / desc.hp.n_layer * row_bytes_;
    resize(k_cache_, z.kv_rows * row_bytes_);
    resize(v_cache_, z.kv_rows * row_bytes_);
    resize(x_, z.rows * z.embd);
    resize(xn_, z.rows * z.embd);
    resize(tmp_, z.rows * z.embd);
    resize(q_, z.rows * z.q);
    resize(attn_, z.rows * z.q);
    resize(k_, z.rows * z.kv);
    resize(v_, z.rows * z.kv);
    resize(gate_, z.rows * z.ff);
    resize(up_, z.rows * z.ff);
    scratch_.get(z.scratch);
}

size_t CpuContext::kv_bytes_per_token() const { return ember::kv_bytes_per_token(desc_.hp, params_.kv_type); }

// Layout: for each layer, the K rows of positions 0..n-1, then their V rows.
void CpuContext::read_kv(const int32_t *table, uint32_t n, uint8_t *dst) const {
    const size_t row = row_bytes_;
    for (uint32_t il = 0; il < desc_.hp.n_layer; ++il)
        for (const auto *cache : {&k_cache_, &v_cache_})
            for (uint32_t p = 0; p < n; ++p, dst += row) std::memcpy(dst, cache->data() + row_offset(il, table, p), row);
}

void CpuContext::write_kv(const int32_t *table, uint32_t n, const uint8_t *src) {
    const size_t row = row_bytes_;
    for (uint32_t il = 0; il < desc_.hp.n_layer; ++il)
        for (auto *cache : {&k_cache_, &v_cache_})
            for (uint32_t p = 0; p < n; ++p, src += row) std::memcpy(cache->data() + row_offset(il, table, p), src, row);
}

void CpuContext::copy_block(int32_t src, int32_t dst) {
    const size_t block = static_cast<size_t>(params_.block_size) * row_bytes_;
    for (uint32_t il = 0; il < desc_.hp.n_layer; ++il) {
        std::memcpy(k_layer(il) + dst * block, k_layer(il) + src * block, block);
        std::memcpy(v_layer(il) + dst * block, v_layer(il) + src * block, block);
    }
}

void CpuContext::layer(uint32_t il, const Batch &b) {
    const HParams &hp = desc_.hp;
    const LayerWeights &w = desc_.layers[il];
    const uint32_t n = b.n_tokens, bs = params_.block_size;
    const int64_t d = hp.n_embd, nq = hp.n_embd_q(), nkv = hp.n_embd_kv(), nff = hp.n_ff;
    uint8_t *kc = k_layer(il), *vc = v_layer(il);
    const DType kv_type = params_.kv_type;
    const size_t row_bytes = row_bytes_;
    float *x = x_.data(), *xn = xn_.data(), *q = q_.data(), *k = k_.data(), *v = v_.data();

    for_rows(*pool_, n, [&](int64_t r0, int64_t r1) { rms_norm(x + r0 * d, f32(w.attn_norm), xn + r0 * d, r1 - r0, d, hp.norm_eps); });
    const WeightView wq = view(w.wq), wk = view(w.wk), wv = view(w.wv);
    const WeightView *qkv[3] = {&wq, &wk, &wv};
    float *qkv_out[3] = {q, k, v};
    const float *qkv_bias[3] = {f32(w.bq), f32(w.bk), f32(w.bv)};
    matmul_multi(*pool_, scratch_, qkv, 3, xn, n, qkv_out, qkv_bias);

    RopeParams rp;
    rp.n_rot = static_cast<int>(hp.n_rot);
    rp.neox = hp.rope_neox;
    rp.theta_base = hp.rope_theta;
    rp.freq_scale = hp.rope_freq_scale;
    rp.freq_factors = f32(desc_.rope_freqs);
    for_rows(*pool_, n, [&](int64_t r0, int64_t r1) {
        rope(q + r0 * nq, r1 - r0, static_cast<int>(hp.n_head), static_cast<int>(hp.head_dim), b.pos + r0, rp);
        rope(k + r0 * nkv, r1 - r0, static_cast<int>(hp.n_head_kv), static_cast<int>(hp.head_dim), b.pos + r0, rp);
        // Each token's K/V row goes to its own sequence's block at its position.
        for (int64_t t = r0; t < r1; ++t) {
            const int32_t p = b.pos[t];
            const size_t row = (static_cast<size_t>(b.tables[t][p / bs]) * bs + p % bs) * row_bytes;
            store_kv_row(kv_type, k + t * nkv, kc + row, nkv);
            store_kv_row(kv_type, v + t * nkv, vc + row, nkv);
        }
    });

    AttnParams ap;
    ap.n_head = static_cast<int>(hp.n_head);
    ap.n_head_kv = static_cast<int>(hp.n_head_kv);
    ap.head_dim = static_cast<int>(hp.head_dim);
    ap.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
    PagedKv kv;
    kv.k = kc;
    kv.v = vc;
    kv.type = kv_type;
    kv.row_bytes = row_bytes;
    kv.block_size = bs;
    attention(*pool_, q, b.pos, b.tables, n, kv, attn_.data(), ap);

    float *tmp = tmp_.data(), *gate = gate_.data(), *up = up_.data();
    matmul(*pool_, scratch_, view(w.wo), attn_.data(), n, tmp, f32(w.bo));
    for_rows(*pool_, n, [&](int64_t r0, int64_t r1) {
        add_inplace(x + r0 * d, tmp + r0 * d, (r1 - r0) * d);
        rms_norm(x + r0 * d, f32(w.ffn_norm), xn + r0 * d, r1 - r0, d, hp.norm_eps);
    });
    const WeightView wg = view(w.ffn_gate), wu = view(w.ffn_up);
    const WeightView *gu[2] = {&wg, &wu};
    float *gu_out[2] = {gate, up};
    const float *gu_bias[2] = {nullptr, nullptr};
    matmul_multi(*pool_, scratch_, gu, 2, xn, n, gu_out, gu_bias);
    for_rows(*pool_, n, [&](int64_t r0, int64_t r1) { swiglu(gate + r0 * nff, up + r0 * nff, gate + r0 * nff, (r1 - r0) * nff); });
    matmul(*pool_, scratch_, view(w.ffn_down), gate, n, tmp, nullptr);
    for_rows(*pool_, n, [&](int64_t r0, int64_t r1) { add_inplace(x + r0 * d, tmp + r0 * d, (r1 - r0) * d); });
}

void CpuContext::forward(const Batch &b) {
    const HParams &hp = desc_.hp;
    if (b.n_tokens == 0 || b.n_tokens > params_.n_batch || b.n_logits > params_.n_logits)
        fail(EMBER_ERR_INTERNAL, "cpu forward: %u tokens / %u logits exceed the context's %u / %u", b.n_tokens,
             b.n_logits, params_.n_batch, params_.n_logits);
    for (uint32_t t = 0; t < b.n_tokens; ++t) {
        const int32_t block = b.tables[t][b.pos[t] / static_cast<int32_t>(params_.block_size)];
        if (b.pos[t] < 0 || block < 0 || static_cast<uint32_t>(block) >= params_.n_blocks)
            fail(EMBER_ERR_INTERNAL, "cpu forward: token %u at position %d maps to block %d of %u", t, b.pos[t],
                 block, params_.n_blocks);
    }
    get_rows(view(desc_.tok_embd), b.tokens, b.n_tokens, x_.data());
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        // Between layers, before any logits are written (the caller keeps its old ones).
        if (b.cancel && b.cancel->load(std::memory_order_relaxed))
            fail(EMBER_ERR_CANCELLED, "cpu forward: cancelled after layer %u of %u", il, hp.n_layer);
        layer(il, b);
    }
    if (b.n_logits == 0) return;
    // Only the requested rows go through the output norm and the vocabulary projection, together.
    const int64_t d = hp.n_embd;
    for (uint32_t i = 0; i < b.n_logits; ++i)
        rms_norm(x_.data() + static_cast<int64_t>(b.logits_rows[i]) * d, f32(desc_.output_norm), xn_.data() + i * d, 1, d,
                 hp.norm_eps);
    matmul(*pool_, scratch_, view(desc_.output), xn_.data(), b.n_logits, b.logits, nullptr);
}

} // namespace ember::cpu
