// model.cpp — weights upload, matrix products, the context and its forward pass.
//
// A forward pass is enqueued on the context's stream without any host synchronisation; the one sync
// is at its end, to hand back the logits. Inputs (tokens, positions, cache slots, block tables, logit
// rows) are copied into device buffers first, and every kernel reads them there, so a decode step
// (<= 8 tokens) is captured once as a CUDA graph per (n_tokens, n_logits) shape and replayed.
#include "model.hpp"

#include "attn_math.hpp"
#include "core/dtype.hpp"
#include "cu_check.hpp"
#include "inputs.hpp"
#include "weights.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace ember::cu {

namespace {
constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
bool quantized(uint32_t t) { return t == 8 || t == 2; }

// Activation buffer regions (ContextSizes::offsets).
enum Region { X, XN, TMP, Q, ATTN, K, V, GATE, UP, ACT_CODES, ACT_SCALES, ACT16, LOGITS, COS, SIN, PARTIALS, IO, kRegions };
} // namespace

DevBuf::DevBuf(size_t bytes) : n_(bytes) {
    if (bytes) EMBER_CU(cudaMalloc(&p_, bytes));
}
DevBuf::~DevBuf() {
    if (p_) cudaFree(p_);
}
DevBuf &DevBuf::operator=(DevBuf &&o) noexcept {
    if (this != &o) {
        if (p_) cudaFree(p_);
        p_ = o.p_, n_ = o.n_;
        o.p_ = nullptr, o.n_ = 0;
    }
    return *this;
}
HostBuf::HostBuf(size_t bytes) {
    if (bytes) EMBER_CU(cudaMallocHost(&p_, bytes));
}
HostBuf::~HostBuf() {
    if (p_) cudaFreeHost(p_);
}

Hyper hyper_of(const ember_mod_model_desc &d) {
    Hyper h;
    h.n_vocab = d.n_vocab, h.n_embd = d.n_embd, h.n_layer = d.n_layer, h.n_head = d.n_head;
    h.n_head_kv = d.n_head_kv, h.head_dim = d.head_dim, h.n_ff = d.n_ff, h.n_rot = d.n_rot;
    h.neox = d.rope_neox != 0;
    h.eps = d.norm_eps, h.rope_theta = d.rope_theta, h.rope_freq_scale = d.rope_freq_scale;
    return h;
}

// --- the model ---------------------------------------------------------------------------------------
Model::Model(Device &device, const ember_mod_model_desc &d) : dev(device), hp(hyper_of(d)) {
    dev.make_current();
    if (hp.head_dim > static_cast<uint32_t>(kMaxHeadDim) || hp.n_head_kv == 0 || hp.n_head % hp.n_head_kv != 0)
        fail(EMBER_ERR_UNSUPPORTED, "cuda: head_dim %u, n_head %u, n_head_kv %u unsupported", hp.head_dim, hp.n_head,
             hp.n_head_kv);
    // Every distinct tensor once (a tied output matrix is the embedding).
    std::vector<const ember_mod_tensor *> order;
    std::map<const ember_mod_tensor *, size_t> offset;
    size_t total = 0;
    auto add = [&](const ember_mod_tensor *t, const char *what, bool matrix) {
        if (!t || offset.count(t)) return;
        if (matrix) check_weight_type(*t, what);
        else if (t->type != 0) fail(EMBER_ERR_UNSUPPORTED, "cuda: %s must be F32 (is %s)", what, dtype_name(t->type));
        offset[t] = total;
        order.push_back(t);
        total += weight_device_bytes(*t);
    };
    add(d.tok_embd, "token_embd", true), add(d.output, "output", true), add(d.output_norm, "output_norm", false);
    add(d.rope_freqs, "rope_freqs", false);
    for (uint32_t il = 0; il < d.n_layer; ++il) {
        const ember_mod_layer &l = d.layers[il];
        add(l.attn_norm, "attn_norm", false), add(l.ffn_norm, "ffn_norm", false);
        for (const ember_mod_tensor *b : {l.bq, l.bk, l.bv, l.bo}) add(b, "a bias", false);
        for (const ember_mod_tensor *w : {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down}) add(w, "a layer weight", true);
    }
    buf_ = DevBuf(total);
    std::map<const ember_mod_tensor *, DevWeight> dw;
    std::vector<uint8_t> host;
    for (const ember_mod_tensor *t : order) {
        host.assign(weight_device_bytes(*t), 0);
        void *base = buf_.data() + offset[t];
        dw[t] = weight_pack(*t, host.data(), base);
        EMBER_CU(cudaMemcpy(base, host.data(), host.size(), cudaMemcpyHostToDevice));
    }
    auto vec = [&](const ember_mod_tensor *t) { return t ? static_cast<const float *>(dw.at(t).codes) : nullptr; };
    tok_embd = dw.at(d.tok_embd);
    output = dw.at(d.output);
    output_norm = vec(d.output_norm);
    rope_freqs = vec(d.rope_freqs);
    for (uint32_t il = 0; il < d.n_layer; ++il) {
        const ember_mod_layer &l = d.layers[il];
        LayerW w;
        w.attn_norm = vec(l.attn_norm), w.ffn_norm = vec(l.ffn_norm);
        w.bq = vec(l.bq), w.bk = vec(l.bk), w.bv = vec(l.bv), w.bo = vec(l.bo);
        w.wq = dw.at(l.wq), w.wk = dw.at(l.wk), w.wv = dw.at(l.wv), w.wo = dw.at(l.wo);
        w.gate = dw.at(l.ffn_gate), w.up = dw.at(l.ffn_up), w.down = dw.at(l.ffn_down);
        layers.push_back(w);
    }
}

// --- matrix products ---------------------------------------------------------------------------------
Matmul::Matmul(bool use_lt) {
    if (!use_lt) return;
    if (const char *env = std::getenv("EMBER_CUDA_NO_CUBLASLT"); env && env[0] == '1') return;
    std::string why;
    const LtApi *api = lt_api(&why);
    if (!api || api->create(&h_) != CUBLAS_STATUS_SUCCESS) return;  // the kernels do every product then
    lt_ = api;
    scratch_ = DevBuf(kScratchBytes);
    workspace_ = DevBuf(kWorkspaceBytes);
}

Matmul::~Matmul() {
    if (h_) lt_->destroy(h_);
}

void Matmul::run(const DevWeight &w, Input &in, float *y, const float *bias, bool accumulate, cudaStream_t s) {
    const bool q = quantized(w.type);
    if (!gemm_for(in.n)) {
        if (q && !in.have_q) {
            quantize_acts(in.x, in.n, in.n_in, in.q, s);
            in.have_q = true;
        }
        gemv(w, in.x, in.q, in.n, y, bias, accumulate, s);
        return;
    }
    // Q8_0/Q4_0: f16 tiles against f16 activations on the tensor cores, f32 accumulation (their error
    // is dominated by the activation quantization the CPU does anyway). F32/F16/BF16 and K-quants: f32
    // tiles and products (CUBLAS_COMPUTE_32F, no TF32), the accuracy test_parity holds them to; f16
    // tiles for K-quants are future work.
    if (q && !in.have_16) {
        f32_to_f16(in.x, in.x16, in.n * in.n_in, s);
        in.have_16 = true;
    }
    LtGemm g{};
    g.n = in.n, g.k = w.n_in, g.ldc = w.n_out, g.half_in = q, g.beta = accumulate ? 1.0f : 0.0f;
    g.b = q ? static_cast<const void *>(in.x16) : in.x;
    if (w.type == 0) {
        g.a = w.codes, g.c = y, g.m = w.n_out;
        lt_matmul(*lt_, h_, g, workspace_.data(), workspace_.size(), s);
    } else {
        const size_t elt = q ? 2 : 4;
        // Whole multiples of 64 rows, so that every chunk's output pointer stays 256-byte aligned.
        int64_t chunk = static_cast<int64_t>(kScratchBytes / (static_cast<size_t>(w.n_in) * elt));
        chunk = chunk >= 64 ? chunk / 64 * 64 : std::max<int64_t>(chunk, 1);
        for (int64_t r0 = 0; r0 < w.n_out; r0 += chunk) {
            const int64_t cn = std::min(chunk, w.n_out - r0);
            dequantize_rows(w, r0, cn, scratch_.data(), q, s);
            g.a = scratch_.data(), g.c = y + r0, g.m = cn;
            lt_matmul(*lt_, h_, g, workspace_.data(), workspace_.size(), s);
        }
    }
    if (bias) add_bias(y, bias, in.n, w.n_out, s);
}

// --- the context -------------------------------------------------------------------------------------
ContextSizes context_sizes(const Hyper &hp, const ember_mod_context_params &p) {
    ContextSizes z;
    const size_t nkv = hp.n_embd_kv();
    z.kv_row_bytes = p.kv_type == 8 ? nkv / 32 * 34 : nkv * 2;
    z.kv_layer_bytes = align_up(static_cast<size_t>(p.n_blocks) * p.block_size * z.kv_row_bytes);
    z.rows = std::max(p.n_batch, p.n_logits);
    z.max_in = std::max({hp.n_embd, hp.n_embd_q(), hp.n_ff});
    z.partial_rows = std::max<size_t>(z.rows * hp.n_head, 1024);
    const size_t r = z.rows, f4 = sizeof(float);
    const size_t sizes[kRegions] = {
        r * hp.n_embd * f4, r * hp.n_embd * f4, r * hp.n_embd * f4, r * hp.n_embd_q() * f4, r * hp.n_embd_q() * f4,
        r * nkv * f4, r * nkv * f4, r * hp.n_ff * f4, r * hp.n_ff * f4,
        r * z.max_in, r * (z.max_in / 32 + 1) * f4, r * z.max_in * 2,
        static_cast<size_t>(p.n_logits) * hp.n_vocab * f4,
        r * (hp.n_rot / 2 + 1) * f4, r * (hp.n_rot / 2 + 1) * f4,
        z.partial_rows * (hp.head_dim + 2) * f4,
        (4 * r + p.n_logits) * sizeof(int32_t)};
    for (int i = 0; i < kRegions; ++i) {
        z.offsets[i] = z.total;
        z.total += align_up(sizes[i]);
    }
    return z;
}

Context::Context(Model &m, const ember_mod_context_params &p) : m_(m), p_(p) {
    if (p.n_blocks == 0 || p.block_size == 0 || p.n_batch == 0 || p.n_logits == 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cuda: n_blocks, block_size, n_batch and n_logits must be positive");
    if (p.kv_type != 1 && p.kv_type != 8) fail(EMBER_ERR_UNSUPPORTED, "cuda: KV cache type %u (F16 or Q8_0)", p.kv_type);
    m_.dev.make_current();
    z_ = context_sizes(m.hp, p);
    if (m.dev.app_stream()) {
        s_ = m.dev.app_stream();
    } else {
        EMBER_CU(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
        own_stream_ = true;
    }
    k_ = DevBuf(m.hp.n_layer * z_.kv_layer_bytes);
    v_ = DevBuf(m.hp.n_layer * z_.kv_layer_bytes);
    act_ = DevBuf(z_.total);
    tables_ = DevBuf(align_up((static_cast<size_t>(p.n_blocks) + z_.rows) * sizeof(int32_t)));
    host_io_bytes_ = (4 * z_.rows + p.n_logits) * sizeof(int32_t);
    host_io_ = HostBuf(host_io_bytes_);
    host_logits_ = HostBuf(static_cast<size_t>(p.n_logits) * m.hp.n_vocab * sizeof(float));
    mm_ = std::make_unique<Matmul>(true);
    if (const char *env = std::getenv("EMBER_CUDA_GRAPHS"); env && env[0] == '0') graphs_ = false;
    // The cache starts zeroed, as the CPU's (a saved state of unwritten rows is then the same bytes).
    EMBER_CU(cudaMemsetAsync(k_.data(), 0, k_.size(), s_));
    EMBER_CU(cudaMemsetAsync(v_.data(), 0, v_.size(), s_));
    EMBER_CU(cudaStreamSynchronize(s_));
}

Context::~Context() {
    m_.dev.make_current();
    if (graph_) cudaGraphExecDestroy(graph_);
    if (s_) cudaStreamSynchronize(s_);
    if (own_stream_) cudaStreamDestroy(s_);
}

void Context::layer(uint32_t il, uint32_t n) {
    const Hyper &hp = m_.hp;
    const LayerW &w = m_.layers[il];
    const int64_t d = hp.n_embd;
    int32_t *pos = io(IO) + z_.rows, *slots = pos + z_.rows, *toff = slots + z_.rows;
    const ActQ8 aq{reinterpret_cast<int8_t *>(f(ACT_CODES)), f(ACT_SCALES)};
    uint16_t *x16 = reinterpret_cast<uint16_t *>(f(ACT16));

    rms_norm(f(X), w.attn_norm, f(XN), nullptr, n, d, hp.eps, s_);
    Matmul::Input in{f(XN), n, d, aq, x16};
    mm_->run(w.wq, in, f(Q), w.bq, false, s_);
    mm_->run(w.wk, in, f(K), w.bk, false, s_);
    mm_->run(w.wv, in, f(V), w.bv, false, s_);
    rope_apply(f(Q), n, static_cast<int>(hp.n_head), static_cast<int>(hp.head_dim), static_cast<int>(hp.n_rot), hp.neox,
               f(COS), f(SIN), s_);
    rope_apply(f(K), n, static_cast<int>(hp.n_head_kv), static_cast<int>(hp.head_dim), static_cast<int>(hp.n_rot),
               hp.neox, f(COS), f(SIN), s_);
    uint8_t *kc = k_.data() + il * z_.kv_layer_bytes, *vc = v_.data() + il * z_.kv_layer_bytes;
    kv_store(f(K), slots, n, hp.n_embd_kv(), p_.kv_type, kc, z_.kv_row_bytes, s_);
    kv_store(f(V), slots, n, hp.n_embd_kv(), p_.kv_type, vc, z_.kv_row_bytes, s_);

    AttnArgs a;
    a.q = f(Q), a.k = kc, a.v = vc, a.kv_type = p_.kv_type, a.row_bytes = z_.kv_row_bytes, a.block_size = p_.block_size;
    a.pos = pos, a.tab_off = toff, a.tables = reinterpret_cast<const int32_t *>(tables_.data());
    a.n_tokens = static_cast<int>(n), a.n_head = static_cast<int>(hp.n_head), a.n_head_kv = static_cast<int>(hp.n_head_kv);
    a.head_dim = static_cast<int>(hp.head_dim), a.scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim));
    a.n_splits = n_splits_, a.q_tile = q_tile_, a.partials = f(PARTIALS), a.out = f(ATTN);
    attention(a, s_);

    Matmul::Input ain{f(ATTN), n, hp.n_embd_q(), aq, x16};
    mm_->run(w.wo, ain, f(X), w.bo, true, s_);  // the residual add fused into the product
    rms_norm(f(X), w.ffn_norm, f(XN), nullptr, n, d, hp.eps, s_);
    Matmul::Input fin{f(XN), n, d, aq, x16};
    mm_->run(w.gate, fin, f(GATE), nullptr, false, s_);
    mm_->run(w.up, fin, f(UP), nullptr, false, s_);
    swiglu(f(GATE), f(UP), f(GATE), static_cast<int64_t>(n) * hp.n_ff, s_);
    Matmul::Input din{f(GATE), n, hp.n_ff, aq, x16};
    mm_->run(w.down, din, f(X), nullptr, true, s_);
}

void Context::enqueue(uint32_t n, uint32_t n_logits, bool cancellable, const ember_mod_batch *b) {
    const Hyper &hp = m_.hp;
    int32_t *tok = io(IO), *pos = tok + z_.rows, *lrows = pos + 3 * z_.rows;
    get_rows(m_.tok_embd, tok, n, f(X), s_);
    rope_angles(pos, n, static_cast<int>(hp.n_rot), hp.rope_theta, hp.rope_freq_scale, m_.rope_freqs, f(COS), f(SIN), s_);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        // Cancellation between layers of a long pass: what is enqueued finishes, nothing more is added.
        if (cancellable && b->cancel && b->cancel(b->cancel_data)) {
            EMBER_CU(cudaStreamSynchronize(s_));
            fail(EMBER_ERR_CANCELLED, "cuda: forward pass cancelled after layer %u of %u", il, hp.n_layer);
        }
        layer(il, n);
    }
    if (n_logits == 0) return;
    rms_norm(f(X), m_.output_norm, f(XN), lrows, n_logits, hp.n_embd, hp.eps, s_);
    Matmul::Input in{f(XN), n_logits, hp.n_embd, {reinterpret_cast<int8_t *>(f(ACT_CODES)), f(ACT_SCALES)},
                     reinterpret_cast<uint16_t *>(f(ACT16))};
    mm_->run(m_.output, in, f(LOGITS), nullptr, false, s_);
}

void Context::forward(const ember_mod_batch &b) {
    m_.dev.make_current();
    const uint32_t n = b.n_tokens, nl = b.n_logits, bs = p_.block_size;
    StepShape shape;
    shape.rows = static_cast<uint32_t>(z_.rows), shape.block_size = bs, shape.n_blocks = p_.n_blocks;
    shape.n_vocab = m_.hp.n_vocab, shape.n_batch = p_.n_batch, shape.n_logits = p_.n_logits;
    int32_t *h = reinterpret_cast<int32_t *>(host_io_.data());
    std::vector<int32_t> tabs;
    step_inputs(b, shape, h, tabs);
    if (tabs.size() * sizeof(int32_t) > tables_.size()) {
        EMBER_CU(cudaStreamSynchronize(s_));
        tables_ = DevBuf(align_up(tabs.size() * 2 * sizeof(int32_t)));
        if (graph_) cudaGraphExecDestroy(graph_), graph_ = nullptr;  // it reads the old buffer
    }
    EMBER_CU(cudaMemcpyAsync(act_.data() + z_.offsets[IO], h, host_io_bytes_, cudaMemcpyHostToDevice, s_));
    EMBER_CU(cudaMemcpyAsync(tables_.data(), tabs.data(), tabs.size() * sizeof(int32_t), cudaMemcpyHostToDevice, s_));
    // Splits depend on the context's capacity, not on this step's length, so a captured decode step
    // stays valid as the sequence grows (splits past the last key are empty and cost one check).
    bool one_table = true;
    for (uint32_t t = 1; t < n; ++t) one_table = one_table && b.tables[t] == b.tables[0];
    q_tile_ = attention_q_tile(static_cast<int>(m_.hp.n_head), static_cast<int>(m_.hp.n_head_kv), one_table);
    n_splits_ = choose_splits(static_cast<int32_t>(n), static_cast<int32_t>(m_.hp.n_head),
                              static_cast<int32_t>(p_.n_blocks * bs), static_cast<int32_t>(z_.partial_rows));

    const bool graph_ok = graphs_ && n <= Matmul::kGemvMaxTokens && !mm_->gemm_for(nl);
    if (graph_ok) {
        if (!graph_ || graph_n_ != n || graph_logits_ != nl || graph_q_tile_ != q_tile_) {
            if (graph_) cudaGraphExecDestroy(graph_), graph_ = nullptr;
            if (cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
                cudaGetLastError();
                graphs_ = false;
            } else {
                cudaGraph_t g = nullptr;
                try {
                    enqueue(n, nl, false, &b);
                } catch (...) {
                    cudaStreamEndCapture(s_, &g);
                    if (g) cudaGraphDestroy(g);
                    throw;
                }
                const cudaError_t e = cudaStreamEndCapture(s_, &g);
                if (e == cudaSuccess && cudaGraphInstantiate(&graph_, g, 0) == cudaSuccess) {
                    graph_n_ = n, graph_logits_ = nl, graph_q_tile_ = q_tile_;
                } else {
                    cudaGetLastError();
                    graph_ = nullptr;
                    graphs_ = false;  // e.g. an app stream that cannot be captured: launch directly from now on
                }
                if (g) cudaGraphDestroy(g);
            }
        }
        if (graph_) EMBER_CU(cudaGraphLaunch(graph_, s_));
        else enqueue(n, nl, false, &b);
    } else {
        enqueue(n, nl, n >= 32, &b);
    }
    check_launch("forward");
    if (nl) {
        const size_t bytes = static_cast<size_t>(nl) * m_.hp.n_vocab * sizeof(float);
        EMBER_CU(cudaMemcpyAsync(host_logits_.data(), f(LOGITS), bytes, cudaMemcpyDeviceToHost, s_));
        EMBER_CU(cudaStreamSynchronize(s_));
        std::memcpy(b.logits, host_logits_.data(), bytes);
    } else {
        EMBER_CU(cudaStreamSynchronize(s_));
    }
}

std::vector<int32_t> Context::slot_rows(const int32_t *table, uint32_t n) const {
    std::vector<int32_t> rows(n);
    for (uint32_t p = 0; p < n; ++p) rows[p] = static_cast<int32_t>(cache_row(table, static_cast<int32_t>(p), p_.block_size));
    return rows;
}

// Layout as the CPU's (cpu_forward.cpp): per layer, the K rows of positions 0..n-1, then the V rows.
void Context::read_kv(const int32_t *table, uint32_t n, uint8_t *dst) {
    if (n == 0) return;
    m_.dev.make_current();
    const std::vector<int32_t> rows = slot_rows(table, n);
    DevBuf drows(rows.size() * sizeof(int32_t)), stage(static_cast<size_t>(n) * z_.kv_row_bytes);
    EMBER_CU(cudaMemcpyAsync(drows.data(), rows.data(), drows.size(), cudaMemcpyHostToDevice, s_));
    for (uint32_t il = 0; il < m_.hp.n_layer; ++il)
        for (const DevBuf *c : {&k_, &v_}) {
            gather_rows(c->data() + il * z_.kv_layer_bytes, reinterpret_cast<int32_t *>(drows.data()), n, z_.kv_row_bytes,
                        stage.data(), s_);
            EMBER_CU(cudaMemcpyAsync(dst, stage.data(), stage.size(), cudaMemcpyDeviceToHost, s_));
            EMBER_CU(cudaStreamSynchronize(s_));
            dst += stage.size();
        }
}

void Context::write_kv(const int32_t *table, uint32_t n, const uint8_t *src) {
    if (n == 0) return;
    m_.dev.make_current();
    const std::vector<int32_t> rows = slot_rows(table, n);
    DevBuf drows(rows.size() * sizeof(int32_t)), stage(static_cast<size_t>(n) * z_.kv_row_bytes);
    EMBER_CU(cudaMemcpyAsync(drows.data(), rows.data(), drows.size(), cudaMemcpyHostToDevice, s_));
    for (uint32_t il = 0; il < m_.hp.n_layer; ++il)
        for (DevBuf *c : {&k_, &v_}) {
            EMBER_CU(cudaMemcpyAsync(stage.data(), src, stage.size(), cudaMemcpyHostToDevice, s_));
            scatter_rows(c->data() + il * z_.kv_layer_bytes, reinterpret_cast<int32_t *>(drows.data()), n,
                         z_.kv_row_bytes, stage.data(), s_);
            EMBER_CU(cudaStreamSynchronize(s_));
            src += stage.size();
        }
}

void Context::copy_block(int32_t src, int32_t dst) {
    m_.dev.make_current();
    const size_t block = static_cast<size_t>(p_.block_size) * z_.kv_row_bytes;
    for (uint32_t il = 0; il < m_.hp.n_layer; ++il)
        for (DevBuf *c : {&k_, &v_}) {
            uint8_t *layer = c->data() + il * z_.kv_layer_bytes;
            EMBER_CU(cudaMemcpyAsync(layer + dst * block, layer + src * block, block, cudaMemcpyDeviceToDevice, s_));
        }
    EMBER_CU(cudaStreamSynchronize(s_));
}

} // namespace ember::cu
