// model.cpp — weights upload, matrix products, the context and its forward pass.
//
// A forward pass runs the model's program (program.hpp) node by node, enqueued on the context's stream
// without any host synchronisation; the one sync is at its end, to hand back the logits. Inputs
// (tokens, positions, cache slots, block tables, logit rows) are copied into device buffers first, and
// every kernel reads them there, so a decode step (<= 8 tokens) is captured once as a CUDA graph per
// (n_tokens, n_logits) shape and replayed.
#include "model.hpp"

#include "attn_math.hpp"
#include "backend/backend.hpp"
#include "backend/window_blocks.hpp"
#include "cu_check.hpp"
#include "family_kernels.hpp"
#include "inputs.hpp"
#include "moe.hpp"
#include "recurrent.hpp"
#include "tile_layout.hpp"
#include "weights.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace ember::cu {

namespace {
constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
bool quantized(uint32_t t) { return t == 8 || t == 2; }

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

// --- the model ---------------------------------------------------------------------------------------
Model::Model(Device &device, const ember_mod_model_desc &d) : dev(device), prog(program_of(d)) {
    dev.make_current();
    for (const ember_graph_node &n : prog.nodes)
        if (n.op == EMBER_GRAPH_GET_ROWS && n.w >= 0)
            n_token_ids = std::min(n_token_ids, static_cast<uint32_t>(d.tensors[n.w].ne[1]));
    input_buf = desc_input_buf(d);
    if (input_buf >= 0 && (static_cast<uint32_t>(input_buf) >= d.n_bufs || d.bufs[input_buf].rows != EMBER_GRAPH_ROWS_TOKENS))
        fail(EMBER_ERR_INVALID_MODEL, "cuda: the program's input buffer %d is not a buffer of token rows", input_buf);
    // Each tensor the program reads, once: by index, and two entries of the same bytes (a description
    // that lists a tied matrix twice) share one copy.
    struct Place {
        size_t offset;
        int32_t first;  // the index whose copy it is
    };
    std::vector<Place> place(d.n_tensors, Place{0, -1});
    size_t total = 0;
    for (uint32_t i = 0; i < d.n_tensors; ++i) {
        if (!prog.tensor_use[i]) continue;
        const ember_mod_tensor &t = d.tensors[i];
        for (uint32_t j = 0; j < i && place[i].first < 0; ++j) {
            const ember_mod_tensor &u = d.tensors[j];
            if (place[j].first == static_cast<int32_t>(j) && u.data == t.data && t.data && u.type == t.type &&
                std::memcmp(u.ne, t.ne, sizeof t.ne) == 0)
                place[i] = place[j];
        }
        if (place[i].first >= 0) continue;
        place[i] = Place{total, static_cast<int32_t>(i)};
        // A MOE expert stack: its experts' matrices one after another, each in the matrices' layout.
        total += prog.tensor_use[i] & Program::kExperts ? weight_device_bytes(expert_matrix(t, 0)) * static_cast<size_t>(t.ne[2])
                                                          : weight_device_bytes(t);
    }
    for (const ember_graph_node &n : prog.nodes)
        if (n.op == EMBER_GRAPH_MOE && n.sel_bias >= 0) {
            const float *v = static_cast<const float *>(d.tensors[n.sel_bias].data);
            sel_bias[n.sel_bias].assign(v, v + n.n_expert);
        }
    buf_ = DevBuf(total);
    tensors.assign(d.n_tensors, DevWeight{});
    experts.assign(d.n_tensors, {});
    std::vector<uint8_t> host;
    for (uint32_t i = 0; i < d.n_tensors; ++i) {
        if (place[i].first < 0) continue;
        if (place[i].first != static_cast<int32_t>(i)) {  // an earlier index holds the same bytes
            tensors[i] = tensors[static_cast<size_t>(place[i].first)];
            experts[i] = experts[static_cast<size_t>(place[i].first)];
            continue;
        }
        const ember_mod_tensor &t = d.tensors[i];
        void *base = buf_.data() + place[i].offset;
        if (prog.tensor_use[i] & Program::kExperts) {
            for (int64_t e = 0; e < t.ne[2]; ++e) {
                const ember_mod_tensor m = expert_matrix(t, static_cast<uint32_t>(e));
                host.assign(weight_device_bytes(m), 0);
                void *at = static_cast<uint8_t *>(base) + host.size() * static_cast<size_t>(e);
                experts[i].push_back(weight_pack(m, host.data(), at));
                EMBER_CU(cudaMemcpy(at, host.data(), host.size(), cudaMemcpyHostToDevice));
            }
            continue;
        }
        host.assign(weight_device_bytes(t), 0);
        tensors[i] = weight_pack(t, host.data(), base);
        EMBER_CU(cudaMemcpy(base, host.data(), host.size(), cudaMemcpyHostToDevice));
    }
}

// --- matrix products ---------------------------------------------------------------------------------
Matmul::Matmul() {
    // cuBLASLt only when asked for ($EMBER_CUDA_CUBLASLT=1): its f16 tiles round differently from the
    // matrix-vector kernels, so a prompt's logits would depend on how many tokens a pass holds; the
    // kernels alone are batch-invariant (the same bits for a prompt whole, chunked or token by token,
    // which state restore, speculative decoding and batching rely on), as the CPU backend is.
    const char *want = std::getenv("EMBER_CUDA_CUBLASLT");
    if (!want || want[0] != '1') return;
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
        if (tiled_type(w.type) && !in.have_q) {  // the tensor cores' products read quantized activations
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
Context::Context(Model &m, const ember_mod_context_params &p) : m_(m), p_(p) {
    z_ = context_sizes(m.prog, p);  // checks the parameters
    m_.dev.make_current();
    if (m.dev.app_stream()) {
        s_ = m.dev.app_stream();
    } else {
        EMBER_CU(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
        own_stream_ = true;
    }
    p_.n_window_blocks = z_.n_window_blocks;   // 0 from a core whose params end before it
    k_ = DevBuf(z_.kv_cache_bytes);
    v_ = DevBuf(z_.kv_cache_bytes);
    act_ = DevBuf(z_.total);
    states_ = DevBuf(z_.state_bytes);
    // A pass's tables (each sequence's once; its window table as long again): regrown by forward if short.
    const size_t table_words = static_cast<size_t>(p.n_blocks) + z_.rows;
    tables_ = DevBuf(align_up((z_.n_window_blocks ? 2 : 1) * table_words * sizeof(int32_t)));
    host_io_bytes_ = z_.io_words * sizeof(int32_t);
    host_io_ = HostBuf(host_io_bytes_);
    host_logits_ = HostBuf(static_cast<size_t>(p.n_logits) * m.prog.n_vocab * sizeof(float));
    if (m.prog.has_moe()) host_moe_ = HostBuf(4 * z_.moe_slots * sizeof(int32_t));
    mm_ = std::make_unique<Matmul>();
    if (const char *env = std::getenv("EMBER_CUDA_GRAPHS"); env && env[0] == '0') graphs_ = false;
    // The cache starts zeroed, as the CPU's (a saved state of unwritten rows is then the same bytes).
    EMBER_CU(cudaMemsetAsync(k_.data(), 0, k_.size(), s_));
    EMBER_CU(cudaMemsetAsync(v_.data(), 0, v_.size(), s_));
    if (states_.size()) EMBER_CU(cudaMemsetAsync(states_.data(), 0, states_.size(), s_));
    EMBER_CU(cudaStreamSynchronize(s_));
}

Context::~Context() {
    m_.dev.make_current();
    if (graph_) cudaGraphExecDestroy(graph_);
    if (s_) cudaStreamSynchronize(s_);
    if (own_stream_) cudaStreamDestroy(s_);
}

void Context::moe_node(const ember_graph_node &nd, uint32_t rows) {
    const size_t n_logits = size_t{rows} * nd.n_expert;
    router_logits_.resize(n_logits);
    EMBER_CU(cudaMemcpyAsync(router_logits_.data(), buf(nd.src2), n_logits * sizeof(float), cudaMemcpyDeviceToHost, s_));
    EMBER_CU(cudaStreamSynchronize(s_));
    const MoeRoute route = moe_route(router_logits_.data(), rows, nd.n_expert, nd.n_expert_used, nd.moe_gating,
                                     m_.sel_bias_of(nd.sel_bias));
    MoeWork w;
    w.xin = scratch(z_.moe_xin), w.g = scratch(z_.moe_g), w.u = scratch(z_.moe_u), w.outs = scratch(z_.moe_outs);
    w.token = reinterpret_cast<int32_t *>(scratch(z_.moe_token)), w.pos = reinterpret_cast<int32_t *>(scratch(z_.moe_pos));
    w.gate = scratch(z_.moe_gate), w.row_gate = scratch(z_.moe_row_gate);
    w.q = ActQ8{reinterpret_cast<int8_t *>(scratch(z_.act_codes)), scratch(z_.act_scales)};
    w.x16 = reinterpret_cast<uint16_t *>(scratch(z_.act16));
    moe_upload_route(route, w, s_, host_moe_.data());
    MoeExperts e;
    e.gate = m_.experts[static_cast<size_t>(nd.w)].data(), e.up = m_.experts[static_cast<size_t>(nd.w2)].data();
    e.down = m_.experts[static_cast<size_t>(nd.w3)].data();
    e.gate_b = m_.vec(nd.b), e.up_b = m_.vec(nd.b2), e.down_b = m_.vec(nd.b3);
    e.act = nd.moe_act, e.alpha = nd.act_alpha, e.limit = nd.act_limit;
    moe_enqueue(*mm_, e, route, w, buf(nd.src), buf(nd.dst), rows, static_cast<int>(nd.n_expert_used), s_);
}

// Splits depend on the context's capacity, not on this step's length, so a captured decode step stays
// valid as the sequence grows (splits past the last key are empty and cost one check); their keys are
// fixed ranges of positions, so the result is batch-invariant (attn_math.hpp).
void Context::attention_node(const ember_graph_node &nd, uint32_t n) {
    // A window layer reads its own pool's cache through the window tables.
    // The cache it reads: its own layer's, or the earlier layer's it shares (graph.h's kv_from).
    const int32_t kl = ember_graph_kv_layer(&nd);
    const int32_t *pos = io() + z_.rows, *toff = windowed(kl) ? window_offsets() : pos + 2 * z_.rows;
    AttnArgs a;
    a.q = buf(nd.src), a.k = layer_cache(k_, kl), a.v = layer_cache(v_, kl);
    a.kv_type = p_.kv_type, a.row_bytes = z_.kv_row_bytes, a.block_size = p_.block_size;
    a.pos = pos, a.tab_off = toff, a.tables = reinterpret_cast<const int32_t *>(tables_.data());
    a.n_tokens = static_cast<int>(n), a.n_head = static_cast<int>(nd.n_head), a.n_head_kv = static_cast<int>(nd.n_head_kv);
    a.head_dim = static_cast<int>(nd.head_dim), a.scale = nd.scale;
    a.n_splits = z_.attn_splits, a.split_keys = kAttnSplitKeys;
    a.q_tile = attention_q_tile(a.n_head, a.n_head_kv, one_table_);
    a.partials = scratch(z_.partials), a.out = buf(nd.dst);
    AttnExt x;
    if (nd.op == EMBER_GRAPH_ATTENTION_EXT) {
        x.window = static_cast<int32_t>(nd.window), x.softcap = nd.softcap, x.sinks = m_.vec(nd.w);
        x.local_chunk = static_cast<int32_t>(nd.attn_local_chunk), x.temp_floor = static_cast<int32_t>(nd.attn_temp_floor);
        x.temp_scale = nd.attn_temp_scale, x.temp_offset = nd.attn_temp_offset;
        // Both ways: each query's keys end at its sequence's last position in the pass, not its own.
        if (nd.attn_mask == EMBER_GRAPH_MASK_SEQUENCE) a.last = seq_last();
    }
    // The partials hold attn_group tokens: a longer pass goes in groups.
    attention_ext(a, x, s_, static_cast<int>(z_.attn_group));
}

// The program's nodes in order (program.hpp's NodeRun says how each runs). Nodes over logits rows do
// nothing in a pass that wants no logits.
void Context::enqueue(uint32_t n, uint32_t n_logits, bool cancellable, const ember_mod_batch *b) {
    const Program &pg = m_.prog;
    int32_t *tok = io(), *pos = tok + z_.rows, *slots = pos + z_.rows, *lrows = tok + 4 * z_.rows;
    const ActQ8 aq{reinterpret_cast<int8_t *>(scratch(z_.act_codes)), scratch(z_.act_scales)};
    uint16_t *x16 = reinterpret_cast<uint16_t *>(scratch(z_.act16));
    float *cs = scratch(z_.rope_cos), *sn = scratch(z_.rope_sin);
    Matmul::Input in{};
    int32_t layer = INT_MIN;
    for (size_t i = 0; i < pg.nodes.size(); ++i) {
        const ember_graph_node &nd = pg.nodes[i];
        const NodeRun &how = pg.how[i];
        if (nd.layer != layer) {
            layer = nd.layer;
            // Cancellation between layers of a long pass: what is enqueued finishes, nothing more is added.
            if (cancellable && layer >= 0 && static_cast<uint32_t>(layer) < pg.n_layer && b->cancel &&
                b->cancel(b->cancel_data)) {
                EMBER_CU(cudaStreamSynchronize(s_));
                fail(EMBER_ERR_CANCELLED, "cuda: forward pass cancelled after layer %d of %u", layer, pg.n_layer);
            }
        }
        if (how.skip) continue;
        const uint32_t rows = pg.logits_rows(pg.row_buf(nd)) ? n_logits : n;
        if (rows == 0) continue;
        const int64_t width = pg.width(pg.row_buf(nd)), values = static_cast<int64_t>(rows) * width;
        switch (nd.op) {
        case EMBER_GRAPH_GET_ROWS: get_rows(m_.matrix(nd.w), tok, n, buf(nd.dst), s_); break;
        case EMBER_GRAPH_RMS_NORM:
            rms_norm(buf(nd.src), m_.vec(nd.w), buf(nd.dst), values / nd.n, nd.n, nd.eps, s_);
            break;
        case EMBER_GRAPH_MATMUL: {
            if (!how.share_input) in = Matmul::Input{buf(nd.src), rows, pg.width(nd.src), aq, x16};
            // Accumulated into the residual: the dst of the (skipped) ADD after it.
            float *y = how.accumulate ? buf(pg.nodes[i + 1].dst) : buf(nd.dst);
            mm_->run(m_.matrix(nd.w), in, y, m_.vec(nd.b), how.accumulate, s_);
            break;
        }
        case EMBER_GRAPH_ROPE:
        case EMBER_GRAPH_ROPE_YARN:
            if (how.new_angles && nd.op == EMBER_GRAPH_ROPE)
                rope_angles(pos, n, static_cast<int>(nd.n_rot), nd.rope_theta, nd.rope_freq_scale, m_.vec(nd.w), cs, sn, s_);
            if (how.new_angles && nd.op == EMBER_GRAPH_ROPE_YARN) {
                const RopeYarn y{nd.rope_ext_factor, nd.rope_attn_factor, nd.rope_beta_fast, nd.rope_beta_slow,
                                 nd.rope_n_ctx_orig};
                rope_angles_yarn(pos, n, static_cast<int>(nd.n_rot), nd.rope_theta, nd.rope_freq_scale, m_.vec(nd.w), y,
                                 cs, sn, s_);
            }
            rope_apply(buf(nd.dst), n, static_cast<int>(nd.n_head), static_cast<int>(nd.head_dim), static_cast<int>(nd.n_rot),
                       nd.rope_mode == EMBER_GRAPH_ROPE_NEOX, cs, sn, s_);
            break;
        case EMBER_GRAPH_KV_STORE: {
            const int32_t *at = windowed(nd.layer) ? window_slots() : slots;
            kv_store(buf(nd.src), at, n, width, p_.kv_type, layer_cache(k_, nd.layer), z_.kv_row_bytes, s_);
            kv_store(buf(nd.src2), at, n, width, p_.kv_type, layer_cache(v_, nd.layer), z_.kv_row_bytes, s_);
            break;
        }
        case EMBER_GRAPH_ATTENTION:
        case EMBER_GRAPH_ATTENTION_EXT: attention_node(nd, n); break;
        case EMBER_GRAPH_SCALE: elementwise(Ew::Scale, buf(nd.src), nullptr, buf(nd.dst), values, nd.scale, 0, s_); break;
        case EMBER_GRAPH_SOFTCAP:
            elementwise(Ew::Softcap, buf(nd.src), nullptr, buf(nd.dst), values, nd.softcap, 0, s_);
            break;
        case EMBER_GRAPH_GEGLU: elementwise(Ew::Geglu, buf(nd.src), buf(nd.src2), buf(nd.dst), values, 0, 0, s_); break;
        case EMBER_GRAPH_MOE: moe_node(nd, rows); break;
        case EMBER_GRAPH_COPY_COLS:
            copy_cols(buf(nd.src), buf(nd.dst), rows, pg.width(nd.src), pg.width(nd.dst), nd.n_rot, nd.n_head, nd.n,
                      nd.head_dim, s_);
            break;
        case EMBER_GRAPH_SIGMOID_MUL: sigmoid_mul(buf(nd.src), buf(nd.src2), buf(nd.dst), rows, width, pg.width(nd.src2), s_); break;
        case EMBER_GRAPH_SSM_CONV: {
            const int k = static_cast<int>(m_.matrix(nd.w).n_in);  // the kernel F32 [K, C]: K values a row
            ssm_conv(buf(nd.src), buf(nd.dst), rows, width, k, m_.vec(nd.w), state_runs(), nd.state_offset, s_, m_.vec(nd.b),
                     nd.n == EMBER_GRAPH_SSM_CONV_SILU);
            break;
        }
        case EMBER_GRAPH_SSM_SCAN: {
            ScanShape p;
            p.n_head = static_cast<int>(nd.n_head), p.head_dim = static_cast<int>(nd.head_dim);
            p.n_group = static_cast<int>(nd.n_head_kv), p.d_state = static_cast<int>(nd.n);
            p.A = m_.vec(nd.w), p.D = m_.vec(nd.w2), p.dt_bias = m_.vec(nd.b);
            ssm_scan(buf(nd.src), buf(nd.src2), buf(nd.dst), rows, p, state_runs(), nd.state_offset, s_);
            break;
        }
        case EMBER_GRAPH_MUL: elementwise(Ew::Mul, buf(nd.src), buf(nd.src2), buf(nd.dst), values, 0, 0, s_); break;
        case EMBER_GRAPH_LAYER_NORM:
            layer_norm(buf(nd.src), m_.vec(nd.w), m_.vec(nd.b), buf(nd.dst), rows, width, nd.eps, s_);
            break;
        case EMBER_GRAPH_GELU: elementwise(Ew::Gelu, buf(nd.src), nullptr, buf(nd.dst), values, 0, 0, s_); break;
        case EMBER_GRAPH_ADD_POS_ROWS: add_pos_rows(buf(nd.dst), m_.matrix(nd.w), pos, n, width, s_); break;
        case EMBER_GRAPH_GATED_DELTA: {
            DeltaShape p;
            p.n_head = static_cast<int>(nd.n_head), p.n_head_k = static_cast<int>(nd.n_head_kv);
            p.head_dim = static_cast<int>(nd.head_dim), p.dt = m_.vec(nd.w), p.decay = m_.vec(nd.w2);
            p.eps = nd.eps, p.scale = nd.scale, p.grouped = nd.n == 1;
            gated_delta(buf(nd.src), buf(nd.src2), buf(nd.src3), buf(nd.dst), rows, p, state_runs(), nd.state_offset, s_);
            break;
        }
        case EMBER_GRAPH_ADD: add_inplace(buf(nd.dst), buf(nd.src), values, s_); break;
        case EMBER_GRAPH_SWIGLU: swiglu(buf(nd.src), buf(nd.src2), buf(nd.dst), values, s_); break;
        case EMBER_GRAPH_GATHER_LOGITS:
            gather_rows(reinterpret_cast<const uint8_t *>(buf(nd.src)), lrows, n_logits, static_cast<size_t>(width) * sizeof(float),
                        reinterpret_cast<uint8_t *>(buf(nd.dst)), s_);
            break;
        default: fail(EMBER_ERR_INTERNAL, "cuda: op %u", nd.op);  // program_of refused it
        }
    }
}

void Context::forward(const ember_mod_batch &b) {
    m_.dev.make_current();
    const Program &pg = m_.prog;
    const uint32_t n = b.n_tokens, nl = b.n_logits, bs = p_.block_size;
    StepShape shape;
    shape.rows = static_cast<uint32_t>(z_.rows), shape.block_size = bs, shape.n_blocks = p_.n_blocks;
    shape.n_vocab = pg.n_vocab, shape.n_batch = p_.n_batch, shape.n_logits = p_.n_logits;
    shape.n_window_blocks = p_.n_window_blocks, shape.n_state_slots = z_.n_state_slots;
    shape.n_token_ids = m_.n_token_ids, shape.n_pos_rows = pg.n_pos_rows, shape.seq_last = pg.seq_mask;
    int32_t *h = reinterpret_cast<int32_t *>(host_io_.data());
    std::vector<int32_t> tabs;
    step_inputs(b, shape, h, tabs);
    if (tabs.size() * sizeof(int32_t) > tables_.size()) {
        EMBER_CU(cudaStreamSynchronize(s_));
        tables_ = DevBuf(align_up(tabs.size() * 2 * sizeof(int32_t)));
        if (graph_) cudaGraphExecDestroy(graph_), graph_ = nullptr;  // it reads the old buffer
    }
    EMBER_CU(cudaMemcpyAsync(act_.data() + z_.io, h, host_io_bytes_, cudaMemcpyHostToDevice, s_));
    EMBER_CU(cudaMemcpyAsync(tables_.data(), tabs.data(), tabs.size() * sizeof(int32_t), cudaMemcpyHostToDevice, s_));
    if (m_.input_buf >= 0) {
        // A part of a program cut across devices: the activations of the part before, into their buffer
        // ahead of the pass (and of a captured graph's launch, which reads them there).
        if (b.struct_size < offsetof(ember_mod_batch, input) + sizeof b.input || !b.input)
            fail(EMBER_ERR_INTERNAL, "cuda forward: a program with an input buffer needs the batch's input rows");
        EMBER_CU(cudaMemcpyAsync(buf(m_.input_buf), b.input, size_t{n} * pg.bufs[static_cast<size_t>(m_.input_buf)].width *
                                 sizeof(float), cudaMemcpyHostToDevice, s_));
    }
    one_table_ = true;
    for (uint32_t t = 1; t < n; ++t) one_table_ = one_table_ && b.tables[t] == b.tables[0];

    // A MOE model's pass synchronises at each MOE node (moe_route.hpp): not capturable.
    const bool graph_ok = graphs_ && n <= Matmul::kGemvMaxTokens && !mm_->gemm_for(nl) && !pg.has_moe();
    if (graph_ok) {
        if (!graph_ || graph_n_ != n || graph_logits_ != nl || graph_one_table_ != one_table_) {
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
                    graph_n_ = n, graph_logits_ = nl, graph_one_table_ = one_table_;
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
        const size_t bytes = static_cast<size_t>(nl) * pg.n_vocab * sizeof(float);
        EMBER_CU(cudaMemcpyAsync(host_logits_.data(), buf(pg.logits_buf), bytes, cudaMemcpyDeviceToHost, s_));
        EMBER_CU(cudaStreamSynchronize(s_));
        std::memcpy(b.logits, host_logits_.data(), bytes);
    } else {
        EMBER_CU(cudaStreamSynchronize(s_));
    }
}

// Layout as the CPU's (cpu_forward.cpp): per layer, the K rows of positions 0..n-1, then the V rows.
// With a window pool, `table` is ceil(n / block_size) main blocks, then as many window blocks; the rows
// of released window blocks (-1) read as zeros and are not written back.
struct Context::KvPlans {
    KvRowPlan plan[2];   // [0]: the main blocks', [1]: the window blocks'
    DevBuf rows[2];      // their rows on the device
    const int32_t *rows_of(bool window) const { return reinterpret_cast<const int32_t *>(rows[window].data()); }
};

Context::KvPlans Context::kv_plans(const int32_t *table, uint32_t n) {
    KvPlans k;
    const uint32_t bs = p_.block_size;
    k.plan[0] = kv_row_plan(table, n, bs);
    if (p_.n_window_blocks) k.plan[1] = kv_row_plan(table + (n + bs - 1) / bs, n, bs);
    for (int w = 0; w < 2; ++w) {
        if (k.plan[w].rows.empty()) continue;
        k.rows[w] = DevBuf(k.plan[w].rows.size() * sizeof(int32_t));
        EMBER_CU(cudaMemcpyAsync(k.rows[w].data(), k.plan[w].rows.data(), k.rows[w].size(), cudaMemcpyHostToDevice, s_));
    }
    return k;
}

void Context::read_kv(const int32_t *table, uint32_t n, uint8_t *dst) { copy_kv(table, n, dst, nullptr); }

void Context::write_kv(const int32_t *table, uint32_t n, const uint8_t *src) { copy_kv(table, n, nullptr, src); }

// Per layer, K then V: the held positions' rows between the cache and the host's n rows, through `stage`
// on the device; packed in `held` on the host when some position is not held (its rows read as zeros
// and are not written back).
void Context::copy_kv(const int32_t *table, uint32_t n, uint8_t *dst, const uint8_t *src) {
    if (n == 0) return;
    m_.dev.make_current();
    const bool reading = dst != nullptr;
    const KvPlans k = kv_plans(table, n);
    const size_t row = z_.kv_row_bytes, span = size_t{n} * row;
    DevBuf stage(span);
    std::vector<uint8_t> held;
    size_t at = 0;   // where the host's rows of this layer's K (or V) begin
    for (uint32_t il = 0; il < m_.prog.n_layer; ++il) {
        if (!has_kv(il)) continue;  // a recurrent layer: no rows here nor in the host's layout
        const bool win = windowed(static_cast<int32_t>(il));
        const KvRowPlan &plan = k.plan[win];
        const size_t m = plan.rows.size();
        const bool whole = m == n;   // every position held: the host's rows as they are
        if (!whole) held.resize(m * row);
        for (const DevBuf *c : {&k_, &v_}) {
            if (reading && !whole) std::memset(dst + at, 0, span);
            if (m > 0) {
                uint8_t *cache = layer_cache(*c, static_cast<int32_t>(il));
                if (reading) {
                    gather_rows(cache, k.rows_of(win), static_cast<int64_t>(m), row, stage.data(), s_);
                    EMBER_CU(cudaMemcpyAsync(whole ? dst + at : held.data(), stage.data(), m * row,
                                             cudaMemcpyDeviceToHost, s_));
                } else {
                    if (!whole)
                        for (size_t i = 0; i < m; ++i) std::memcpy(held.data() + i * row, src + at + plan.pos[i] * row, row);
                    EMBER_CU(cudaMemcpyAsync(stage.data(), whole ? src + at : held.data(), m * row,
                                             cudaMemcpyHostToDevice, s_));
                    scatter_rows(cache, k.rows_of(win), static_cast<int64_t>(m), row, stage.data(), s_);
                }
                EMBER_CU(cudaStreamSynchronize(s_));
            }
            if (reading && !whole)
                for (size_t i = 0; i < m; ++i) std::memcpy(dst + at + plan.pos[i] * row, held.data() + i * row, row);
            at += span;
        }
    }
}

void Context::copy_block(int32_t src, int32_t dst) {
    m_.dev.make_current();
    const CopyBlockIds ids = copy_block_ids(src, dst, p_.n_blocks, p_.n_window_blocks, "cuda");
    const size_t block = static_cast<size_t>(p_.block_size) * z_.kv_row_bytes;
    for (uint32_t il = 0; il < m_.prog.n_layer; ++il) {
        if (windowed(static_cast<int32_t>(il)) != ids.window || !has_kv(il)) continue;
        for (DevBuf *c : {&k_, &v_}) {
            uint8_t *layer = layer_cache(*c, static_cast<int32_t>(il));
            EMBER_CU(cudaMemcpyAsync(layer + ids.dst * block, layer + ids.src * block, block, cudaMemcpyDeviceToDevice, s_));
        }
    }
    EMBER_CU(cudaStreamSynchronize(s_));
}

StateRuns Context::state_runs() const {
    const int32_t *io_state = io() + step_io_state(z_.rows, p_.n_logits, p_.n_window_blocks > 0);
    StateRuns r;
    r.run_of = io_state + StateIo::kRunOf * z_.rows;
    r.t0 = io_state + StateIo::kT0 * z_.rows, r.t1 = io_state + StateIo::kT1 * z_.rows;
    r.from = io_state + StateIo::kFrom * z_.rows, r.slot = io_state + StateIo::kSlot * z_.rows;
    r.keep = io_state + StateIo::kKeep * z_.rows;
    r.n_runs = io_state + StateIo::words(z_.rows) - 1;
    r.states = state_slot(0), r.state_floats = m_.prog.state_floats;
    return r;
}

void Context::check_slot(int32_t slot, const char *what) const {
    if (slot < 0 || static_cast<uint32_t>(slot) >= z_.n_state_slots)
        fail(EMBER_ERR_INTERNAL, "cuda %s: state slot %d of %u", what, slot, z_.n_state_slots);
}

void Context::copy_state(int32_t src, int32_t dst) {
    check_slot(src, "copy_state");
    check_slot(dst, "copy_state");
    if (src == dst) return;
    m_.dev.make_current();
    EMBER_CU(cudaMemcpyAsync(state_slot(dst), state_slot(src), m_.prog.state_floats * sizeof(float),
                             cudaMemcpyDeviceToDevice, s_));
    EMBER_CU(cudaStreamSynchronize(s_));
}

void Context::read_state(int32_t slot, float *dst) {
    check_slot(slot, "read_state");
    m_.dev.make_current();
    EMBER_CU(cudaMemcpyAsync(dst, state_slot(slot), m_.prog.state_floats * sizeof(float), cudaMemcpyDeviceToHost, s_));
    EMBER_CU(cudaStreamSynchronize(s_));
}

void Context::write_state(int32_t slot, const float *src) {
    check_slot(slot, "write_state");
    m_.dev.make_current();
    EMBER_CU(cudaMemcpyAsync(state_slot(slot), src, m_.prog.state_floats * sizeof(float), cudaMemcpyHostToDevice, s_));
    EMBER_CU(cudaStreamSynchronize(s_));
}

} // namespace ember::cu
