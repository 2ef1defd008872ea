// test_kept_states.cpp — per-token recurrent states (Session::feed's keep_states, module_api.h's
// state_keep): a feed that keeps them lets truncate() to a position inside it take the kept state with no
// forward pass, and what it leaves — KV rows, recurrent state, the logits of what is fed next — is bit for
// bit what re-feeding gives on the CPU, for the three kinds of recurrent layer (Gated DeltaNet with its
// causal convolution: qwen35, qwen35moe; LFM2's short convolution; Granite 4's Mamba-2 scan), across
// passes (n_batch smaller than the feed), past the last kept state (re-feeding from it), and after a
// cancelled feed (which leaves no state to take). `test_kept_states vulkan` (or `cuda`) runs a part of it
// on that backend (on lavapipe the kept states are the same bits as re-feeding's too).
#include "test_util.h"

#include "core/error.hpp"
#include "session/session.hpp"
#include "synthetic_model.hpp"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace ember;

namespace {

constexpr uint32_t kPrompt = 9, kVerify = 6;

std::vector<int32_t> tokens(uint32_t n, uint32_t n_vocab, uint32_t salt) {
    std::vector<int32_t> t(n);
    for (uint32_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 11 + 5 + salt * 17) % n_vocab);
    return t;
}

ember_backend_kind g_backend = EMBER_BACKEND_CPU;

SessionOptions options(uint32_t kept, uint32_t n_batch) {
    SessionOptions o;
    o.n_ctx = 64;
    o.n_threads = 2;
    o.n_batch = n_batch;
    o.backend = g_backend;
    o.kept_states = kept;
    return o;
}

// The prompt, then a verifying feed of kVerify tokens (keeping states when kept > 0), truncated to
// kPrompt + keep, then one more token: the saved state and the logits after it.
struct After {
    std::vector<uint8_t> saved;
    std::vector<float> logits;
    uint64_t truncate_passes = 0;
};

After run(const Model &m, uint32_t kept, uint32_t n_batch, uint32_t keep) {
    const uint32_t nv = m.desc().hp.n_vocab;
    const std::vector<int32_t> p = tokens(kPrompt, nv, 1), v = tokens(kVerify, nv, 2);
    Session s(m, options(kept, n_batch));
    assert_int_equal(s.kept_states(), kept);
    s.feed(p.data(), p.size());
    std::vector<float> rows(size_t{kVerify} * nv);
    s.feed(v.data(), v.size(), rows.data(), nullptr, kept > 0);
    const uint64_t before = s.passes();
    s.truncate(kPrompt + keep, rows.data() + size_t{keep - 1} * nv);
    After a;
    a.truncate_passes = s.passes() - before;
    // The truncated session's logits are the verifying pass's row: equal to re-feeding's by construction;
    // what must agree is what comes next.
    const int32_t next = static_cast<int32_t>((keep * 29 + 3) % nv);
    s.feed(&next, 1);
    a.logits.assign(s.logits(), s.logits() + nv);
    a.saved = s.save();
    return a;
}

void check_family(const char *family) {
    const auto model = load_synthetic(synthetic_family(family));
    // On Vulkan (lavapipe: slow) one pass size, and a kept state taken and one re-fed from.
    const bool gpu = g_backend != EMBER_BACKEND_CPU;
    for (uint32_t n_batch : {256u, 4u}) {
        if (gpu && n_batch != 256) continue;
        for (uint32_t keep = 1; keep < kVerify; ++keep) {
            if (gpu && keep != 2 && keep != 4) continue;
            const After want = run(*model, 0, n_batch, keep);   // re-feeds from the verifying feed's start
            assert_int_equal(want.truncate_passes, (keep + n_batch - 1) / n_batch);
            for (uint32_t kept : {4u, 2u}) {
                if (gpu && kept != 2) continue;
                const After got = run(*model, kept, n_batch, keep);
                // The kept state at keep when there is one (no pass), else re-feeding from the last one kept.
                const uint32_t refed = keep <= kept ? 0 : keep - kept;
                assert_int_equal(got.truncate_passes, (refed + n_batch - 1) / n_batch);
                if (got.saved != want.saved)
                    fail_msg("%s, n_batch %u, kept %u: truncating to keep %u leaves other bytes than re-feeding", family,
                             n_batch, kept, keep);
                assert_memory_equal(got.logits.data(), want.logits.data(), want.logits.size() * sizeof(float));
            }
        }
    }
}

void test_qwen35(void **) { check_family("qwen35"); }
void test_qwen35moe(void **) { check_family("qwen35moe"); }
void test_lfm2(void **) { check_family("lfm2"); }
void test_granitehybrid(void **) { check_family("granitehybrid"); }

// A feed without keep_states, a truncation, or a cancelled feed leaves no kept state to take: truncating
// then re-feeds (and gives the same bits).
void test_kept_states_are_the_last_feeds(void **) {
    const auto model = load_synthetic(synthetic_family("qwen35"));
    const uint32_t nv = model->desc().hp.n_vocab;
    const std::vector<int32_t> p = tokens(kPrompt, nv, 1), v = tokens(kVerify, nv, 2);
    Session s(*model, options(4, 256));
    s.feed(p.data(), p.size());
    s.feed(v.data(), v.size(), nullptr, nullptr, true);
    const int32_t one = 3;
    s.feed(&one, 1);   // a plain feed after it: its start is the checkpoint, nothing kept
    uint64_t before = s.passes();
    s.truncate(kPrompt + 2);
    assert_int_equal(s.passes() - before, 1u);   // from position 0: one pass of kPrompt + 2 tokens

    s.feed(v.data(), v.size(), nullptr, nullptr, true);
    std::atomic<bool> cancel{true};
    try {
        s.feed(&one, 1, nullptr, &cancel, true);
        fail_msg("a cancelled feed went through");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_CANCELLED);
    }
    before = s.passes();
    s.truncate(kPrompt + 2 + 3);
    assert_int_equal(s.passes() - before, 1u);   // the cancelled feed took the verifying feed's states away
}

// A model without recurrent layers keeps none (the flag is ignored).
void test_attention_model_keeps_none(void **) {
    const auto model = load_synthetic(synthetic_family("llama"));
    Session s(*model, options(4, 256));
    assert_int_equal(s.kept_states(), 0u);
    const std::vector<int32_t> v = tokens(kVerify, model->desc().hp.n_vocab, 2);
    s.feed(v.data(), v.size(), nullptr, nullptr, true);
    const uint64_t before = s.passes();
    s.truncate(2);
    assert_int_equal(s.passes(), before);
}

} // namespace

int main(int argc, char **argv) {
    if (argc > 1 && (std::strcmp(argv[1], "vulkan") == 0 || std::strcmp(argv[1], "cuda") == 0)) {
        // The same checks on a GPU backend (Vulkan: lavapipe here), where one is present.
        g_backend = std::strcmp(argv[1], "cuda") == 0 ? EMBER_BACKEND_CUDA : EMBER_BACKEND_VULKAN;
        try {
            const auto model = load_synthetic(synthetic_family("llama"));
            Session s(*model, options(0, 256));
        } catch (const Error &e) {
            return std::printf("SKIP: no %s backend here: %s\n", argv[1], e.what()), EMBER_TEST_SKIP;
        }
    }
    if (g_backend != EMBER_BACKEND_CPU) {
        const struct CMUnitTest gpu_tests[] = {
            cmocka_unit_test(test_qwen35),
            cmocka_unit_test(test_lfm2),
            cmocka_unit_test(test_granitehybrid),
        };
        return cmocka_run_group_tests(gpu_tests, nullptr, nullptr);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen35),
        cmocka_unit_test(test_qwen35moe),
        cmocka_unit_test(test_lfm2),
        cmocka_unit_test(test_granitehybrid),
        cmocka_unit_test(test_kept_states_are_the_last_feeds),
        cmocka_unit_test(test_attention_model_keeps_none),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
