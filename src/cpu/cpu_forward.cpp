// cpu_forward.cpp — the decoder forward pass on the CPU.
//
// One layer: x += Wo·attn(rope(Wq·n(x)), rope(Wk·n(x)), Wv·n(x)); x += Wd·(silu(Wg·n(x)) * Wu·n(x)),
// with n() an RMSNorm. Matrix products and attention are threaded inside the kernels. The elementwise
// steps are split across the threads by token rows when a prompt chunk is long enough to pay for the
// dispatch; for one token (decode) they take a few microseconds and run on the calling thread.
#include "cpu/cpu_context.hpp"

#include "core/error.hpp"

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

CpuContext::CpuContext(const ModelDesc &desc, const ContextParams &params)
    : desc_(desc), params_(params), pool_(static_cast<int>(params.n_threads < 1 ? 1 : params.n_threads)) {
    const HParams &hp = desc.hp;
    if (params_.n_ctx == 0 || params_.n_batch == 0) fail(EMBER_ERR_INVALID_ARGUMENT, "n_ctx and n_batch must be positive");
    const size_t kv = static_cast<size_t>(hp.n_layer) * params_.n_ctx * hp.n_embd_kv();
    resize(k_cache_, kv);
    resize(v_cache_, kv);
    const size_t nb = params_.n_batch;
    resize(x_, nb * hp.n_embd);
    resize(xn_, nb * hp.n_embd);
    resize(q_, nb * hp.n_embd_q());
    resize(k_, nb * hp.n_embd_kv());
    resize(v_, nb * hp.n_embd_kv());
    resize(attn_, nb * hp.n_embd_q());
    resize(tmp_, nb * hp.n_embd);
    resize(gate_, nb * hp.n_ff);
    resize(up_, nb * hp.n_ff);
    resize(pos_, nb);
}

size_t CpuContext::memory_bytes() const {
    return (k_cache_.size() + v_cache_.size()) * sizeof(uint16_t) +
           (x_.size() + xn_.size() + q_.size() + k_.size() + v_.size() + attn_.size() + tmp_.size() +
            gate_.size() + up_.size()) * sizeof(float) + scratch_.bytes.capacity();
}

void CpuContext::layer(uint32_t il, uint32_t n, uint32_t pos0) {
    const HParams &hp = desc_.hp;
    const LayerWeights &w = desc_.layers[il];
    const int64_t d = hp.n_embd, nq = hp.n_embd_q(), nkv = hp.n_embd_kv(), nff = hp.n_ff;
    uint16_t *kc = k_cache_.data() + static_cast<size_t>(il) * params_.n_ctx * nkv;
    uint16_t *vc = v_cache_.data() + static_cast<size_t>(il) * params_.n_ctx * nkv;
    float *x = x_.data(), *xn = xn_.data(), *q = q_.data(), *k = k_.data(), *v = v_.data();

    for_rows(pool_, n, [&](int64_t b, int64_t e) { rms_norm(x + b * d, f32(w.attn_norm), xn + b * d, e - b, d, hp.norm_eps); });
    const WeightView wq = view(w.wq), wk = view(w.wk), wv = view(w.wv);
    const WeightView *qkv[3] = {&wq, &wk, &wv};
    float *qkv_out[3] = {q, k, v};
    const float *qkv_bias[3] = {f32(w.bq), f32(w.bk), f32(w.bv)};
    matmul_multi(pool_, scratch_, qkv, 3, xn, n, qkv_out, qkv_bias);

    RopeParams rp;
    rp.n_rot = static_cast<int>(hp.n_rot);
    rp.neox = hp.rope_neox;
    rp.theta_base = hp.rope_theta;
    rp.freq_scale = hp.rope_freq_scale;
    rp.freq_factors = f32(desc_.rope_freqs);
    uint16_t *kc_at = kc + static_cast<size_t>(pos0) * nkv, *vc_at = vc + static_cast<size_t>(pos0) * nkv;
    for_rows(pool_, n, [&](int64_t b, int64_t e) {
        rope(q + b * nq, e - b, static_cast<int>(hp.n_head), static_cast<int>(hp.head_dim), pos_.data() + b, rp);
        rope(k + b * nkv, e - b, static_cast<int>(hp.n_head_kv), static_cast<int>(hp.head_dim), pos_.data() + b, rp);
        store_f16(k + b * nkv, kc_at + b * nkv, e - b, nkv);
        store_f16(v + b * nkv, vc_at + b * nkv, e - b, nkv);
    });

    AttnParams ap;
    ap.n_head = static_cast<int>(hp.n_head);
    ap.n_head_kv = static_cast<int>(hp.n_head_kv);
    ap.head_dim = static_cast<int>(hp.head_dim);
    ap.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
    attention(pool_, q, pos_.data(), n, kc, vc, attn_.data(), ap);

    float *tmp = tmp_.data(), *gate = gate_.data(), *up = up_.data();
    matmul(pool_, scratch_, view(w.wo), attn_.data(), n, tmp, f32(w.bo));
    for_rows(pool_, n, [&](int64_t b, int64_t e) {
        add_inplace(x + b * d, tmp + b * d, (e - b) * d);
        rms_norm(x + b * d, f32(w.ffn_norm), xn + b * d, e - b, d, hp.norm_eps);
    });
    const WeightView wg = view(w.ffn_gate), wu = view(w.ffn_up);
    const WeightView *gu[2] = {&wg, &wu};
    float *gu_out[2] = {gate, up};
    const float *gu_bias[2] = {nullptr, nullptr};
    matmul_multi(pool_, scratch_, gu, 2, xn, n, gu_out, gu_bias);
    for_rows(pool_, n, [&](int64_t b, int64_t e) { swiglu(gate + b * nff, up + b * nff, gate + b * nff, (e - b) * nff); });
    matmul(pool_, scratch_, view(w.ffn_down), gate, n, tmp, nullptr);
    for_rows(pool_, n, [&](int64_t b, int64_t e) { add_inplace(x + b * d, tmp + b * d, (e - b) * d); });
}

void CpuContext::forward(const int32_t *tokens, uint32_t n, uint32_t pos0, float *logits) {
    const HParams &hp = desc_.hp;
    if (n == 0 || n > params_.n_batch || pos0 + n > params_.n_ctx)
        fail(EMBER_ERR_INTERNAL, "cpu forward: %u tokens at %u exceed batch %u / context %u", n, pos0,
             params_.n_batch, params_.n_ctx);
    for (uint32_t i = 0; i < n; ++i) pos_[i] = static_cast<int32_t>(pos0 + i);
    get_rows(view(desc_.tok_embd), tokens, n, x_.data());
    for (uint32_t il = 0; il < hp.n_layer; ++il) layer(il, n, pos0);
    if (!logits) return;
    // Only the last token's logits are needed: normalise and project that row alone.
    const float *last = x_.data() + static_cast<size_t>(n - 1) * hp.n_embd;
    rms_norm(last, f32(desc_.output_norm), xn_.data(), 1, hp.n_embd, hp.norm_eps);
    matmul(pool_, scratch_, view(desc_.output), xn_.data(), 1, logits, nullptr);
}

} // namespace ember::cpu
