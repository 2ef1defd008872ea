// test_vulkan_forward.cpp — the Vulkan module's executor of a model's program against the CPU's on
// synthetic models that exercise what the real test models do not: Q/K/V biases and NEOX rope (qwen2),
// per-head q/k norms and a head size of its own (qwen3), rope frequency factors, GQA, an untied output
// matrix, F16 and K-quant (Q4_K_M mix) weights; a prompt evaluated as one 40-token pass (split-K off)
// and then token by token (split-K on past 64 keys). Programs changed from the builder's: the runs the
// module folds (a product added into the residual, the gathered logits rows normed) kept apart, which
// must give the folded program's logits bit for bit; norms without weights; an op and a rope mode the
// module does not run, refused at load naming them. And cancellation between the command buffers of a
// long pass. A hybrid program (Gated DeltaNet and gated attention layers, built here in Qwen3.5's and
// Qwen3-Next's shapes): several sequences in one pass, a fork, K/V rows and recurrent states moved from
// the CPU's context into the module's, and the batches a context refuses. Skips (77) without a Vulkan
// device.
//
// Bound: tests/test_forward.cpp holds the CPU decoder to the exact (double) decoder within b x
// max(1, max|logit|), b = 1e-3 for float weights and 2e-2 for 8-bit activations; the Vulkan kernels
// are held to the same per-op bounds as the CPU's (test_parity), so the two backends may differ by
// twice that.
#include "test_util.h"

#include "backend/backend.hpp"
#include "backend/module_loader.hpp"
#include "core/error.hpp"
#include "model/model.hpp"
#include "testing/reference_forward.hpp"
#include "testing/synthetic.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

using namespace ember;

namespace {

Backend *g_vulkan = nullptr;

struct TempFile {
    std::string path;
    explicit TempFile(const std::vector<uint8_t> &bytes) {
        char tmpl[] = "/tmp/ember_vkfwd_XXXXXX";
        const int fd = mkstemp(tmpl);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, bytes.data(), bytes.size()), (ssize_t)bytes.size());
        close(fd);
        path = tmpl;
    }
    ~TempFile() { unlink(path.c_str()); }
};

// A model's program copied so that a test can change it (the description points into these vectors).
struct ProgramCopy {
    std::vector<ember_graph_node> nodes;
    std::vector<ember_graph_buf> bufs;
    ember_mod_model_desc c;
    explicit ProgramCopy(const ModelDesc &d) : nodes(d.nodes), bufs(d.bufs), c(d.c) {}
    int32_t buf(uint32_t width, uint32_t rows) {
        bufs.push_back({width, rows});
        return static_cast<int32_t>(bufs.size() - 1);
    }
    const ember_mod_model_desc &desc() {
        c.nodes = nodes.data(), c.n_nodes = static_cast<uint32_t>(nodes.size()), c.node_size = sizeof(ember_graph_node);
        c.bufs = bufs.data(), c.n_bufs = static_cast<uint32_t>(bufs.size());
        return c;
    }
};

// Runs n tokens from position 0 on a fresh context, `chunk` tokens per pass, the logits of every token. A
// model with recurrent state keeps its sequence in state slot 1 (of 2), from the zero state.
std::vector<float> run(Backend &b, const ember_mod_model_desc &d, const std::vector<int32_t> &tokens, uint32_t chunk) {
    ContextParams cp;
    cp.n_blocks = 16, cp.block_size = 16, cp.n_batch = 64, cp.n_logits = 64, cp.n_threads = 2;
    cp.n_state_slots = state_bytes(d) > 0 ? 2 : 0;
    auto bm = b.load_model(d);
    auto ctx = bm->create_context(cp);
    std::vector<int32_t> table = {3, 0, 7, 1, 9, 2, 4, 5, 6, 8, 10, 11, 12, 13, 14, 15};  // scattered blocks
    std::vector<float> logits(tokens.size() * d.n_vocab);
    for (uint32_t t0 = 0; t0 < tokens.size(); t0 += chunk) {
        const uint32_t n = std::min<uint32_t>(chunk, static_cast<uint32_t>(tokens.size()) - t0);
        std::vector<int32_t> pos(n), rows(n), slots(n, 1), src(n, t0 == 0 ? -1 : 1);
        std::vector<const int32_t *> tabs(n, table.data());
        for (uint32_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(t0 + i), rows[i] = static_cast<int32_t>(i);
        Batch bt;
        bt.n_tokens = n, bt.tokens = tokens.data() + t0, bt.pos = pos.data(), bt.tables = tabs.data();
        bt.n_logits = n, bt.logits_rows = rows.data(), bt.logits = logits.data() + size_t{t0} * d.n_vocab;
        if (cp.n_state_slots) bt.state_slots = slots.data(), bt.state_src = src.data();
        ctx->forward(bt);
    }
    return logits;
}

std::vector<int32_t> prompt(uint32_t n_vocab) {
    std::vector<int32_t> tokens(80);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + 3) % n_vocab);
    return tokens;
}

// A choice of experts closer than this in the fp64 pass (tests/test_families.cpp's kRouteTie) may differ
// between two backends whose 8-bit activations differ by one rounding: a jump in the logits, not an error.
constexpr double kRouteTie = 0.1;

// The CPU's logits of the program against the Vulkan module's, in one pass and token by token. With
// `experts` (a model with experts and quantized weights): a difference beyond the bound is reported, not
// failed, where the fp64 pass's choice of experts over the prompt is a near tie.
void compare(const ember_mod_model_desc &d, double b, const char *what, const Model *experts = nullptr) {
    const std::vector<int32_t> tokens = prompt(d.n_vocab);
    const std::vector<float> ref = run(*backend_find(EMBER_BACKEND_CPU), d, tokens, 40);
    for (uint32_t chunk : {40u, 1u}) {
        const std::vector<float> got = run(*g_vulkan, d, tokens, chunk);
        double scale = 0, diff = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            scale = std::max(scale, std::fabs(double(ref[i])));
            diff = std::max(diff, std::fabs(double(got[i]) - ref[i]));
        }
        const double bound = 2 * b * std::max(1.0, scale);
        std::printf("%-44s chunk %2u: max|logit| %.3f, max diff %.2e (bound %.1e)\n", what, chunk, scale, diff, bound);
        assert_true(scale > 0.1);
        if (diff > bound && experts) {
            ReferenceStats stats;
            reference_logits(*experts, tokens, &stats);
            std::printf("%-44s           the fp64 pass's router margin %.3f: %s\n", "", stats.min_route_margin,
                        stats.min_route_margin < kRouteTie ? "expert choice within rounding" : "FAIL");
            assert_true(stats.min_route_margin < kRouteTie);
            continue;
        }
        assert_true(diff <= bound);
    }
}

void compare(const SyntheticSpec &spec, double b, const char *what) {
    TempFile file(synthetic_model_gguf(spec));
    auto model = Model::load(file.path, LoadOptions{});
    const bool quantized = spec.type != DType::F32 && spec.type != DType::F16 && spec.type != DType::BF16;
    compare(model->desc().c, b, what, spec.n_expert > 0 && quantized ? model.get() : nullptr);
}
void test_llama_f32_gqa_rope_freqs(void **) {
    SyntheticSpec s;
    s.rope_freqs = true;
    compare(s, 1e-3, "llama F32, GQA 4/2, rope_freqs, tied");
}

void test_qwen2_f16_biases_neox_untied(void **) {
    SyntheticSpec s;
    s.arch = "qwen2";
    s.qkv_bias = true;
    s.type = DType::F16;
    s.tied_output = false;
    compare(s, 1e-3, "qwen2 F16, biases, NEOX, untied output");
}

void test_llama_q4_k_m(void **) {
    SyntheticSpec s;
    s.n_embd = 256, s.n_ff = 512, s.n_head = 4, s.n_head_kv = 2;
    s.mix = WeightMix::Q4_K_M;
    compare(s, 2e-2, "llama Q4_K_M mix (Q4_K, Q6_K), 256 wide");
}

void test_llama_q8_0_q4_0(void **) {
    for (DType t : {DType::Q8_0, DType::Q4_0}) {
        SyntheticSpec s;
        s.type = t;
        compare(s, 2e-2, t == DType::Q8_0 ? "llama Q8_0" : "llama Q4_0");
    }
}

// A pass of 32 tokens or more with a cancel flag is recorded one layer per command buffer and checks
// the flag between them.
void test_qwen3_per_head_norm_head_dim(void **) {
    SyntheticSpec s;
    s.arch = "qwen3";
    s.qk_norm = true;
    s.head_dim = 32;  // q rows of 4 x 32 = 128 beside a residual of 64
    compare(s, 1e-3, "qwen3 F32, per-head q/k norm, head_dim 32");
}

// Every model family (docs/model-families.md) through the one decoder: gemma2/3 (GeGLU, sqrt(d) scale, softcaps, sliding
// windows crossed by the 80-token prompt), phi3 (LongRoPE factors, partial rotary), granite's multipliers,
// olmo2, mixtral, qwen3moe and gpt-oss (experts routed per pass, sinks, YaRN, clamped SwiGLU, biases), the
// Gated DeltaNet hybrids qwen35, qwen35moe and qwen3next (recurrent state carried from pass to pass): each
// op of graph.h the CPU runs, run by the module's shaders, in F32 weights, Q8_0 and Q4_K (the K layout:
// each expert matrix of a stack packed on its own). With 8-bit activations one code rounded the other
// way (a float difference of ~1e-6 at a rounding boundary) moves the logits by ~1e-2 of their scale
// from that position on, through the KV rows or the recurrent state: within the bound, but enough to flip
// a near tie of the routers later (compare()'s exemption).
void test_families(void **) {
    size_t hybrids = 0;
    for (const std::string &name : synthetic_families()) {
        // A family whose file the core's loader does not read (yet) has no program to run: reported, not
        // compared (tests/test_families.cpp holds the loader to every family).
        try {
            TempFile file(synthetic_model_gguf(synthetic_family(name)));
            hybrids += state_bytes(Model::load(file.path, LoadOptions{})->desc().c) > 0;
        } catch (const Error &e) {
            std::printf("%-44s not loaded by the core: %s\n", name.c_str(), e.what());
            continue;
        }
        for (DType t : {DType::F32, DType::Q8_0, DType::Q4_K}) {
            SyntheticSpec s = synthetic_family(name);
            s.type = t;
            const std::string what = name + " " + dtype_name(t);
            compare(s, t == DType::F32 ? 1e-3 : 2e-2, what.c_str());
        }
    }
    // A window wider than one split's 64 keys: the decode steps past position 72 split the window (not the
    // context) in two, the sinks joining in attention_merge.comp.
    SyntheticSpec s = synthetic_family("gpt-oss");
    s.window = 72;
    compare(s, 1e-3, "gpt-oss F32, window 72 split in decode");
    // Gemma 4's real head sizes: window layers 256 wide, global layers 512 (attention.comp's widest).
    SyntheticSpec g = synthetic_family("gemma4");
    g.head_dim = 512, g.head_dim_swa = 256;
    compare(g, 1e-3, "gemma4 F32, heads of 256 and 512");
    assert_true(hybrids > 0);   // the recurrent layers were among the programs run
}

// The program with every run the module folds kept apart by a node between its two: a weightless norm of
// the product (or of the gathered rows) into a buffer of its own, which nothing reads. The runs then go
// through add.comp, gather.comp and the weightless norm; the logits must be the folded program's exactly
// (the fold performs the same roundings).
ProgramCopy unfolded(const ModelDesc &d, uint32_t *n_apart) {
    ProgramCopy p(d);
    std::vector<ember_graph_node> out;
    *n_apart = 0;
    for (size_t i = 0; i < p.nodes.size(); ++i) {
        const ember_graph_node n = p.nodes[i];
        out.push_back(n);
        const ember_graph_node *next = i + 1 < p.nodes.size() ? &p.nodes[i + 1] : nullptr;
        if (!next || next->src != n.dst ||
            !((n.op == EMBER_GRAPH_MATMUL && next->op == EMBER_GRAPH_ADD) ||
              (n.op == EMBER_GRAPH_GATHER_LOGITS && next->op == EMBER_GRAPH_RMS_NORM)))
            continue;
        const ember_graph_buf shape = p.bufs[static_cast<size_t>(n.dst)];
        ember_graph_node apart = n;  // its layer
        apart.op = EMBER_GRAPH_RMS_NORM, apart.src = n.dst, apart.dst = p.buf(shape.width, shape.rows);
        apart.src2 = apart.w = apart.b = -1, apart.n = shape.width, apart.eps = 1e-5f;
        out.push_back(apart);
        ++*n_apart;
    }
    p.nodes = out;
    return p;
}

void test_unfolded_program_same_logits(void **) {
    SyntheticSpec s;
    s.type = DType::Q8_0;  // quantized products: the shared quantized inputs too
    TempFile file(synthetic_model_gguf(s));
    auto model = Model::load(file.path, LoadOptions{});
    uint32_t n_apart = 0;
    ProgramCopy u = unfolded(model->desc(), &n_apart);
    // Each layer's two residual adds. (The head normalises every row, its hidden rows, and gathers the
    // logits rows from them: no gather-then-norm run there.)
    assert_int_equal(n_apart, 2 * s.n_layer);
    const std::vector<int32_t> tokens = prompt(s.n_vocab);
    for (uint32_t chunk : {40u, 1u}) {
        const std::vector<float> folded = run(*g_vulkan, model->desc().c, tokens, chunk);
        const std::vector<float> apart = run(*g_vulkan, u.desc(), tokens, chunk);
        assert_int_equal(std::memcmp(folded.data(), apart.data(), folded.size() * sizeof(float)), 0);
    }
    compare(u.desc(), 2e-2, "llama Q8_0, folded runs kept apart");
    // A decoder embedder's head gathers its rows, then normalises them: that run, folded and kept apart.
    SyntheticSpec e = s;
    e.pooling_type = 3;
    TempFile efile(synthetic_model_gguf(e));
    auto emodel = Model::load(efile.path, LoadOptions{});
    ProgramCopy eu = unfolded(emodel->desc(), &n_apart);
    assert_int_equal(n_apart, 2 * s.n_layer + 1);  // each layer's two residual adds, the pooled rows
    for (uint32_t chunk : {40u, 1u}) {
        const std::vector<float> folded = run(*g_vulkan, emodel->desc().c, tokens, chunk);
        const std::vector<float> apart = run(*g_vulkan, eu.desc(), tokens, chunk);
        assert_int_equal(std::memcmp(folded.data(), apart.data(), folded.size() * sizeof(float)), 0);
    }
}

void test_norms_without_weights(void **) {
    SyntheticSpec s;
    s.arch = "qwen3", s.qk_norm = true;
    TempFile file(synthetic_model_gguf(s));
    auto model = Model::load(file.path, LoadOptions{});
    ProgramCopy p(model->desc());
    uint32_t n_norms = 0;
    for (ember_graph_node &n : p.nodes)
        if (n.op == EMBER_GRAPH_RMS_NORM) n.w = -1, ++n_norms;
    assert_int_equal(n_norms, 4 * s.n_layer + 1);
    compare(p.desc(), 1e-3, "qwen3 F32, every norm without its weight");
}

// model_load refuses, with EMBER_ERR_UNSUPPORTED and a message naming what it cannot run.
void expect_refused(const ember_mod_model_desc &d, const char *named) {
    try {
        g_vulkan->load_model(d);
        fail_msg("the module loaded a program it cannot run (%s)", named);
    } catch (const Error &e) {
        std::printf("refused: %s\n", e.what());
        assert_int_equal(e.status(), EMBER_ERR_UNSUPPORTED);
        assert_non_null(std::strstr(e.what(), named));
    }
}

void test_unsupported_refused_at_load(void **) {
    TempFile file(synthetic_model_gguf(SyntheticSpec{}));
    auto model = Model::load(file.path, LoadOptions{});
    ProgramCopy op(model->desc());
    op.nodes[3].op = 42;
    expect_refused(op.desc(), "op 42");
    ProgramCopy rope(model->desc());
    auto it = std::find_if(rope.nodes.begin(), rope.nodes.end(), [](const ember_graph_node &n) { return n.op == EMBER_GRAPH_ROPE; });
    assert_true(it != rope.nodes.end());
    it->rope_mode = 1;  // a mode graph.h does not define
    expect_refused(rope.desc(), "rope mode 1");
    // An expert activation graph.h does not define: refused naming the op and the option.
    TempFile moe_file(synthetic_model_gguf(synthetic_family("qwen3moe")));
    auto moe_model = Model::load(moe_file.path, LoadOptions{});
    ProgramCopy moe(moe_model->desc());
    auto m = std::find_if(moe.nodes.begin(), moe.nodes.end(), [](const ember_graph_node &n) { return n.op == EMBER_GRAPH_MOE; });
    assert_true(m != moe.nodes.end());
    m->moe_act = 7;
    expect_refused(moe.desc(), "moe (node");
    expect_refused(moe.desc(), "activation 7");
}

// A hybrid model's program built here, in the shape of src/model/arch_qwen35.cpp and arch_qwen3next.cpp
// (for the families' synthetic GGUFs, see test_families): layers 0 and 2 Gated DeltaNet layers (the
// first Qwen3.5's, with its own a and b products and key heads tiled; the other Qwen3-Next's first
// layout, q, k, v and z from one product interleaved per key head and a and b from another, gathered by
// copy_cols into columns of their buffers, and each key head's value heads adjacent), layer 1 a gated
// attention layer (query and gate interleaved per head in one product, per-head q/k norms, NEOX rope,
// sigmoid gate). Only layer 1 keeps K/V rows. F32 weights, uniform in +-1/sqrt(n_in).
struct HybridProgram {
    static constexpr uint32_t d = 64, n_vocab = 64, Hk = 2, Hv = 4, S = 16, K = 4, n_head = 4, n_head_kv = 2, hd = 16;
    static constexpr uint32_t conv = (2 * Hk + Hv) * S, value = Hv * S, nq = n_head * hd, nkv = n_head_kv * hd;
    std::deque<std::vector<float>> data;
    std::vector<ember_mod_tensor> tensors;
    std::vector<ember_graph_buf> bufs;
    std::vector<ember_graph_node> nodes;
    ember_mod_model_desc c{};
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int32_t layer = -1;

    float uniform(float lo, float hi) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        return lo + (hi - lo) * static_cast<float>((rng >> 40) & 0xffffff) / 16777216.0f;
    }
    int32_t tensor(uint32_t ne0, uint32_t ne1, float lo, float hi) {
        std::vector<float> &v = data.emplace_back(size_t{ne0} * ne1);
        for (float &x : v) x = uniform(lo, hi);
        ember_mod_tensor t{};
        t.type = static_cast<uint32_t>(DType::F32), t.n_dims = ne1 > 1 ? 2 : 1, t.ne[0] = ne0, t.ne[1] = ne1;
        t.ne[2] = t.ne[3] = 1, t.data = v.data(), t.n_bytes = v.size() * sizeof(float), t.name = "hybrid";
        tensors.push_back(t);
        return static_cast<int32_t>(tensors.size() - 1);
    }
    int32_t matrix(uint32_t n_in, uint32_t n_out) {
        const float r = 1.0f / std::sqrt(static_cast<float>(n_in));
        return tensor(n_in, n_out, -r, r);
    }
    int32_t buf(uint32_t width, uint32_t rows = EMBER_GRAPH_ROWS_TOKENS) {
        bufs.push_back({width, rows});
        return static_cast<int32_t>(bufs.size() - 1);
    }
    ember_graph_node &node(uint32_t op, int32_t dst, int32_t src = -1, int32_t w = -1) {
        ember_graph_node n{};
        n.op = op, n.layer = layer, n.dst = dst, n.src = src, n.w = w;
        n.src2 = n.src3 = n.b = n.w2 = n.w3 = n.b2 = n.b3 = -1;
        nodes.push_back(n);
        return nodes.back();
    }
    void norm(int32_t dst, int32_t src, uint32_t n) { node(EMBER_GRAPH_RMS_NORM, dst, src, tensor(n, 1, 0.8f, 1.2f)).n = n, nodes.back().eps = 1e-6f; }
    uint32_t state_floats = 0;
    void stateful(ember_graph_node &n, uint32_t floats) {
        n.state_offset = state_floats, n.state_size = floats;
        state_floats += floats;
    }

    void delta_layer(int32_t xn, int32_t out, bool next) {
        const int32_t m = buf(conv), z = buf(value), a = buf(Hv), b = buf(Hv), cv = buf(conv), o = buf(value);
        if (next) {
            // Qwen3-Next's first layout: one product of q, k, v and z interleaved per key head, gathered
            // into the convolution's input (q, k and v each from its own column of m) and z.
            const uint32_t per = Hv / Hk * S, group = 2 * S + 2 * per;
            const int32_t mixed = buf(Hk * group);
            node(EMBER_GRAPH_MATMUL, mixed, xn, matrix(d, Hk * group));
            const uint32_t parts[4][4] = {{0, S, 0, 0}, {S, S, Hk * S, 0}, {2 * S, per, 2 * Hk * S, 0}, {2 * S + per, per, 0, 1}};
            for (const auto &[from, width, to, into_z] : parts) {
                ember_graph_node &cc = node(EMBER_GRAPH_COPY_COLS, into_z ? z : m, mixed);
                cc.n_head = Hk, cc.n = from, cc.head_dim = width, cc.n_rot = to;
            }
        } else {
            node(EMBER_GRAPH_MATMUL, m, xn, matrix(d, conv));
            node(EMBER_GRAPH_MATMUL, z, xn, matrix(d, value));
        }
        if (next) {
            const int32_t ba = buf(2 * Hv);
            node(EMBER_GRAPH_MATMUL, ba, xn, matrix(d, 2 * Hv));
            ember_graph_node &nb = node(EMBER_GRAPH_COPY_COLS, b, ba);
            nb.n_head = Hk, nb.head_dim = Hv / Hk, nb.n = 0;
            ember_graph_node &na = node(EMBER_GRAPH_COPY_COLS, a, ba);
            na.n_head = Hk, na.head_dim = Hv / Hk, na.n = Hv / Hk;
        } else {
            node(EMBER_GRAPH_MATMUL, b, xn, matrix(d, Hv));
            node(EMBER_GRAPH_MATMUL, a, xn, matrix(d, Hv));
        }
        stateful(node(EMBER_GRAPH_SSM_CONV, cv, m, tensor(K, conv, -0.6f, 0.6f)), (K - 1) * conv);
        const int32_t dt = tensor(Hv, 1, -1, 1), decay = tensor(Hv, 1, -2, -0.1f);
        ember_graph_node &g = node(EMBER_GRAPH_GATED_DELTA, o, cv, dt);
        g.src2 = a, g.src3 = b, g.w2 = decay, g.n_head = Hv, g.n_head_kv = Hk, g.head_dim = S, g.eps = 1e-6f;
        g.scale = 1.0f / std::sqrt(static_cast<float>(S)), g.n = next ? 1 : 0;
        stateful(g, Hv * S * S);
        norm(o, o, S);
        node(EMBER_GRAPH_SWIGLU, o, z).src2 = o;
        node(EMBER_GRAPH_MATMUL, out, o, matrix(value, d));
    }
    void attention_layer(int32_t xn, int32_t out) {
        const int32_t qg = buf(2 * nq), q = buf(nq), gate = buf(nq), k = buf(nkv), v = buf(nkv), attn = buf(nq);
        node(EMBER_GRAPH_MATMUL, qg, xn, matrix(d, 2 * nq));
        node(EMBER_GRAPH_MATMUL, k, xn, matrix(d, nkv));
        node(EMBER_GRAPH_MATMUL, v, xn, matrix(d, nkv));
        ember_graph_node &cq = node(EMBER_GRAPH_COPY_COLS, q, qg);
        cq.n_head = n_head, cq.head_dim = hd, cq.n = 0;
        ember_graph_node &cg = node(EMBER_GRAPH_COPY_COLS, gate, qg);
        cg.n_head = n_head, cg.head_dim = hd, cg.n = hd;
        norm(q, q, hd);
        norm(k, k, hd);
        for (auto [b, h] : {std::pair{q, n_head}, std::pair{k, n_head_kv}}) {
            ember_graph_node &r = node(EMBER_GRAPH_ROPE, b);
            r.n_head = h, r.head_dim = hd, r.n_rot = hd / 2, r.rope_mode = EMBER_GRAPH_ROPE_NEOX;
            r.rope_theta = 10000.0f, r.rope_freq_scale = 1.0f;
        }
        node(EMBER_GRAPH_KV_STORE, -1, k).src2 = v;
        ember_graph_node &at = node(EMBER_GRAPH_ATTENTION, attn, q);
        at.n_head = n_head, at.n_head_kv = n_head_kv, at.head_dim = hd, at.scale = 1.0f / std::sqrt(static_cast<float>(hd));
        node(EMBER_GRAPH_SIGMOID_MUL, attn, attn).src2 = gate;
        node(EMBER_GRAPH_MATMUL, out, attn, matrix(nq, d));
    }

    HybridProgram() {
        const int32_t x = buf(d), xn = buf(d), out = buf(d), xl = buf(d, EMBER_GRAPH_ROWS_LOGITS);
        const int32_t logits = buf(n_vocab, EMBER_GRAPH_ROWS_LOGITS);
        node(EMBER_GRAPH_GET_ROWS, x, -1, tensor(d, n_vocab, -1, 1));
        for (layer = 0; layer < 3; ++layer) {
            norm(xn, x, d);
            if (layer == 1) attention_layer(xn, out);
            else delta_layer(xn, out, layer == 2);
            node(EMBER_GRAPH_ADD, x, out);
        }
        node(EMBER_GRAPH_GATHER_LOGITS, xl, x);
        norm(xl, xl, d);
        node(EMBER_GRAPH_MATMUL, logits, xl, matrix(d, n_vocab));
        c.struct_size = sizeof c, c.n_vocab = n_vocab, c.n_layer = 3, c.kv_width = nkv, c.head_dim = hd;
        c.n_tensors = static_cast<uint32_t>(tensors.size()), c.tensors = tensors.data();
        c.n_bufs = static_cast<uint32_t>(bufs.size()), c.bufs = bufs.data();
        c.node_size = sizeof(ember_graph_node), c.n_nodes = static_cast<uint32_t>(nodes.size()), c.nodes = nodes.data();
        c.logits_buf = logits, c.state_floats = state_floats;
    }
};

// The hybrid program on both backends: one sequence in one pass and token by token (the recurrent layers'
// states carried across passes in their slot).
void test_hybrid_program(void **) {
    HybridProgram h;
    assert_int_equal(n_kv_layers(h.c), 1);
    compare(h.c, 1e-3, "hybrid (delta, attention, delta-next) F32");
}

// Several sequences in one pass, a sequence going on from another's state (a fork), and the states and K/V
// rows moving between the backends: the CPU's context computes a prefix, its rows and state are written
// into the Vulkan context, and both go on; each pass's logits compared within the forward bound.
void test_hybrid_sequences_and_saved_state(void **) {
    HybridProgram h;
    Backend &cpu = *backend_find(EMBER_BACKEND_CPU);
    ContextParams cp;
    cp.n_blocks = 8, cp.block_size = 16, cp.n_batch = 32, cp.n_logits = 32, cp.n_threads = 2, cp.n_state_slots = 4;
    auto cm = cpu.load_model(h.c), vm = g_vulkan->load_model(h.c);
    auto cc = cm->create_context(cp), vc = vm->create_context(cp);
    const std::vector<int32_t> tab_a = {0, 1}, tab_b = {2, 3}, tab_c = {4, 5};
    struct Tok { int32_t token, pos, slot, src; const int32_t *table; };
    auto pass = [&](const std::vector<Tok> &toks, const char *what) {
        const uint32_t n = static_cast<uint32_t>(toks.size());
        std::vector<int32_t> tokens, pos, slots, src, rows;
        std::vector<const int32_t *> tabs;
        for (uint32_t i = 0; i < n; ++i) {
            tokens.push_back(toks[i].token), pos.push_back(toks[i].pos), slots.push_back(toks[i].slot);
            src.push_back(toks[i].src), tabs.push_back(toks[i].table), rows.push_back(static_cast<int32_t>(i));
        }
        std::vector<float> lc(size_t{n} * h.n_vocab), lv(lc.size());
        for (auto [ctx, out] : {std::pair{cc.get(), &lc}, std::pair{vc.get(), &lv}}) {
            Batch bt;
            bt.n_tokens = n, bt.tokens = tokens.data(), bt.pos = pos.data(), bt.tables = tabs.data();
            bt.n_logits = n, bt.logits_rows = rows.data(), bt.logits = out->data();
            bt.state_slots = slots.data(), bt.state_src = src.data();
            ctx->forward(bt);
        }
        double scale = 0, diff = 0;
        for (size_t i = 0; i < lc.size(); ++i)
            scale = std::max(scale, std::fabs(double(lc[i]))), diff = std::max(diff, std::fabs(double(lv[i]) - lc[i]));
        std::printf("%-44s max|logit| %.3f, max diff %.2e\n", what, scale, diff);
        assert_true(scale > 0.1 && diff <= 2e-3 * std::max(1.0, scale));
    };
    // Sequences A (slot 0) and B (slot 1) from the zero state, 12 and 9 tokens, in one pass.
    std::vector<Tok> first;
    for (int32_t p = 0; p < 12; ++p) first.push_back({(p * 5 + 1) % 64, p, 0, -1, tab_a.data()});
    for (int32_t p = 0; p < 9; ++p) first.push_back({(p * 11 + 7) % 64, p, 1, -1, tab_b.data()});
    pass(first, "hybrid: two new sequences in one pass");
    // C forks A at its 12 tokens (state slot 0 read, slot 2 written; its K/V rows copied block by block)
    // while B goes on in place; then A and C go on (a pass may not write the slot a fork reads).
    for (BackendContext *ctx : {cc.get(), vc.get()}) ctx->copy_block(0, 4);
    pass({{9, 12, 2, 0, tab_c.data()}, {4, 13, 2, 2, tab_c.data()}, {8, 9, 1, 1, tab_b.data()}},
         "hybrid: a fork beside a sequence going on");
    pass({{3, 12, 0, 0, tab_a.data()}, {17, 14, 2, 2, tab_c.data()}}, "hybrid: the fork and its source going on");

    // Saved state: B's K/V rows and recurrent state read from the CPU and written into the Vulkan context
    // at slot 3 and blocks 6, 7; both go on from there. The K/V bytes are one layer's rows (the recurrent
    // layers keep none): exactly n_tokens * kv_bytes_per_token, checked against a guard.
    const uint32_t n_b = 10;
    const size_t kv = n_b * cc->kv_bytes_per_token();
    assert_int_equal(kv, n_b * vc->kv_bytes_per_token());
    assert_int_equal(kv, size_t{n_b} * 2 * h.nkv * 2);   // F16 K and V rows of the one attention layer
    std::vector<uint8_t> rows(kv + 64, 0xab);
    vc->read_kv(tab_b.data(), n_b, rows.data());
    for (size_t i = kv; i < rows.size(); ++i) assert_int_equal(rows[i], 0xab);
    cc->read_kv(tab_b.data(), n_b, rows.data());
    std::vector<float> state(h.c.state_floats), vstate(state.size());
    cc->read_state(1, state.data());
    vc->read_state(1, vstate.data());
    double smax = 0, sdiff = 0;
    for (size_t i = 0; i < state.size(); ++i)
        smax = std::max(smax, std::fabs(double(state[i]))), sdiff = std::max(sdiff, std::fabs(double(vstate[i]) - state[i]));
    std::printf("hybrid: B's state, max|s| %.3f, max diff %.2e\n", smax, sdiff);
    assert_true(smax > 0.01 && sdiff <= 2e-3 * std::max(1.0, smax));
    const std::vector<int32_t> tab_d = {6, 7};
    for (BackendContext *ctx : {cc.get(), vc.get()}) {
        ctx->write_kv(tab_d.data(), n_b, rows.data());
        ctx->write_state(3, state.data());
    }
    std::vector<float> back(state.size());
    vc->read_state(3, back.data());
    assert_int_equal(std::memcmp(back.data(), state.data(), state.size() * sizeof(float)), 0);
    pass({{21, 10, 3, 3, tab_d.data()}, {22, 11, 3, 3, tab_d.data()}}, "hybrid: going on from a saved state");
    // copy_state: slot 3 into 0, read back the same.
    vc->copy_state(3, 0);
    vc->read_state(0, back.data());
    std::vector<float> s3(state.size());
    vc->read_state(3, s3.data());
    assert_int_equal(std::memcmp(back.data(), s3.data(), s3.size() * sizeof(float)), 0);
}

// The batches a context refuses: a model with state and no slots, slots out of range, a sequence's tokens
// split or out of order, a run reading a slot the same pass writes.
void test_hybrid_bad_batches(void **) {
    HybridProgram h;
    auto vm = g_vulkan->load_model(h.c);
    ContextParams cp;
    cp.n_blocks = 4, cp.n_batch = 8, cp.n_logits = 8;
    try {
        vm->create_context(cp);
        fail_msg("a context without state slots for a model with recurrent layers");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
    }
    cp.n_state_slots = 2;
    auto ctx = vm->create_context(cp);
    const std::vector<int32_t> table = {0, 1};
    auto refused = [&](std::vector<int32_t> slots, std::vector<int32_t> src, std::vector<int32_t> pos, const char *named) {
        const uint32_t n = static_cast<uint32_t>(slots.size());
        std::vector<int32_t> tokens(n, 3), rows(n, 0);
        std::vector<const int32_t *> tabs(n, table.data());
        std::vector<float> logits(h.n_vocab);
        Batch bt;
        bt.n_tokens = n, bt.tokens = tokens.data(), bt.pos = pos.data(), bt.tables = tabs.data();
        bt.n_logits = 1, bt.logits_rows = rows.data(), bt.logits = logits.data();
        bt.state_slots = slots.data(), bt.state_src = src.data();
        try {
            ctx->forward(bt);
            fail_msg("a bad batch ran (%s)", named);
        } catch (const Error &e) {
            std::printf("refused: %s\n", e.what());
            assert_non_null(std::strstr(e.what(), named));
        }
    };
    refused({2}, {-1}, {0}, "state slot 2 of 2");
    refused({0}, {5}, {0}, "state slot 5 of 2");
    refused({0, 1, 0}, {-1, -1, -1}, {0, 0, 1}, "not consecutive");
    refused({0, 0}, {-1, -1}, {0, 2}, "out of order");
    refused({0, 1}, {-1, 0}, {0, 0}, "reads a state slot the same pass writes");
}

void test_cancel_between_chunks(void **) {
    SyntheticSpec s;
    TempFile file(synthetic_model_gguf(s));
    auto model = Model::load(file.path, LoadOptions{});
    ContextParams cp;
    cp.n_blocks = 8, cp.n_batch = 64, cp.n_logits = 1;
    auto bm = g_vulkan->load_model(model->desc().c);
    auto ctx = bm->create_context(cp);
    std::vector<int32_t> tokens(40, 5), pos(40), table = {0, 1, 2, 3};
    for (int i = 0; i < 40; ++i) pos[i] = i;
    std::vector<const int32_t *> tabs(40, table.data());
    std::vector<float> logits(model->desc().hp.n_vocab);
    const int32_t last = 39;
    std::atomic<bool> cancel{true};
    Batch bt;
    bt.n_tokens = 40, bt.tokens = tokens.data(), bt.pos = pos.data(), bt.tables = tabs.data();
    bt.n_logits = 1, bt.logits_rows = &last, bt.logits = logits.data(), bt.cancel = &cancel;
    try {
        ctx->forward(bt);
        fail_msg("the cancelled pass completed");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_CANCELLED);
    }
    cancel = false;
    ctx->forward(bt);  // and with the flag clear the same pass runs through its chunks
    assert_true(std::isfinite(logits[0]));
}

} // namespace

int main() {
    std::string why;
    const LoadedModule *mod = backend_module_load("vulkan", &why);
    std::unique_ptr<Backend> vk;
    if (mod) {
        vk = module_backend_create(*mod);
        if (vk->score() <= 0) why = module_unavailable_reason(*vk);
    }
    if (!vk || vk->score() <= 0) {
        std::printf("SKIP: no Vulkan backend: %s\n", why.c_str());
        return EMBER_TEST_SKIP;
    }
    g_vulkan = vk.get();
    const CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_f32_gqa_rope_freqs), cmocka_unit_test(test_qwen2_f16_biases_neox_untied),
        cmocka_unit_test(test_llama_q4_k_m),             cmocka_unit_test(test_llama_q8_0_q4_0),
        cmocka_unit_test(test_qwen3_per_head_norm_head_dim), cmocka_unit_test(test_unfolded_program_same_logits),
        cmocka_unit_test(test_norms_without_weights),      cmocka_unit_test(test_unsupported_refused_at_load),
        cmocka_unit_test(test_cancel_between_chunks),       cmocka_unit_test(test_families),
        cmocka_unit_test(test_hybrid_program),             cmocka_unit_test(test_hybrid_sequences_and_saved_state),
        cmocka_unit_test(test_hybrid_bad_batches),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
