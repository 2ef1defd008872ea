// test_fusion_plan.cpp — the GPU backends' shared fusion planner (backend/fusion_plan.hpp) on small
// programs written here: a run is fused only where the backend lists the fusion, its nodes are of one
// layer and nothing after it reads what the fusion leaves unwritten; the two shared-input rules (the
// product right before, or the last one while its input and the scratch hold); ropes share a table only
// with ropes of the same rotation. tests/test_backend_plans.cpp pins what the backends make of it for
// the model families' programs.
#include "test_util.h"

#include "backend/fusion_plan.hpp"

#include <vector>

using namespace ember;

namespace {

// A program under construction: buffers are plain numbers (the planner reads no widths).
struct Prog {
    std::vector<ember_graph_node> nodes;
    int32_t logits = 99;
    ember_graph_node &add(uint32_t op, int32_t dst, int32_t src, int32_t layer = 0) {
        ember_graph_node n{};
        n.op = op, n.layer = layer, n.dst = dst, n.src = src;
        n.src2 = n.w = n.b = n.w2 = n.w3 = n.b2 = n.b3 = n.src3 = -1;
        nodes.push_back(n);
        return nodes.back();
    }
    ember_graph_node &matmul(int32_t dst, int32_t src, int32_t w = 0, int32_t layer = 0) {
        ember_graph_node &n = add(EMBER_GRAPH_MATMUL, dst, src, layer);
        n.w = w;
        return n;
    }
    ember_graph_node &rope(int32_t dst, float theta, uint32_t op = EMBER_GRAPH_ROPE) {
        ember_graph_node &n = add(op, dst, -1);
        n.n_rot = 16, n.rope_theta = theta, n.rope_freq_scale = 1;
        return n;
    }
    FusionPlan plan(std::initializer_list<Fusion> fusions, std::span<const uint32_t> scratch_ops = {},
                    bool (*prepares)(const ember_graph_node &, const void *) = nullptr) const {
        fusions_.assign(fusions);
        return plan_fusions(nodes, logits, FusionRules{fusions_, prepares, nullptr, scratch_ops});
    }
    mutable std::vector<Fusion> fusions_;
};

constexpr int32_t X = 0, H = 1, T = 2, Q = 3, K = 4, V = 5;  // residual, normed, product, q, k, v

// The residual block's end: x = norm(x); t = W h; x += t; and a next norm reading x.
Prog residual_block() {
    Prog p;
    p.add(EMBER_GRAPH_RMS_NORM, H, X);
    p.matmul(T, H);
    p.add(EMBER_GRAPH_ADD, X, T);
    p.add(EMBER_GRAPH_RMS_NORM, H, X);
    return p;
}

void test_accumulate(void **) {
    Prog p = residual_block();
    FusionPlan f = p.plan({Fusion::accumulate});
    assert_int_equal(f.runs.size(), 3);
    const FusedRun &r = f.runs[1];
    assert_true(r.fused && r.kind == Fusion::accumulate);
    assert_int_equal(r.first, 1), assert_int_equal(r.count, 2), assert_int_equal(r.lead, 1);
    assert_int_equal(r.src, H), assert_int_equal(r.dst, X);
    assert_false(f.folded(1));
    assert_true(f.folded(2));
    assert_int_equal(f.run_of[2], 1), assert_int_equal(f.run_of[3], 2);
    // A backend that does not list it runs every node on its own.
    f = p.plan({Fusion::gathered_norm});
    assert_int_equal(f.runs.size(), 4);
    for (size_t i = 0; i < 4; ++i) assert_false(f.runs[i].fused || f.folded(i));
}

// What keeps a product and its ADD apart.
void test_accumulate_limits(void **) {
    {
        Prog p = residual_block();  // the product read again after the ADD
        p.add(EMBER_GRAPH_ADD, X, T);
        const FusionPlan f = p.plan({Fusion::accumulate});
        assert_false(f.runs[1].fused);
    }
    {
        Prog p = residual_block();  // the product read after a COPY_COLS that writes only some of its columns
        p.add(EMBER_GRAPH_COPY_COLS, T, Q);
        p.add(EMBER_GRAPH_SWIGLU, Q, Q).src2 = T;
        assert_false(p.plan({Fusion::accumulate}).runs[1].fused);
        p.nodes[4].op = EMBER_GRAPH_SCALE;  // a node that writes all of it: the product is dead there
        assert_true(p.plan({Fusion::accumulate}).runs[1].fused);
    }
    {
        Prog p = residual_block();  // GATED_DELTA reads its src3
        ember_graph_node &g = p.add(EMBER_GRAPH_GATED_DELTA, Q, K);
        g.src2 = V, g.src3 = T;
        assert_false(p.plan({Fusion::accumulate}).runs[1].fused);
    }
    {
        Prog p = residual_block();  // the residual is the product's input
        p.nodes[2].dst = H;
        assert_false(p.plan({Fusion::accumulate}).runs[1].fused);
        p.nodes[2].dst = T;  // y = 2 W x
        assert_false(p.plan({Fusion::accumulate}).runs[1].fused);
    }
    {
        Prog p = residual_block();  // across a layer boundary
        p.nodes[2].layer = 1;
        assert_false(p.plan({Fusion::accumulate}).runs[1].fused);
    }
    {
        Prog p = residual_block();  // the product is the pass's output
        p.logits = T;
        assert_false(p.plan({Fusion::accumulate}).runs[1].fused);
    }
}

void test_gathered_norm(void **) {
    constexpr int32_t L = 7, N = 8;  // logits rows: gathered, normed
    Prog p;
    p.add(EMBER_GRAPH_GATHER_LOGITS, L, X, 2);
    p.add(EMBER_GRAPH_RMS_NORM, N, L, 2);
    p.matmul(p.logits, N, 0, 2);
    FusionPlan f = p.plan({Fusion::accumulate, Fusion::gathered_norm});
    assert_int_equal(f.runs.size(), 2);
    assert_true(f.runs[0].fused && f.runs[0].kind == Fusion::gathered_norm);
    assert_int_equal(f.runs[0].lead, 1);  // the norm's kernel, reading X
    assert_int_equal(f.runs[0].src, X), assert_int_equal(f.runs[0].dst, N);
    assert_true(f.folded(0));
    assert_false(f.folded(1));
    // The gathered rows read again: only an in-place norm keeps the fusion.
    p.nodes[2].src = L;
    assert_false(p.plan({Fusion::gathered_norm}).runs[0].fused);
    p.nodes[1].dst = L;
    assert_true(p.plan({Fusion::gathered_norm}).runs[0].fused);
}

// CUDA's rule: the product right before, of the same buffer.
void test_shared_input_next(void **) {
    Prog p;
    p.matmul(Q, H), p.matmul(K, H), p.matmul(V, H);  // Q/K/V
    p.add(EMBER_GRAPH_RMS_NORM, Q, Q);
    p.matmul(T, H);                                  // after another node: prepares again
    p.matmul(T + 10, X), p.matmul(T + 11, H);        // another buffer in between
    const FusionPlan f = p.plan({Fusion::shared_input_next});
    const InputUse want[] = {InputUse::prepare, InputUse::share, InputUse::share, InputUse::none,
                             InputUse::prepare, InputUse::prepare, InputUse::prepare};
    for (size_t i = 0; i < 7; ++i) assert_int_equal(static_cast<int>(f.input[i]), static_cast<int>(want[i]));
    // Without a shared-input fusion every product prepares its own.
    const FusionPlan none = p.plan({});
    assert_int_equal(static_cast<int>(none.input[1]), static_cast<int>(InputUse::prepare));
}

bool quantized(const ember_graph_node &n, const void *) { return n.w != 7; }  // tensor 7: an F32 matrix

// Vulkan's rule: the last prepared input while its buffer and the scratch hold; products that prepare
// nothing neither share nor end it.
void test_shared_input_held(void **) {
    constexpr uint32_t kScratch[] = {EMBER_GRAPH_MOE};
    Prog p;
    p.matmul(Q, H);
    p.add(EMBER_GRAPH_RMS_NORM, Q, Q);  // writes another buffer: the copy of H holds
    p.matmul(K, H, 7);                  // F32: reads H as it is
    p.matmul(V, H);                     // shares
    p.add(EMBER_GRAPH_MOE, T, H).src2 = V;
    p.matmul(Q, H);                     // the MOE used the scratch: prepares again
    p.add(EMBER_GRAPH_SCALE, H, H);     // H written
    p.matmul(K, H);                     // prepares again
    p.matmul(H, X, 7);                  // an F32 product writing H
    p.matmul(V, H);                     // prepares again
    const FusionPlan f = p.plan({Fusion::shared_input_held}, kScratch, quantized);
    const InputUse want[] = {InputUse::prepare, InputUse::none, InputUse::none,    InputUse::share, InputUse::none,
                             InputUse::prepare, InputUse::none, InputUse::prepare, InputUse::none,  InputUse::prepare};
    for (size_t i = 0; i < 10; ++i) assert_int_equal(static_cast<int>(f.input[i]), static_cast<int>(want[i]));
}

// A fused run's output is what it writes: an F32 product accumulated into the buffer whose copy is held
// ends that copy.
void test_shared_input_after_accumulate(void **) {
    Prog p;
    p.matmul(Q, H);                // prepares H
    p.matmul(T, X, 7);             // F32 ...
    p.add(EMBER_GRAPH_ADD, H, T);  // ... accumulated into H
    p.matmul(K, H);
    const FusionPlan f = p.plan({Fusion::accumulate, Fusion::shared_input_held}, {}, quantized);
    assert_true(f.runs[1].fused);
    assert_int_equal(f.runs[1].dst, H);
    assert_int_equal(static_cast<int>(f.input[1]), static_cast<int>(InputUse::none));
    assert_int_equal(static_cast<int>(f.input[3]), static_cast<int>(InputUse::prepare));
}

void test_rope_tables(void **) {
    Prog p;
    p.rope(Q, 1e4f), p.rope(K, 1e4f);  // q and k of a layer
    p.rope(Q, 1e6f), p.rope(K, 1e6f);  // another base (gemma3's global layers)
    p.rope(Q, 1e4f);                   // the first again
    p.rope(K, 1e4f, EMBER_GRAPH_ROPE_YARN).rope_attn_factor = 1;  // another op: its own
    p.rope(V, 1e4f).n_rot = 0;         // rotates nothing
    p.rope(Q, 1e4f).w = 3;             // its own factors
    p.add(EMBER_GRAPH_ADD, X, T);
    const FusionPlan f = p.plan({});
    const int32_t want[] = {0, 0, 1, 1, 0, 2, -1, 3, -1};
    for (size_t i = 0; i < 9; ++i) assert_int_equal(f.rope_table[i], want[i]);
    assert_int_equal(f.n_rope_tables, 4);
}

void test_liveness(void **) {
    Prog p;
    ember_graph_node &c = p.add(EMBER_GRAPH_COPY_COLS, Q, T);
    assert_false(node_overwrites(c, Q));
    assert_true(node_reads(c, T));
    ember_graph_node &r = p.rope(K, 1e4f);
    assert_true(node_reads(r, K));
    assert_false(node_overwrites(r, K));
    ember_graph_node &kv = p.add(EMBER_GRAPH_KV_STORE, -1, K);
    kv.src2 = V;
    assert_true(node_reads(kv, V));
    ember_graph_node &g = p.add(EMBER_GRAPH_GET_ROWS, X, -1);
    assert_false(node_reads(g, -1));
    assert_true(node_overwrites(g, X));
    // After the last node only the output is live.
    assert_true(dead_after(p.nodes, p.nodes.size() - 1, T, p.logits));
    assert_false(dead_after(p.nodes, p.nodes.size() - 1, p.logits, p.logits));
    assert_false(dead_after(p.nodes, 0, V, p.logits));  // the KV_STORE reads it
}

} // namespace

int main() {
    const CMUnitTest tests[] = {cmocka_unit_test(test_accumulate),       cmocka_unit_test(test_accumulate_limits),
                                cmocka_unit_test(test_gathered_norm),    cmocka_unit_test(test_shared_input_next),
                                cmocka_unit_test(test_shared_input_held), cmocka_unit_test(test_shared_input_after_accumulate),
                                cmocka_unit_test(test_rope_tables),      cmocka_unit_test(test_liveness)};
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
