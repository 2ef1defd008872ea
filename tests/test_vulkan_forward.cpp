// test_vulkan_forward.cpp — the Vulkan module's executor of a model's program against the CPU's on
// synthetic models that exercise what the real test models do not: Q/K/V biases and NEOX rope (qwen2),
// per-head q/k norms and a head size of its own (qwen3), rope frequency factors, GQA, an untied output
// matrix, F16 and K-quant (Q4_K_M mix) weights; a prompt evaluated as one 40-token pass (split-K off)
// and then token by token (split-K on past 64 keys). Programs changed from the builder's: the runs the
// module folds (a product added into the residual, the gathered logits rows normed) kept apart, which
// must give the folded program's logits bit for bit; norms without weights; an op and a rope mode the
// module does not run, refused at load naming them. And cancellation between the command buffers of a
// long pass. Skips (77) without a Vulkan device.
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
#include "testing/synthetic.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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

// Runs n tokens from position 0 on a fresh context, `chunk` tokens per pass, the logits of every token.
std::vector<float> run(Backend &b, const ember_mod_model_desc &d, const std::vector<int32_t> &tokens, uint32_t chunk) {
    ContextParams cp;
    cp.n_blocks = 16, cp.block_size = 16, cp.n_batch = 64, cp.n_logits = 64, cp.n_threads = 2;
    auto bm = b.load_model(d);
    auto ctx = bm->create_context(cp);
    std::vector<int32_t> table = {3, 0, 7, 1, 9, 2, 4, 5, 6, 8, 10, 11, 12, 13, 14, 15};  // scattered blocks
    std::vector<float> logits(tokens.size() * d.n_vocab);
    for (uint32_t t0 = 0; t0 < tokens.size(); t0 += chunk) {
        const uint32_t n = std::min<uint32_t>(chunk, static_cast<uint32_t>(tokens.size()) - t0);
        std::vector<int32_t> pos(n), rows(n);
        std::vector<const int32_t *> tabs(n, table.data());
        for (uint32_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(t0 + i), rows[i] = static_cast<int32_t>(i);
        Batch bt;
        bt.n_tokens = n, bt.tokens = tokens.data() + t0, bt.pos = pos.data(), bt.tables = tabs.data();
        bt.n_logits = n, bt.logits_rows = rows.data(), bt.logits = logits.data() + size_t{t0} * d.n_vocab;
        ctx->forward(bt);
    }
    return logits;
}

std::vector<int32_t> prompt(uint32_t n_vocab) {
    std::vector<int32_t> tokens(80);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + 3) % n_vocab);
    return tokens;
}

// The CPU's logits of the program against the Vulkan module's, in one pass and token by token.
void compare(const ember_mod_model_desc &d, double b, const char *what) {
    const std::vector<int32_t> tokens = prompt(d.n_vocab);
    const std::vector<float> ref = run(*backend_find(EMBER_BACKEND_CPU), d, tokens, 40);
    for (uint32_t chunk : {40u, 1u}) {
        const std::vector<float> got = run(*g_vulkan, d, tokens, chunk);
        double scale = 0, diff = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
            scale = std::max(scale, std::fabs(double(ref[i])));
            diff = std::max(diff, std::fabs(double(got[i]) - ref[i]));
        }
        std::printf("%-44s chunk %2u: max|logit| %.3f, max diff %.2e (bound %.1e)\n", what, chunk, scale, diff,
                    2 * b * std::max(1.0, scale));
        assert_true(scale > 0.1);
        assert_true(diff <= 2 * b * std::max(1.0, scale));
    }
}

void compare(const SyntheticSpec &spec, double b, const char *what) {
    TempFile file(synthetic_model_gguf(spec));
    auto model = Model::load(file.path, LoadOptions{});
    compare(model->desc().c, b, what);
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
// olmo2, mixtral, qwen3moe and gpt-oss (experts routed per pass, sinks, YaRN, clamped SwiGLU, biases): each
// op of graph.h the CPU runs, run by the module's shaders, in F32 weights, Q8_0 and Q4_K (the K layout:
// each expert matrix of a stack packed on its own).
void test_families(void **) {
    for (const std::string &name : synthetic_families()) {
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
    assert_int_equal(n_apart, 2 * s.n_layer + 1);  // each layer's two residual adds, the logits rows
    const std::vector<int32_t> tokens = prompt(s.n_vocab);
    for (uint32_t chunk : {40u, 1u}) {
        const std::vector<float> folded = run(*g_vulkan, model->desc().c, tokens, chunk);
        const std::vector<float> apart = run(*g_vulkan, u.desc(), tokens, chunk);
        assert_int_equal(std::memcmp(folded.data(), apart.data(), folded.size() * sizeof(float)), 0);
    }
    compare(u.desc(), 2e-2, "llama Q8_0, folded runs kept apart");
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
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
