// test_cuda_program.cpp — how the CUDA backend will run a model's program (cuda/program.cpp, plain C++
// compiled into this test), on the CPU: the programs the architectures build (synthetic llama and qwen2
// files) are accepted; the fusions the GPU executor follows blindly are the ones that keep the unfused
// result (a product accumulated into the residual only when its own output is dead; a product shares
// its prepared input only with the product of the same input just before it; the rope angle table is
// recomputed only when the rotation changes); ops and options the backend does not run are
// EMBER_ERR_UNSUPPORTED naming them, broken references EMBER_ERR_INVALID_MODEL; and a context's device
// regions do not overlap. The model families' programs (every synthetic family of docs/model-families.md) are accepted,
// their expert stacks uploaded as stacks, their YaRN ropes given tables of their own. A hybrid program
// (a recurrent layer and an attention layer, built here as Qwen3.5's layers are) is accepted with its state,
// keeps K/V rows for its attention layer only, and its broken state shares and heads are refused. The
// encoders' programs (BERT-, nomic-bert- and EmbeddingGemma-shaped synthetic files) are accepted with their
// bidirectional attention, biased LayerNorms, GELU and position rows; malformed ones are refused; an
// encoder pass's inputs carry each token's sequence's last position and refuse positions past the table;
// the kernels' GELU gives the CPU's bits.
#include "synthetic_model.hpp"
#include "test_util.h"

#include "../cuda/gelu_math.hpp"
#include "../cuda/inputs.hpp"
#include "../cuda/program.hpp"
#include "core/error.hpp"
#include "cpu/kernels.hpp"
#include "model/model.hpp"
#include "testing/synthetic.hpp"
#include "testing/synthetic_bert.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

using namespace ember;

namespace {

// A description whose program is `nodes` instead of the model's.
struct Edited {
    ember_mod_model_desc d;
    std::vector<ember_graph_node> nodes;
    std::vector<ember_mod_tensor> tensors;  // a copy of the description's, once one is edited
    explicit Edited(const Model &m) : d(m.desc().c), nodes(m.desc().nodes) {}
    // Tensor t stored as `type` (GGUF id); returns its name.
    const char *retype(int32_t t, uint32_t type) {
        if (tensors.empty()) tensors.assign(d.tensors, d.tensors + d.n_tensors), d.tensors = tensors.data();
        tensors[size_t(t)].type = type;
        return tensors[size_t(t)].name;
    }
    const ember_mod_model_desc &desc() {
        d.nodes = nodes.data(), d.n_nodes = static_cast<uint32_t>(nodes.size()), d.node_size = sizeof(ember_graph_node);
        return d;
    }
    size_t find(uint32_t op, size_t from = 0) const {
        for (size_t i = from; i < nodes.size(); ++i)
            if (nodes[i].op == op) return i;
        fail_msg("no op %u after node %zu", op, from);
        return 0;
    }
};

void expect_error(const ember_mod_model_desc &d, ember_status status, const char *text) {
    try {
        cu::program_of(d);
        fail_msg("accepted; expected '%s'", text);
    } catch (const Error &e) {
        if (e.status() != status || !std::strstr(e.what(), text))
            fail_msg("status %d '%s'; expected %d '%s'", e.status(), e.what(), status, text);
    }
}

size_t count(const cu::Program &pg, bool cu::NodeRun::*flag) {
    return static_cast<size_t>(std::count_if(pg.how.begin(), pg.how.end(), [&](const cu::NodeRun &h) { return h.*flag; }));
}

// Every fused product is followed by the ADD it replaces; the decoder's per-layer shape gives two of
// each per layer, three shared inputs (K and V after Q, up after gate) and one angle table.
void check_decoder_plan(const cu::Program &pg, uint32_t n_layer) {
    for (size_t i = 0; i < pg.nodes.size(); ++i) {
        const ember_graph_node &n = pg.nodes[i];
        if (pg.how[i].accumulate) {
            assert_int_equal(n.op, EMBER_GRAPH_MATMUL);
            assert_true(pg.how[i + 1].skip);
            assert_int_equal(pg.nodes[i + 1].op, EMBER_GRAPH_ADD);
            assert_int_equal(pg.nodes[i + 1].src, n.dst);
        }
        if (pg.how[i].skip) assert_true(i > 0 && pg.how[i - 1].accumulate);
        if (pg.how[i].share_input) {
            assert_int_equal(pg.nodes[i - 1].op, EMBER_GRAPH_MATMUL);
            assert_int_equal(pg.nodes[i - 1].src, n.src);
        }
    }
    assert_int_equal(count(pg, &cu::NodeRun::accumulate), 2 * n_layer);
    assert_int_equal(count(pg, &cu::NodeRun::skip), 2 * n_layer);
    assert_int_equal(count(pg, &cu::NodeRun::share_input), 3 * n_layer);
    assert_int_equal(count(pg, &cu::NodeRun::new_angles), 1);
}

void test_llama_program(void **) {
    SyntheticSpec s;
    s.n_layer = 3;
    s.rope_freqs = true;  // a factor tensor on every rope
    auto m = load_synthetic(s);
    const cu::Program pg = cu::program_of(m->desc().c);
    check_decoder_plan(pg, s.n_layer);
    // Tied output: the vocabulary product reads the embedding's index, a matrix uploaded once.
    const ember_graph_node &get_rows = pg.nodes.front(), &out = pg.nodes.back();
    assert_int_equal(get_rows.op, EMBER_GRAPH_GET_ROWS);
    assert_int_equal(out.op, EMBER_GRAPH_MATMUL);
    assert_int_equal(out.w, get_rows.w);
    assert_int_equal(pg.tensor_use[size_t(out.w)], cu::Program::kMatrix);
    // The output's product reads the gathered rows' norm: not fused, not shared.
    assert_false(pg.how.back().accumulate || pg.how.back().share_input);
    assert_int_equal(pg.max_rot, m->desc().hp.head_dim);
}

void test_qwen2_program(void **) {
    SyntheticSpec s;
    s.arch = "qwen2";
    s.qkv_bias = true;
    s.tied_output = false;
    s.rope_theta = 1e6f;
    auto m = load_synthetic(s);
    const cu::Program pg = cu::program_of(m->desc().c);
    check_decoder_plan(pg, s.n_layer);
    size_t biased = 0;
    for (const ember_graph_node &n : pg.nodes)
        if (n.op == EMBER_GRAPH_MATMUL && n.b >= 0) {
            ++biased;
            assert_int_equal(pg.tensor_use[size_t(n.b)], cu::Program::kVector);
        }
    assert_int_equal(biased, 3 * s.n_layer);
}

// The programs of the shipped models (llama2.c stories, F32 and Q8_0) are accepted as they are.
void test_real_models(void **) {
    TEST_REQUIRE_MODEL(small, "stories260K.gguf", "stories260K/stories260K.gguf")
    TEST_REQUIRE_MODEL(q8, "stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf")
    for (const char *path : {small, q8}) {
        auto m = Model::load(path, LoadOptions{});
        const cu::Program pg = cu::program_of(m->desc().c);
        check_decoder_plan(pg, m->desc().hp.n_layer);
    }
}

// Edits of the llama program: what stops a fusion, what a per-head norm without weight does, what a
// changed rotation does.
void test_fusion_limits(void **) {
    SyntheticSpec s;
    auto m = load_synthetic(s);
    {
        // The first fused pair's product read again after its ADD: no longer dead, so not fused.
        Edited e(*m);
        const size_t add = e.find(EMBER_GRAPH_ADD);
        const ember_graph_node again = e.nodes[add];  // x += tmp once more
        e.nodes.insert(e.nodes.begin() + static_cast<long>(add) + 1, again);
        const cu::Program pg = cu::program_of(e.desc());
        assert_false(pg.how[add - 1].accumulate);
        assert_false(pg.how[add].skip);
        assert_false(pg.how[add + 1].skip);  // the inserted ADD has no product before it
    }
    {
        // The residual is the product's own input: not fused (the kernels read it while writing).
        Edited e(*m);
        const size_t add = e.find(EMBER_GRAPH_ADD);
        e.nodes[add].dst = e.nodes[add - 1].src;
        const cu::Program pg = cu::program_of(e.desc());
        assert_false(pg.how[add - 1].accumulate);
    }
    {
        // A per-head norm of q and k in place and without a weight, after the Q/K/V products (where
        // qwen3 has its weighted one): accepted, and the products before it still share their input.
        Edited e(*m);
        const size_t v = e.find(EMBER_GRAPH_MATMUL, e.find(EMBER_GRAPH_MATMUL, e.find(EMBER_GRAPH_MATMUL) + 1) + 1);
        const uint32_t hd = m->desc().hp.head_dim;
        ember_graph_node qn = e.nodes[e.find(EMBER_GRAPH_RMS_NORM)];
        qn.dst = qn.src = e.nodes[v - 2].dst, qn.w = -1, qn.n = hd;
        ember_graph_node kn = qn;
        kn.dst = kn.src = e.nodes[v - 1].dst;
        e.nodes.insert(e.nodes.begin() + static_cast<long>(v) + 1, {qn, kn});
        const cu::Program pg = cu::program_of(e.desc());
        assert_int_equal(pg.nodes[v + 1].op, EMBER_GRAPH_RMS_NORM);
        assert_true(pg.how[v - 1].share_input && pg.how[v].share_input);
        // Groups that do not divide the row.
        e.nodes[v + 1].n = hd + 1;
        expect_error(e.desc(), EMBER_ERR_INVALID_MODEL, "rms_norm");
    }
    {
        // K's rope of layer 0 with another base: its table is new, and so is the next rope's.
        Edited e(*m);
        const size_t q = e.find(EMBER_GRAPH_ROPE), k = e.find(EMBER_GRAPH_ROPE, q + 1);
        const size_t q1 = e.find(EMBER_GRAPH_ROPE, k + 1), k1 = e.find(EMBER_GRAPH_ROPE, q1 + 1);
        e.nodes[k].rope_theta *= 2;
        const cu::Program pg = cu::program_of(e.desc());
        assert_true(pg.how[q].new_angles && pg.how[k].new_angles && pg.how[q1].new_angles);
        assert_false(pg.how[k1].new_angles);
    }
}

void test_refusals(void **) {
    SyntheticSpec s;
    auto m = load_synthetic(s);
    {
        Edited e(*m);
        e.nodes[3].op = 42;
        expect_error(e.desc(), EMBER_ERR_UNSUPPORTED, "op 42 (node 3)");
    }
    {
        Edited e(*m);
        e.nodes[e.find(EMBER_GRAPH_ROPE)].rope_mode = 1;
        expect_error(e.desc(), EMBER_ERR_UNSUPPORTED, "rope mode 1");
    }
    {
        Edited e(*m);
        e.nodes[e.find(EMBER_GRAPH_ATTENTION)].head_dim = 512;
        expect_error(e.desc(), EMBER_ERR_UNSUPPORTED, "head_dim 512");
    }
    {
        Edited e(*m);
        const size_t mm = e.find(EMBER_GRAPH_MATMUL);
        e.nodes[mm].dst = e.nodes[mm].src;
        expect_error(e.desc(), EMBER_ERR_INVALID_MODEL, "matmul");
        e.nodes[mm].dst = 1000;
        expect_error(e.desc(), EMBER_ERR_INVALID_MODEL, "buffer out of range");
    }
    {
        Edited e(*m);
        e.nodes[e.find(EMBER_GRAPH_KV_STORE)].layer = static_cast<int32_t>(s.n_layer);
        expect_error(e.desc(), EMBER_ERR_INVALID_MODEL, "kv_store");
    }
    {
        Edited e(*m);
        e.desc();
        e.d.node_size = sizeof(ember_graph_node) - 4;
        expect_error(e.d, EMBER_ERR_UNSUPPORTED, "older layout");
    }
    {
        // A norm weight stored as F16: refused at load, naming the tensor.
        Edited e(*m);
        const char *name = e.retype(e.nodes[e.find(EMBER_GRAPH_RMS_NORM)].w, 1);
        expect_error(e.desc(), EMBER_ERR_UNSUPPORTED, name);
    }
}

// Every family's program (every op of graph.h among them) is accepted; MOE's expert stacks are read as
// stacks (uploaded one expert matrix at a time), their biases and attention sinks as vectors; a rope of
// another kind than the one before it (ROPE_YARN after ROPE, as gemma3's or gpt-oss's layers alternate
// bases and kinds) gets its own angles.
void test_family_programs(void **) {
    int moe = 0, yarn = 0, ext = 0, hybrid = 0;
    for (const std::string &family : synthetic_families()) {
        std::unique_ptr<Model> m;
        try {
            m = load_synthetic(synthetic_family(family));
        } catch (const Error &e) {  // a layout the core's loader does not read (yet): not this backend's to check
            if (e.status() != EMBER_ERR_UNSUPPORTED) throw;
            std::printf("%s: not loaded (%s)\n", family.c_str(), e.what());
            continue;
        }
        const cu::Program pg = cu::program_of(m->desc().c);
        // A hybrid family: state for its recurrent layers, K/V rows for its attention layers only.
        if (pg.state_floats > 0) {
            ++hybrid;
            size_t kv_layers = 0;
            for (bool b : pg.has_kv) kv_layers += b;
            assert_true(kv_layers > 0 && kv_layers < pg.n_layer);
            for (const ember_graph_node &n : pg.nodes)
                if (n.op == EMBER_GRAPH_GATED_DELTA || n.op == EMBER_GRAPH_SSM_CONV) assert_false(pg.has_kv[size_t(n.layer)]);
        }
        const ember_graph_node *prev_rope = nullptr;
        for (size_t i = 0; i < pg.nodes.size(); ++i) {
            const ember_graph_node &n = pg.nodes[i];
            if (n.op == EMBER_GRAPH_MOE) {
                ++moe;
                for (int32_t t : {n.w, n.w2, n.w3}) assert_int_equal(pg.tensor_use[size_t(t)], cu::Program::kExperts);
                for (int32_t t : {n.b, n.b2, n.b3})
                    if (t >= 0) assert_int_equal(pg.tensor_use[size_t(t)], cu::Program::kVector);
                assert_true(pg.has_moe() && pg.moe_used >= n.n_expert_used && pg.moe_out >= pg.width(n.dst));
                const ember_mod_tensor &g = m->desc().c.tensors[n.w];
                const ember_mod_tensor last = cu::expert_matrix(g, n.n_expert - 1);
                assert_int_equal(last.n_dims, 2);
                assert_ptr_equal(static_cast<const uint8_t *>(last.data) + last.n_bytes,
                                 static_cast<const uint8_t *>(g.data) + g.n_bytes);  // the stack's last matrix ends it
            }
            if (n.op == EMBER_GRAPH_ATTENTION_EXT && n.w >= 0) {
                ++ext;
                assert_int_equal(pg.tensor_use[size_t(n.w)], cu::Program::kVector);
            }
            if (n.op == EMBER_GRAPH_ROPE || n.op == EMBER_GRAPH_ROPE_YARN) {
                yarn += n.op == EMBER_GRAPH_ROPE_YARN;
                if (prev_rope && prev_rope->op != n.op) assert_true(pg.how[i].new_angles);
                prev_rope = &n;
            }
        }
    }
    assert_true(moe > 0 && yarn > 0 && ext > 0);  // mixtral/qwen3moe/gpt-oss, phi3/gpt-oss, gpt-oss's sinks
    assert_true(hybrid >= 2);                      // qwen35, qwen35moe
}

// What the families' ops refuse: an activation or gating graph.h does not define (UNSUPPORTED, named),
// a cap that is not positive and experts of the wrong shape (INVALID_MODEL).
void test_family_refusals(void **) {
    auto m = load_synthetic(synthetic_family("qwen3moe"));
    {
        Edited e(*m);
        e.nodes[e.find(EMBER_GRAPH_MOE)].moe_act = 7;
        expect_error(e.desc(), EMBER_ERR_UNSUPPORTED, "activation 7");
    }
    {
        Edited e(*m);
        const size_t i = e.find(EMBER_GRAPH_MOE);
        ember_graph_node &n = e.nodes[i];
        n.w = e.nodes[i - 1].w;  // the router's matrix (the product just before) as the gate experts: 2-D
        assert_int_equal(e.nodes[i - 1].dst, n.src2);
        expect_error(e.desc(), EMBER_ERR_INVALID_MODEL, "experts of the wrong shape");
    }
    {
        Edited e(*m);
        e.nodes[e.find(EMBER_GRAPH_MOE)].n_expert_used = 0;
        expect_error(e.desc(), EMBER_ERR_INVALID_MODEL, "chosen experts");
    }
    auto g = load_synthetic(synthetic_family("gemma2"));
    {
        Edited e(*g);
        e.nodes[e.find(EMBER_GRAPH_SOFTCAP)].softcap = 0;
        expect_error(e.desc(), EMBER_ERR_INVALID_MODEL, "softcap");
    }
}

// A context's regions: the program's buffers (logits rows for the output's) and the scratch, in order,
// none overlapping; a cache type the kernels do not write is refused.
void test_context_sizes(void **) {
    SyntheticSpec s = synthetic_family("qwen3moe");  // llama's regions plus MOE's
    auto m = load_synthetic(s);
    const cu::Program pg = cu::program_of(m->desc().c);
    ember_mod_context_params p{};
    p.struct_size = sizeof p;
    p.n_blocks = 8, p.block_size = 16, p.n_batch = 32, p.n_logits = 4, p.kv_type = 8;
    const cu::ContextSizes z = cu::context_sizes(pg, p);
    assert_int_equal(z.kv_row_bytes, m->desc().hp.n_embd_kv() / 32 * 34);
    assert_int_equal(z.kv_bytes, 2 * z.kv_cache_bytes);
    for (uint32_t il = 0; il < s.n_layer; ++il) {   // no window pool: every layer's cache the same size
        assert_false(z.windowed[il]);
        assert_int_equal(z.kv_layer_off[il], il * (z.kv_cache_bytes / s.n_layer));
    }
    std::vector<std::pair<size_t, size_t>> regions;  // (offset, bytes)
    for (size_t b = 0; b < pg.bufs.size(); ++b)
        regions.push_back({z.buf_offset[b], size_t{pg.bufs[b].rows == EMBER_GRAPH_ROWS_LOGITS ? p.n_logits : p.n_batch} *
                                                 pg.bufs[b].width * sizeof(float)});
    assert_int_equal(regions[size_t(pg.logits_buf)].second, size_t{p.n_logits} * s.n_vocab * sizeof(float));
    assert_int_equal(z.io_words, 4 * z.rows + p.n_logits);
    regions.push_back({z.io, z.io_words * sizeof(int32_t)});
    regions.push_back({z.partials, z.partial_rows * (pg.max_head_dim + 2) * sizeof(float)});
    assert_true(pg.has_moe());
    assert_int_equal(z.moe_slots, size_t{z.rows} * pg.moe_used);
    regions.push_back({z.moe_xin, z.rows * pg.moe_in * sizeof(float)});
    regions.push_back({z.moe_g, z.rows * pg.moe_ff * sizeof(float)});
    regions.push_back({z.moe_u, z.rows * pg.moe_ff * sizeof(float)});
    regions.push_back({z.moe_outs, z.moe_slots * pg.moe_out * sizeof(float)});
    for (size_t list : {z.moe_token, z.moe_pos, z.moe_gate}) regions.push_back({list, z.moe_slots * 4});
    // The products' prepared inputs hold an expert's every row (up to all of the pass's) of n_in or n_ff.
    assert_true(z.act_scales - z.act_codes >= z.rows * std::max(pg.moe_in, pg.moe_ff));
    std::sort(regions.begin(), regions.end());
    for (size_t i = 0; i + 1 < regions.size(); ++i) assert_true(regions[i].first + regions[i].second <= regions[i + 1].first);
    assert_true(regions.back().first + regions.back().second <= z.total);
    assert_true(z.bytes() > z.total + z.kv_bytes);
    // Q4_0 rows: 18 bytes a block of 32, the same regions otherwise.
    p.kv_type = 2;
    const cu::ContextSizes z4 = cu::context_sizes(pg, p);
    assert_int_equal(z4.kv_row_bytes, m->desc().hp.n_embd_kv() / 32 * 18);
    assert_int_equal(z4.kv_bytes * 34, z.kv_bytes * 18);
    assert_int_equal(z4.total, z.total);
    p.kv_type = 0;
    try {
        cu::context_sizes(pg, p);
        fail_msg("an F32 cache accepted");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_UNSUPPORTED);
    }
}

// With a window pool (backend.hpp's n_window_blocks): the window layers' caches are sized by it, the
// others' by n_blocks, none overlapping; io grows by the window layers' slots and table offsets; a params
// struct that ends before n_window_blocks (an older core) has none.
void test_context_sizes_window(void **) {
    for (const char *family : {"gemma2", "gemma3", "gpt-oss"}) {
        SyntheticSpec s = synthetic_family(family);
        auto m = load_synthetic(s);
        const cu::Program pg = cu::program_of(m->desc().c);
        ember_mod_context_params p{};
        p.struct_size = sizeof p;
        p.n_blocks = 65, p.block_size = 16, p.n_batch = 16, p.n_logits = 16, p.kv_type = 1;
        const cu::ContextSizes flat = cu::context_sizes(pg, p);
        p.n_window_blocks = 18;
        const cu::ContextSizes z = cu::context_sizes(pg, p);
        uint32_t n_windowed = 0;
        for (const ember_graph_node &n : pg.nodes)
            if (n.op == EMBER_GRAPH_ATTENTION_EXT && n.window > 0) {
                assert_true(z.windowed[size_t(n.layer)]);
                ++n_windowed;
            }
        assert_true(n_windowed > 0 && n_windowed < s.n_layer);   // window layers and global ones
        size_t expect = 0;
        for (uint32_t il = 0; il < s.n_layer; ++il) {
            assert_int_equal(z.kv_layer_off[il], expect);
            const size_t layer = size_t{z.windowed[il] ? 18u : 65u} * 16 * z.kv_row_bytes;
            expect += (layer + 255) / 256 * 256;
        }
        assert_int_equal(z.kv_cache_bytes, expect);
        assert_true(z.bytes() < flat.bytes());
        assert_int_equal(flat.bytes() - z.bytes(), 2 * (flat.kv_cache_bytes - z.kv_cache_bytes) -
                                                        (z.total - flat.total));
        assert_int_equal(z.io_words, 6 * z.rows + p.n_logits);
        p.struct_size = offsetof(ember_mod_context_params, n_window_blocks);
        const cu::ContextSizes old = cu::context_sizes(pg, p);
        assert_int_equal(old.n_window_blocks, 0);
        assert_int_equal(old.kv_cache_bytes, flat.kv_cache_bytes);
    }
}

// A hybrid decoder of two layers in graph.h's terms: layer 0 recurrent (qkv product, convolution, gated
// delta rule with its a / b products, a sigmoid output gate), layer 1 attention with Qwen3.5's query and gate
// interleaved per head (two COPY_COLS) and a sigmoid gate, then the output. Tensors are F32 (only their
// shapes are read); the state is the convolution's window then the delta rule's heads.
struct Hybrid {
    static constexpr uint32_t E = 64, H = 4, Hk = 2, S = 16, K = 4, V = 32, QKV = (2 * Hk + H) * S;
    static constexpr uint32_t kConvState = (K - 1) * QKV, kDeltaState = H * S * S;
    std::vector<ember_mod_tensor> tensors;
    std::vector<ember_graph_buf> bufs;
    std::vector<ember_graph_node> nodes;
    ember_mod_model_desc d{};
    size_t conv = 0, delta = 0;  // the stateful nodes' indices

    int32_t tensor(int64_t n0, int64_t n1) {
        ember_mod_tensor t{};
        t.type = 0, t.n_dims = n1 > 0 ? 2 : 1, t.ne[0] = n0, t.ne[1] = n1 > 0 ? n1 : 1, t.ne[2] = t.ne[3] = 1;
        t.n_bytes = size_t(n0) * size_t(n1 > 0 ? n1 : 1) * 4, t.name = "t";
        tensors.push_back(t);
        return int32_t(tensors.size() - 1);
    }
    int32_t buf(uint32_t width, uint32_t rows = EMBER_GRAPH_ROWS_TOKENS) {
        bufs.push_back({width, rows});
        return int32_t(bufs.size() - 1);
    }
    ember_graph_node &node(uint32_t op, int32_t layer, int32_t dst, int32_t src, int32_t w = -1) {
        ember_graph_node n{};
        n.op = op, n.layer = layer, n.dst = dst, n.src = src, n.src2 = n.w = n.b = n.w2 = n.w3 = n.b2 = n.b3 = n.src3 = -1;
        n.w = w;
        nodes.push_back(n);
        return nodes.back();
    }
    Hybrid() {
        const int32_t x = buf(E), qkv = buf(QKV), conv_out = buf(QKV), a = buf(H), b = buf(H), o = buf(H * S), gate = buf(H * S),
                      proj = buf(E), qg = buf(2 * H * S), q = buf(H * S), g2 = buf(H * S), k = buf(Hk * S), v = buf(Hk * S),
                      att = buf(H * S), last = buf(E, EMBER_GRAPH_ROWS_LOGITS), logits = buf(V, EMBER_GRAPH_ROWS_LOGITS);
        node(EMBER_GRAPH_GET_ROWS, -1, x, -1, tensor(E, V));
        node(EMBER_GRAPH_MATMUL, 0, qkv, x, tensor(E, QKV));
        conv = nodes.size();
        ember_graph_node &c = node(EMBER_GRAPH_SSM_CONV, 0, conv_out, qkv, tensor(K, QKV));
        c.state_offset = 0, c.state_size = kConvState;
        node(EMBER_GRAPH_MATMUL, 0, a, x, tensor(E, H));
        node(EMBER_GRAPH_MATMUL, 0, b, x, tensor(E, H));
        node(EMBER_GRAPH_MATMUL, 0, gate, x, tensor(E, H * S));
        delta = nodes.size();
        ember_graph_node &g = node(EMBER_GRAPH_GATED_DELTA, 0, o, conv_out, tensor(H, 0));
        g.src2 = a, g.src3 = b, g.w2 = tensor(H, 0), g.n_head = H, g.n_head_kv = Hk, g.head_dim = S, g.eps = 1e-6f,
        g.scale = 0.25f, g.state_offset = kConvState, g.state_size = kDeltaState;
        node(EMBER_GRAPH_SIGMOID_MUL, 0, o, o).src2 = gate;
        node(EMBER_GRAPH_MATMUL, 0, proj, o, tensor(H * S, E));
        node(EMBER_GRAPH_ADD, 0, x, proj);
        node(EMBER_GRAPH_MATMUL, 1, qg, x, tensor(E, 2 * H * S));
        ember_graph_node &cq = node(EMBER_GRAPH_COPY_COLS, 1, q, qg);
        cq.n_head = H, cq.head_dim = S, cq.n = 0;
        ember_graph_node &cg = node(EMBER_GRAPH_COPY_COLS, 1, g2, qg);
        cg.n_head = H, cg.head_dim = S, cg.n = S;
        node(EMBER_GRAPH_MATMUL, 1, k, x, tensor(E, Hk * S));
        node(EMBER_GRAPH_MATMUL, 1, v, x, tensor(E, Hk * S));
        node(EMBER_GRAPH_KV_STORE, 1, -1, k).src2 = v;
        ember_graph_node &at = node(EMBER_GRAPH_ATTENTION, 1, att, q);
        at.n_head = H, at.n_head_kv = Hk, at.head_dim = S, at.scale = 0.25f;
        node(EMBER_GRAPH_SIGMOID_MUL, 1, att, att).src2 = g2;
        node(EMBER_GRAPH_MATMUL, 1, proj, att, tensor(H * S, E));
        node(EMBER_GRAPH_ADD, 1, x, proj);
        node(EMBER_GRAPH_GATHER_LOGITS, 2, last, x);
        node(EMBER_GRAPH_MATMUL, 2, logits, last, tensor(E, V));
        d.struct_size = sizeof d, d.n_vocab = V, d.n_layer = 2, d.kv_width = Hk * S, d.head_dim = S;
        d.logits_buf = logits, d.state_floats = kConvState + kDeltaState;
    }
    const ember_mod_model_desc &desc() {
        d.n_tensors = uint32_t(tensors.size()), d.tensors = tensors.data();
        d.n_bufs = uint32_t(bufs.size()), d.bufs = bufs.data();
        d.node_size = sizeof(ember_graph_node), d.n_nodes = uint32_t(nodes.size()), d.nodes = nodes.data();
        return d;
    }
};

void test_hybrid_program(void **) {
    Hybrid h;
    const cu::Program pg = cu::program_of(h.desc());
    assert_int_equal(pg.state_floats, Hybrid::kConvState + Hybrid::kDeltaState);
    assert_int_equal(pg.has_kv.size(), 2);
    assert_false(pg.has_kv[0]);  // the recurrent layer keeps no K/V rows
    assert_true(pg.has_kv[1]);
    const ember_graph_node &c = pg.nodes[h.conv], &g = pg.nodes[h.delta];
    for (int32_t t : {c.w, g.w, g.w2}) assert_int_equal(pg.tensor_use[size_t(t)], cu::Program::kVector);
    // Both output products go into the residual (their outputs are dead after the ADD).
    assert_int_equal(count(pg, &cu::NodeRun::accumulate), 2);
    // GATED_DELTA reads its src3: a product whose output it reads that way is not fused into an ADD after it.
    Hybrid e;
    const size_t bi = e.delta - 2;  // the b product
    assert_int_equal(e.nodes[bi].op, EMBER_GRAPH_MATMUL);
    assert_int_equal(e.nodes[bi].dst, e.nodes[e.delta].src3);
    ember_graph_node add{};
    add = e.nodes[e.nodes.size() - 3];  // an ADD node of the program, moved: a += b
    add.layer = 0, add.dst = e.nodes[e.delta].src2, add.src = e.nodes[bi].dst;
    e.nodes.insert(e.nodes.begin() + long(bi) + 1, add);
    const cu::Program pe = cu::program_of(e.desc());
    assert_false(pe.how[bi].accumulate);
    assert_false(pe.how[bi + 1].skip);
}

// A hybrid program's refusals: a delta head too wide for the kernels' registers (UNSUPPORTED, named), a
// state share of the wrong size or past the model's state, a model that declares no state, a kernel
// longer than 64, an attention layer that stores no rows (INVALID_MODEL).
void test_hybrid_refusals(void **) {
    {
        Hybrid h;
        ember_graph_node &g = h.nodes[h.delta];
        g.head_dim = 512, g.state_size = Hybrid::H * 512 * 512;
        expect_error(h.desc(), EMBER_ERR_UNSUPPORTED, "head_dim 512");
    }
    {
        Hybrid h;
        h.nodes[h.delta].state_size -= 1;
        expect_error(h.desc(), EMBER_ERR_INVALID_MODEL, "share of the recurrent state");
    }
    {
        Hybrid h;
        h.nodes[h.delta].state_offset += 1;
        expect_error(h.desc(), EMBER_ERR_INVALID_MODEL, "share of the recurrent state");
    }
    {
        Hybrid h;
        h.d.state_floats = 0;
        expect_error(h.desc(), EMBER_ERR_INVALID_MODEL, "share of the recurrent state");
    }
    {
        Hybrid h;
        h.tensors[size_t(h.nodes[h.conv].w)].ne[0] = 65;
        expect_error(h.desc(), EMBER_ERR_INVALID_MODEL, "K <= 64");
    }
    {
        Hybrid h;
        h.nodes[h.delta].src3 = -1;
        expect_error(h.desc(), EMBER_ERR_INVALID_MODEL, "a buffer out of range");
    }
    {
        Hybrid h;
        for (ember_graph_node &n : h.nodes)
            if (n.op == EMBER_GRAPH_ATTENTION) n.layer = 0;
        expect_error(h.desc(), EMBER_ERR_INVALID_MODEL, "stores no K/V rows");
    }
}

// A hybrid context: K/V caches for the attention layer only, the state slots counted, io grown by the
// state runs; a context without slots (or from a core whose params end before n_state_slots) refused.
void test_context_sizes_hybrid(void **) {
    Hybrid h;
    const cu::Program pg = cu::program_of(h.desc());
    ember_mod_context_params p{};
    p.struct_size = sizeof p;
    p.n_blocks = 8, p.block_size = 16, p.n_batch = 8, p.n_logits = 2, p.kv_type = 1, p.n_state_slots = 3;
    const cu::ContextSizes z = cu::context_sizes(pg, p);
    const size_t layer = size_t{8} * 16 * Hybrid::Hk * Hybrid::S * 2;
    assert_int_equal(z.kv_layer_off[0], 0);
    assert_int_equal(z.kv_layer_off[1], 0);
    assert_int_equal(z.kv_cache_bytes, (layer + 255) / 256 * 256);
    assert_int_equal(z.n_state_slots, 3);
    assert_true(z.state_bytes >= size_t{3} * pg.state_floats * 4 && z.state_bytes < size_t{3} * pg.state_floats * 4 + 256);
    assert_int_equal(z.io_words, 4 * z.rows + p.n_logits + 6 * z.rows + 1);  // the runs' five arrays and each token's kept slot
    assert_int_equal(z.bytes(), z.kv_bytes + z.state_bytes + z.total + cu::kMatmulScratchBytes + cu::kMatmulWorkspaceBytes);
    p.n_state_slots = 0;
    try {
        cu::context_sizes(pg, p);
        fail_msg("a hybrid context without state slots accepted");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
    }
    p.n_state_slots = 3, p.struct_size = offsetof(ember_mod_context_params, n_state_slots);
    try {
        cu::context_sizes(pg, p);
        fail_msg("an older core's params accepted for a hybrid model");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
    }
}

// --- the encoders (BERT-shaped, nomic-bert-shaped, EmbeddingGemma-shaped) -----------------------------

std::unique_ptr<Model> load_encoder(const BertSpec &spec) { return load_gguf_bytes(synthetic_bert_gguf(spec)); }

// An encoder's program is accepted: its attention both ways (the pass then uploads each token's sequence's
// last position), its LayerNorms' weights and biases read as F32 vectors, its position table (BERT's) as a
// matrix whose rows bound the positions; the io words grow by one per row.
void check_encoder(const Model &m, uint32_t pos_rows) {
    const cu::Program pg = cu::program_of(m.desc().c);
    assert_true(pg.seq_mask);
    assert_int_equal(pg.n_pos_rows, pos_rows);
    size_t bidirectional = 0;
    for (const ember_graph_node &n : pg.nodes) {
        if (n.op == EMBER_GRAPH_LAYER_NORM) {
            for (int32_t t : {n.w, n.b})
                if (t >= 0) assert_int_equal(pg.tensor_use[size_t(t)], cu::Program::kVector);
        }
        if (n.op == EMBER_GRAPH_ADD_POS_ROWS) assert_int_equal(pg.tensor_use[size_t(n.w)], cu::Program::kMatrix);
        if (n.op == EMBER_GRAPH_ATTENTION_EXT) bidirectional += n.attn_mask == EMBER_GRAPH_MASK_SEQUENCE;
        assert_true(n.op != EMBER_GRAPH_ATTENTION);  // every attention is both ways
    }
    assert_int_equal(bidirectional, m.desc().hp.n_layer);
    ember_mod_context_params p{};
    p.struct_size = sizeof p;
    p.n_blocks = 16, p.block_size = 16, p.n_batch = 64, p.n_logits = 64, p.kv_type = 1;
    const cu::ContextSizes z = cu::context_sizes(pg, p);
    assert_int_equal(z.io_words, cu::step_io_words(z.rows, p.n_logits, false, false, true));
    assert_int_equal(z.io_words, 5 * z.rows + p.n_logits);
}

void test_encoder_programs(void **) {
    for (uint32_t pooling : {1u, 2u, 4u})
        for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
            BertSpec spec;
            spec.pooling_type = pooling, spec.type = type;
            auto m = load_encoder(spec);
            check_encoder(*m, spec.n_ctx);
            size_t norms = 0, gelus = 0;
            for (const ember_graph_node &n : m->desc().nodes) norms += n.op == EMBER_GRAPH_LAYER_NORM, gelus += n.op == EMBER_GRAPH_GELU;
            assert_int_equal(norms, 1 + 2 * spec.n_layer);  // the embeddings' and two per layer
            assert_int_equal(gelus, spec.n_layer);
        }
    BertSpec nomic;
    nomic.arch = "nomic-bert";
    auto n = load_encoder(nomic);
    check_encoder(*n, n->desc().hp.n_ctx_train);  // the token-type row as a table by position
    // EmbeddingGemma's layers: per-head norms, GeGLU, window layers (no window both ways), heads of 256 at
    // most, and the dense projections over the pooled rows (products over logits rows).
    auto g = load_synthetic(synthetic_family("gemma-embedding"));
    check_encoder(*g, 0);
    const cu::Program pg = cu::program_of(g->desc().c);
    size_t dense = 0;
    for (const ember_graph_node &nd : pg.nodes) {
        if (nd.op == EMBER_GRAPH_ATTENTION_EXT) assert_int_equal(nd.window, 0);
        dense += nd.op == EMBER_GRAPH_MATMUL && pg.logits_rows(nd.dst);
    }
    assert_int_equal(dense, 2);
}

// What the encoders' ops refuse: buffers of other widths, weights or biases not F32 or not of the row's
// width, a position table that is not F32 / F16 rows of the buffer's width, a mask graph.h does not define,
// the bidirectional mask with a local chunk or a temperature.
// An edit of m's program, refused with `status` and a message containing `text`.
template <class Edit>
void expect_edit(const Model &m, Edit edit, ember_status status, const char *text) {
    Edited e(m);
    edit(e);
    expect_error(e.desc(), status, text);
}

void test_encoder_refusals(void **) {
    auto m = load_encoder(BertSpec{});
    const size_t ln = Edited(*m).find(EMBER_GRAPH_LAYER_NORM);
    // A buffer of another width than the model's (the FFN's), and a tensor of another length.
    int32_t wide = -1, ffn_down = -1;
    for (const ember_graph_node &n : m->desc().nodes)
        if (n.op == EMBER_GRAPH_GELU) wide = n.dst;
    for (uint32_t t = 0; t < m->desc().c.n_tensors; ++t)
        if (std::string(m->desc().c.tensors[t].name) == "blk.0.ffn_down.weight") ffn_down = int32_t(t);
    assert_true(wide >= 0 && ffn_down >= 0);
    const auto invalid = EMBER_ERR_INVALID_MODEL, unsupported = EMBER_ERR_UNSUPPORTED;
    expect_edit(*m, [&](Edited &e) { e.nodes[ln].dst = wide; }, invalid, "layer_norm");
    {
        Edited e(*m);
        e.nodes[ln].b = e.nodes[e.find(EMBER_GRAPH_MATMUL)].b;   // the query's bias: of the row's width
        assert_true(e.nodes[ln].b >= 0);
        cu::program_of(e.desc());  // accepted
        e.nodes[ln].b = e.nodes[e.find(EMBER_GRAPH_GELU) - 1].b;  // the FFN's up bias: wider
        expect_error(e.desc(), invalid, "weight or bias not of the row's width");
    }
    {
        // A LayerNorm weight stored as F16: refused at load, naming the tensor.
        Edited e(*m);
        const char *name = e.retype(e.nodes[ln].w, 1);
        expect_error(e.desc(), unsupported, name);
    }
    // The model's width into the FFN's.
    expect_edit(*m, [&](Edited &e) { e.nodes[e.find(EMBER_GRAPH_GELU)].src = e.nodes[ln].dst; }, invalid, "gelu");
    // A table of the FFN's width, none, and a Q8_0 one (rows of the right width: only F32 and F16 are added).
    expect_edit(*m, [&](Edited &e) { e.nodes[e.find(EMBER_GRAPH_ADD_POS_ROWS)].w = ffn_down; }, invalid, "add_pos_rows");
    expect_edit(*m, [&](Edited &e) { e.nodes[e.find(EMBER_GRAPH_ADD_POS_ROWS)].w = -1; }, invalid, "tensor out of range");
    expect_edit(*m, [&](Edited &e) { e.retype(e.nodes[e.find(EMBER_GRAPH_ADD_POS_ROWS)].w, 8); }, invalid, "F32 or F16");
    expect_edit(*m, [&](Edited &e) { e.nodes[e.find(EMBER_GRAPH_ATTENTION_EXT)].attn_mask = 2; }, unsupported, "mask 2");
    expect_edit(*m, [&](Edited &e) { e.nodes[e.find(EMBER_GRAPH_ATTENTION_EXT)].attn_local_chunk = 4; }, unsupported,
                "bidirectional mask");
    expect_edit(*m, [&](Edited &e) {
        ember_graph_node &a = e.nodes[e.find(EMBER_GRAPH_ATTENTION_EXT)];
        a.attn_temp_scale = 0.1f, a.attn_temp_floor = 8;
    }, unsupported, "bidirectional mask");
}

// A pass's inputs for an encoder: each token's sequence's last position after the other arrays (two texts
// of one block table each, the second given last token first), and a position past the table refused.
void test_encoder_inputs(void **) {
    const int32_t ta[2] = {0, 1}, tb[1] = {2};
    const int32_t tokens[5] = {1, 2, 3, 4, 5}, pos[5] = {0, 1, 2, 1, 0};
    const int32_t *tables[5] = {ta, ta, ta, tb, tb};
    const int32_t lrows[5] = {0, 1, 2, 3, 4};
    ember_mod_batch b{};
    b.struct_size = sizeof b;
    b.n_tokens = 5, b.tokens = tokens, b.pos = pos, b.tables = tables, b.n_logits = 5, b.logits_rows = lrows;
    cu::StepShape z;
    z.rows = 8, z.block_size = 16, z.n_blocks = 4, z.n_vocab = 10, z.n_batch = 8, z.n_logits = 8;
    z.seq_last = true, z.n_pos_rows = 3;
    std::vector<int32_t> io(cu::step_io_words(z.rows, z.n_logits, false, false, true), -7), tabs;
    assert_int_equal(io.size(), 5 * 8 + 8);
    cu::step_inputs(b, z, io.data(), tabs);
    const size_t at = cu::step_io_seq_last(z.rows, z.n_logits, false, false);
    assert_int_equal(at, 4 * 8 + 8);
    const int32_t want[5] = {2, 2, 2, 1, 1};
    for (size_t t = 0; t < 5; ++t) assert_int_equal(io[at + t], want[t]);
    assert_int_equal(io[at + 5], -7);  // rows past the pass's tokens untouched
    for (size_t t = 0; t < 5; ++t) assert_int_equal(io[8 + t], pos[t]);
    const int32_t past[5] = {0, 1, 3, 1, 0};
    b.pos = past;
    try {
        cu::step_inputs(b, z, io.data(), tabs);
        fail_msg("position 3 of a 3-row table was accepted");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
        assert_non_null(std::strstr(e.what(), "position embeddings"));
    }
}

// The encoders' GELU (cuda/gelu_math.hpp, the kernels' arithmetic; this file is compiled without
// contraction, as the CPU's) gives cpu::gelu's bits: [-12, 12] in steps of 2^-10, random values in
// [-40, 40], zeros, tiny and huge values and infinities (the exponential's clamps).
void test_gelu_bits(void **) {
    std::vector<float> x;
    for (int i = -12 * 1024; i <= 12 * 1024; ++i) x.push_back(float(i) / 1024.0f);
    uint64_t st = 7;
    for (int i = 0; i < 20000; ++i) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        x.push_back(float(double(st >> 11) / double(1ull << 53) * 80.0 - 40.0));
    }
    for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-40f, -1e-40f, 60.0f, -60.0f, 1e4f, -1e4f, 3e38f, -3e38f, INFINITY,
                    -INFINITY})
        x.push_back(v);
    std::vector<float> want(x.size());
    cpu::gelu(x.data(), want.data(), int64_t(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
        const float got = cu::gelu(x[i]);
        if (std::memcmp(&got, &want[i], sizeof got) != 0)
            fail_msg("gelu(%.9g): %.9g, the CPU's %.9g", double(x[i]), double(got), double(want[i]));
    }
}

} // namespace

int main() {
    const CMUnitTest tests[] = {cmocka_unit_test(test_llama_program), cmocka_unit_test(test_qwen2_program),
                                cmocka_unit_test(test_real_models), cmocka_unit_test(test_fusion_limits), cmocka_unit_test(test_refusals),
                                cmocka_unit_test(test_family_programs), cmocka_unit_test(test_family_refusals),
                                cmocka_unit_test(test_context_sizes), cmocka_unit_test(test_context_sizes_window),
                                cmocka_unit_test(test_hybrid_program), cmocka_unit_test(test_hybrid_refusals),
                                cmocka_unit_test(test_context_sizes_hybrid), cmocka_unit_test(test_encoder_programs),
                                cmocka_unit_test(test_encoder_refusals), cmocka_unit_test(test_encoder_inputs),
                                cmocka_unit_test(test_gelu_bits)};
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
