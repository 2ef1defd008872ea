// test_offload.cpp — placement across devices (backend/placement.hpp, program_split.hpp): a model's
// program cut at layer boundaries (and around MoE experts) into parts run by different backends gives what
// the whole program gives on one; saved states move between placements; the automatic fit places what
// fits and an explicit placement over its budget is refused before anything is allocated.
//
// Without an argument the "GPU" side is the CPU backend itself (a second CPU part: the cut, the crossing
// activations, the per-part K/V rows and recurrent state, all bit for bit); with "vulkan" (lavapipe in CI)
// or "cuda", that module runs its part and the logits are compared within a bound, the greedy tokens equal.
#include "backend_arg.hpp"
#include "synthetic_model.hpp"
#include "test_util.h"

#include "backend/placement.hpp"
#include "backend/program_split.hpp"
#include "engine/engine.hpp"
#include "model/model.hpp"
#include "session/session.hpp"
#include "testing/synthetic.hpp"

#include "core/error.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <malloc.h>
#include <unistd.h>
#include <vector>

using namespace ember;

namespace {

ember_backend_kind g_gpu = EMBER_BACKEND_CPU;
#if defined(EMBER_TEST_SANITIZED)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
constexpr uint32_t kCtx = 256, kBatch = 16;

Backend &gpu() { return backend_require(g_gpu); }

SessionOptions options(Backend *placed) {
    SessionOptions o;
    o.n_ctx = kCtx;
    o.n_batch = kBatch;
    o.n_threads = 1;
    o.backend = EMBER_BACKEND_CPU;
    o.placed = placed;
    return o;
}

ContextParams context_params() {
    ContextParams cp;
    cp.n_blocks = kCtx / 16 + 1;
    cp.n_batch = kBatch;
    cp.n_logits = kBatch;
    return cp;
}

std::vector<int32_t> prompt(size_t n, uint32_t n_vocab) {
    std::vector<int32_t> t(n);
    for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 11) % n_vocab);
    return t;
}

int32_t argmax(const float *x, uint32_t n) {
    int32_t best = 0;
    for (uint32_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = static_cast<int32_t>(i);
    return best;
}

// Compares two sessions' logits: bit for bit where both parts run on the CPU, else within a bound of
// the logits' spread (a GPU module's products round differently).
void assert_close(const Session &a, const Session &b) {
    const uint32_t n = a.n_vocab();
    if (g_gpu == EMBER_BACKEND_CPU) {
        assert_memory_equal(a.logits(), b.logits(), n * sizeof(float));
        return;
    }
    double lo = INFINITY, hi = -INFINITY, worst = 0;
    for (uint32_t i = 0; i < n; ++i) {
        lo = std::min(lo, static_cast<double>(a.logits()[i])), hi = std::max(hi, static_cast<double>(a.logits()[i]));
        worst = std::max(worst, std::fabs(static_cast<double>(a.logits()[i]) - b.logits()[i]));
    }
    if (worst > 0.02 * (hi - lo) + 1e-3) {
        std::printf("logits differ by %g (spread %g)\n", worst, hi - lo);
        fail_msg("logits out of bounds");
    }
}

// Greedy decoding of a prompt: every step's logits compared with the all-CPU session's, the tokens equal.
void greedy_same(const Model &m, Backend &placed, size_t n_prompt = 20, int steps = 8) {
    Session ref(m, options(nullptr)), s(m, options(&placed));
    const std::vector<int32_t> p = prompt(n_prompt, m.desc().hp.n_vocab);
    ref.feed(p.data(), p.size());
    s.feed(p.data(), p.size());
    assert_close(ref, s);
    for (int i = 0; i < steps; ++i) {
        const int32_t t = argmax(ref.logits(), ref.n_vocab());
        assert_int_equal(t, argmax(s.logits(), s.n_vocab()));
        ref.feed(&t, 1);
        s.feed(&t, 1);
        assert_close(ref, s);
    }
}

std::unique_ptr<Model> dense_model() {
    SyntheticSpec spec;
    spec.n_layer = 4;
    spec.n_vocab = 96;
    spec.logit_std = 4;
    spec.type = DType::Q8_0;
    return load_synthetic(spec);
}

void test_split_every_boundary(void **) {
    auto m = dense_model();
    const uint32_t n = m->desc().hp.n_layer;
    for (uint32_t g = 1; g < n; ++g) greedy_same(*m, placed_backend(gpu(), n, g, 0));
}

void test_split_parts(void **) {
    // Three layers on the "GPU" of four: two parts, the residual stream alone crossing between them.
    auto m = dense_model();
    const ember_mod_model_desc &d = m->desc().c;
    std::vector<PlacedPart> parts = place_program(d, gpu(), 3, 0);
    assert_int_equal(parts.size(), 2);
    assert_int_equal(parts[0].part->in_width, 0);
    assert_int_equal(parts[0].part->out_width, m->desc().hp.n_embd);
    assert_int_equal(parts[1].part->in_width, m->desc().hp.n_embd);
    assert_int_equal(parts[1].part->out_width, 0);
    assert_int_equal(parts[1].part->c.n_vocab, d.n_vocab);
    assert_true(parts[0].part->c.n_tensors + parts[1].part->c.n_tensors >= d.n_tensors);
}

std::unique_ptr<Model> moe_model() {
    SyntheticSpec spec = synthetic_family("qwen3moe");
    spec.n_layer = 3;
    spec.logit_std = 4;
    return load_synthetic(spec);
}

void test_experts_on_cpu(void **) {
    if (!gpu().input_rows()) {
        std::printf("(the %s module cannot start a part from activations: experts on the CPU are refused)\n", gpu().name());
        auto m = moe_model();
        try {
            place_program(m->desc().c, gpu(), m->desc().hp.n_layer, 1);
            fail_msg("experts on the CPU accepted by a module without input rows");
        } catch (const Error &e) {
            assert_int_equal(e.status(), EMBER_ERR_UNSUPPORTED);
        }
        return;
    }
    auto m = moe_model();
    const uint32_t n = m->desc().hp.n_layer;
    // Every layer's experts on the CPU: the MOE node's input and router logits cross out, its output and
    // the residual stream back, in every layer.
    const std::vector<PlacedPart> parts = place_program(m->desc().c, gpu(), n, n);
    assert_int_equal(parts.size(), 2 * n + 1);
    assert_true(parts[1].part->has_experts);
    greedy_same(*m, placed_backend(gpu(), n, n, n));
    greedy_same(*m, placed_backend(gpu(), n, n, 1));
    greedy_same(*m, placed_backend(gpu(), n, 2, 1));
}

void test_hybrid_state_split(void **) {
    // Recurrent layers' state on their own part's device: Qwen3.5's DeltaNet and attention layers.
    SyntheticSpec spec = synthetic_family("qwen35");
    spec.n_layer = 4;
    spec.logit_std = 4;
    auto m = load_synthetic(spec);
    if (!gpu().recurrent_state()) return;
    for (uint32_t g = 1; g < 4; ++g) greedy_same(*m, placed_backend(gpu(), 4, g, 0), 12, 4);
}

void test_window_layers_split(void **) {
    // Sliding-window layers (Gemma 3: five window layers, one global, window 4) keep their rows in the
    // window pool of each part's device; a prompt well past the window, cut at every boundary.
    SyntheticSpec spec = synthetic_family("gemma3");
    spec.n_layer = 6;
    spec.logit_std = 4;
    auto m = load_synthetic(spec);
    for (uint32_t g = 1; g < 6; g += 2) greedy_same(*m, placed_backend(gpu(), 6, g, 0), 40, 6);
}

void test_save_restore_across_placements(void **) {
    auto m = dense_model();
    const uint32_t n = m->desc().hp.n_layer;
    Backend &split = placed_backend(gpu(), n, 2, 0);
    Session a(*m, options(&split)), cpu(*m, options(nullptr)), back(*m, options(&split));
    const std::vector<int32_t> p = prompt(40, m->desc().hp.n_vocab);
    a.feed(p.data(), p.size());
    const std::vector<uint8_t> saved = a.save();
    cpu.restore(saved.data(), saved.size());
    assert_close(a, cpu);
    // On and on from the restored state: the same next logits on both placements.
    const int32_t t = argmax(a.logits(), a.n_vocab());
    a.feed(&t, 1);
    cpu.feed(&t, 1);
    assert_close(a, cpu);
    // And back: the CPU's state restored on the split placement.
    const std::vector<uint8_t> saved_cpu = cpu.save();
    back.restore(saved_cpu.data(), saved_cpu.size());
    const int32_t u = argmax(cpu.logits(), cpu.n_vocab());
    cpu.feed(&u, 1);
    back.feed(&u, 1);
    assert_close(cpu, back);
}

void test_fork_and_cancel(void **) {
    auto m = dense_model();
    Backend &split = placed_backend(gpu(), m->desc().hp.n_layer, 2, 0);
    SessionOptions o = options(&split);
    o.n_seq_max = 2;
    Session s(*m, o), ref(*m, options(nullptr));
    const std::vector<int32_t> p = prompt(30, m->desc().hp.n_vocab);
    s.feed(p.data(), p.size());
    ref.feed(p.data(), p.size());
    std::unique_ptr<Session> f = s.fork();
    const int32_t t = 5;
    f->feed(&t, 1);
    ref.feed(&t, 1);
    assert_close(ref, *f);
    // A cancelled feed leaves the session where it was.
    std::atomic<bool> cancel{true};
    const size_t before = s.position();
    try {
        s.feed(p.data(), p.size(), nullptr, &cancel);
        fail_msg("a cancelled feed went on");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_CANCELLED);
    }
    assert_int_equal(s.position(), before);
}

void test_engine_eight_requests(void **) {
    auto m = dense_model();
    const uint32_t n = m->desc().hp.n_layer;
    EngineOptions o;
    o.n_ctx = kCtx;
    o.n_seq_max = 8;
    o.n_threads = 1;
    o.n_batch = 32;
    o.manual_step = true;
    o.backend = EMBER_BACKEND_CPU;
    std::vector<std::vector<int32_t>> got[2];
    for (int run = 0; run < 2; ++run) {
        o.placed = run ? &placed_backend(gpu(), n, 2, 0) : nullptr;
        Engine e(*m, o);
        std::vector<std::shared_ptr<Request>> reqs;
        for (int r = 0; r < 8; ++r) {
            auto q = std::make_shared<Request>();
            q->prompt = prompt(10 + r, m->desc().hp.n_vocab);
            q->max_tokens = 6;
            SamplerParams sp;
            sp.temperature = 0;
            q->sampler = std::make_unique<Sampler>(sp);
            e.submit(q);
            reqs.push_back(q);
        }
        while (e.step()) {
        }
        for (auto &r : reqs) got[run].push_back(r->tokens);
    }
    for (int r = 0; r < 8; ++r) {
        assert_int_equal(got[0][r].size(), 6);
        assert_true(got[0][r] == got[1][r]);
    }
}

void test_fit(void **) {
    auto m = dense_model();
    const ember_mod_model_desc &d = m->desc().c;
    const ContextParams cp = context_params();
    PlacementRequest all;
    all.gpu_budget = UINT64_MAX / 2;
    const PlacementPlan whole = plan_placement(d, gpu(), cp, all);
    assert_int_equal(whole.gpu_layers, d.n_layer);
    // A budget of three quarters of the whole: auto places what fits, fewer layers, and says so.
    PlacementRequest req;
    req.gpu_layers = kPlaceAuto;
    req.gpu_budget = (whole.gpu_weights + whole.gpu_context) * 3 / 4;
    const PlacementPlan p = plan_placement(d, gpu(), cp, req);
    assert_true(p.gpu_layers > 0 && p.gpu_layers < d.n_layer);
    assert_true(p.gpu_weights + p.gpu_context <= req.gpu_budget);
    assert_true(p.automatic);
    std::printf("auto at %llu bytes: %s\n", (unsigned long long)req.gpu_budget, p.describe().c_str());
    // One layer more would not have fitted.
    PlacementRequest more;
    more.gpu_layers = static_cast<int32_t>(p.gpu_layers + 1);
    more.gpu_budget = req.gpu_budget;
    try {
        plan_placement(d, gpu(), cp, more);
        fail_msg("a placement over its budget was accepted");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_OUT_OF_MEMORY);
        assert_non_null(std::strstr(e.what(), "budget"));
    }
    // A tiny budget: nothing on the GPU.
    req.gpu_budget = 1;
    assert_int_equal(plan_placement(d, gpu(), cp, req).gpu_layers, 0);
    // An impossible explicit one is refused before allocating, with the numbers.
    PlacementRequest all_tiny;
    all_tiny.gpu_budget = 1024;
    try {
        plan_placement(d, gpu(), cp, all_tiny);
        fail_msg("an impossible budget was accepted");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_OUT_OF_MEMORY);
        assert_non_null(std::strstr(e.what(), "MiB"));
    }
}

void test_fit_moe_experts_first(void **) {
    auto m = moe_model();
    if (!gpu().input_rows()) return;
    const ember_mod_model_desc &d = m->desc().c;
    const ContextParams cp = context_params();
    PlacementRequest all;
    all.gpu_budget = UINT64_MAX / 2;
    const PlacementPlan whole = plan_placement(d, gpu(), cp, all);
    PlacementRequest req;
    req.gpu_layers = kPlaceAuto;
    req.gpu_budget = (whole.gpu_weights + whole.gpu_context) * 2 / 3;
    const PlacementPlan p = plan_placement(d, gpu(), cp, req);
    // Experts move to the CPU before any layer does.
    assert_int_equal(p.gpu_layers, d.n_layer);
    assert_true(p.experts_on_cpu > 0);
}

// Resident memory of this process, bytes.
uint64_t rss_bytes() {
    std::FILE *f = std::fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (!f) return 0;
    const int n = std::fscanf(f, "%lu %lu", &size, &resident);
    std::fclose(f);
    return n == 2 ? uint64_t{resident} * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

void test_estimate_matches_rss(void **) {
    // A split placement's estimate (weights of each part, each part's context) against what the process
    // takes once a session on it has run: both parts are host memory where the CPU stands in for the GPU.
    // A GPU's part is device memory, not RSS; a sanitizer's shadow memory and quarantine are resident too.
    if (g_gpu != EMBER_BACKEND_CPU || kSanitized) return;
    SyntheticSpec spec;
    spec.n_layer = 8, spec.n_embd = 768, spec.n_head = 12, spec.n_head_kv = 4, spec.n_ff = 2048, spec.n_vocab = 512;
    spec.type = DType::Q8_0;
    spec.tied_output = false;   // (a tied matrix would be counted in both parts but resident once)
    // Measured from before the load (pages of the file it touches count) with the allocator's free memory
    // given back, so that what the session allocates shows as new pages rather than reused ones.
    malloc_trim(0);
    const uint64_t before = rss_bytes();
    auto m = load_synthetic(spec);
    malloc_trim(0);   // (the file's bytes, written and freed by load_synthetic)
    const uint32_t n = m->desc().hp.n_layer;
    SessionOptions o = options(nullptr);
    o.n_ctx = 256, o.n_batch = 64, o.n_threads = 2;
    ContextParams cp;
    cp.n_blocks = o.n_ctx / 16 + 1, cp.n_batch = o.n_batch, cp.n_logits = o.n_batch, cp.n_threads = 2;
    PlacementRequest req;
    req.gpu_layers = static_cast<int32_t>(n / 2);
    req.gpu_budget = UINT64_MAX / 2;
    const PlacementPlan plan = plan_placement(m->desc().c, gpu(), cp, req);
    const uint64_t estimate = plan.gpu_weights + plan.gpu_context + plan.cpu_weights + plan.cpu_context;
    {
        o.placed = plan.backend;
        Session s(*m, o);

        // The whole context: every weight read, every buffer and cache row written (untouched pages are
        // not resident, so a shorter run measures less than what the placement holds).
        const std::vector<int32_t> p = prompt(o.n_ctx - 1, m->desc().hp.n_vocab);
        s.feed(p.data(), p.size());
        const uint64_t used = rss_bytes() - before;

        const double ratio = static_cast<double>(used) / static_cast<double>(estimate);
        std::printf("split estimate %.1f MiB, measured RSS %.1f MiB (%.3f)\n", estimate / 1048576.0, used / 1048576.0, ratio);
        assert_true(ratio > 0.95 && ratio < 1.05);
    }
}

} // namespace

int main(int argc, char **argv) {
    if (const int rc = test_backend_arg(argc, argv, &g_gpu); rc >= 0) return rc;
    const struct CMUnitTest tests[] = {
        // First: memory the other cases free stays with the allocator, and reused it would not show in RSS.
        cmocka_unit_test(test_estimate_matches_rss),
        cmocka_unit_test(test_split_parts),
        cmocka_unit_test(test_split_every_boundary),
        cmocka_unit_test(test_experts_on_cpu),
        cmocka_unit_test(test_hybrid_state_split),
        cmocka_unit_test(test_window_layers_split),
        cmocka_unit_test(test_save_restore_across_placements),
        cmocka_unit_test(test_fork_and_cancel),
        cmocka_unit_test(test_engine_eight_requests),
        cmocka_unit_test(test_fit),
        cmocka_unit_test(test_fit_moe_experts_first),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
