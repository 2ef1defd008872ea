// test_window_kv.cpp — sliding-window layers' K/V rows in blocks of their own (kv/window_table.hpp, the
// CPU backend's window pool): a session's window memory stays bounded however long it runs, and every
// logit is bit for bit what the session gives with every layer's rows in the main blocks — through long
// prompts and decode, truncation within and past the kept history, forks, and saved states moved between
// the two layouts. Synthetic Gemma 2 and gpt-oss (window 4) and Gemma 3 (five window layers, one global).
//
// With an argument ("vulkan", "cuda") the same on that backend's module (skipped, 77 with the reason,
// where it cannot run), compared with the same backend's single-pool run, and with shorter sequences
// (lavapipe is slow); each checks too that the window pool shrinks the context's device memory.
#include "backend_arg.hpp"
#include "synthetic_model.hpp"
#include "test_util.h"

#include "backend/backend.hpp"
#include "kv/window_table.hpp"
#include "model/model.hpp"
#include "session/session.hpp"
#include "testing/synthetic.hpp"

#include "core/error.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace ember;

namespace {

constexpr uint32_t kCtx = 1024, kBatch = 16;

// The backend under test, and how long its sequences are: every length is past the window and the kept
// history (4 - 1 + 64 positions), so blocks are released on every backend; the CPU's runs are longer.
ember_backend_kind g_backend = EMBER_BACKEND_CPU;
struct Lengths {
    size_t run, prompt;           // test_bounded_and_bit_identical: tokens in all, of which the prompt
    size_t total, first_prompt;   // test_truncate_fork_restore: the sequence, its first prompt
    size_t deep, deep_prompt;     // ... truncated (past the kept history) to deep, then a prompt of deep_prompt
    size_t fork_extra, more;      // ... a fork's own tokens; tokens fed after the saved states' restore
    size_t cancelled_feed;        // test_cancelled_feed_rolls_back: the feed that is cancelled
};
constexpr Lengths kCpuLengths{600, 200, 500, 300, 100, 150, 60, 40, 900};
constexpr Lengths kGpuLengths{180, 100, 240, 160, 40, 150, 30, 12, 400};
Lengths g_len = kCpuLengths;

std::vector<int32_t> token_run(size_t n) {
    std::vector<int32_t> t(n);
    for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 11) % 300);
    return t;
}

SessionOptions options(bool window_blocks, DType kv_type = DType::F16) {
    SessionOptions o;
    o.kv_type = kv_type;
    o.n_ctx = kCtx;
    o.n_batch = kBatch;
    o.n_threads = 1;
    o.window_blocks = window_blocks;
    o.backend = g_backend;
    return o;
}

void assert_same_logits(const Session &a, const Session &b) {
    assert_non_null(a.logits());
    assert_non_null(b.logits());
    assert_memory_equal(a.logits(), b.logits(), a.n_vocab() * sizeof(float));
}

// Feeds both sessions the same tokens (a prompt, then one at a time) and compares every step's logits;
// the window table never holds more than its pool, and stops growing once it is past the window.
void run_both(Session &split, Session &flat, const std::vector<int32_t> &t, size_t from, size_t prompt) {
    split.feed(t.data() + from, prompt);
    flat.feed(t.data() + from, prompt);
    assert_same_logits(split, flat);
    for (size_t i = from + prompt; i < t.size(); ++i) {
        split.feed(&t[i], 1);
        flat.feed(&t[i], 1);
        assert_same_logits(split, flat);
        assert_true(split.window_blocks_held() <= split.window_pool_blocks());
    }
}

void test_bounded_and_bit_identical(void **) {
    for (const char *family : {"gemma2", "gemma3", "gpt-oss"}) {
        auto model = load_synthetic(synthetic_family(family));
        Session split(*model, options(true)), flat(*model, options(false));
        assert_int_equal(flat.window_pool_blocks(), 0);
        const uint32_t per_seq = kv::WindowTable::blocks_per_sequence(4, 64, kBatch, kv::kBlockSize);
        assert_int_equal(split.window_pool_blocks(), 2 * per_seq);   // vs 65 main blocks
        // The window layers' caches are sized by the pool, not the context: the context (device memory on
        // a GPU) shrinks by their rows of the main blocks the pool does not have.
        assert_int_equal(split.backend_kind(), g_backend);
        std::printf("%s: context %llu bytes with the window pool, %llu without\n", family,
                    static_cast<unsigned long long>(split.context_bytes()), static_cast<unsigned long long>(flat.context_bytes()));
        assert_true(split.context_bytes() < flat.context_bytes());
        const std::vector<int32_t> t = token_run(g_len.run);
        run_both(split, flat, t, 0, g_len.prompt);
        // Past the window and the kept history, the run holds what its prompt did: (3 + 64) back, one block more.
        assert_true(split.window_blocks_held() <= (4 - 1 + 64 + 15) / 16 + 1);
        assert_int_equal(split.position(), g_len.run);
    }
}

// The same with a quantized cache (rows of 128 values: four blocks each), Gemma 3's layout.
void quantized_cache_case(DType type) {
    auto model = load_synthetic(synthetic_family("gemma3"));
    Session split(*model, options(true, type)), flat(*model, options(false, type));
    assert_true(split.window_pool_blocks() > 0);
    assert_true(split.context_bytes() < flat.context_bytes());
    const std::vector<int32_t> t = token_run(g_len.run);
    run_both(split, flat, t, 0, g_len.prompt);
    assert_true(split.window_blocks_held() <= (4 - 1 + 64 + 15) / 16 + 1);
}
void test_q8_0_cache(void **) { quantized_cache_case(DType::Q8_0); }
void test_q4_0_cache(void **) { quantized_cache_case(DType::Q4_0); }

void test_truncate_fork_restore(void **) {
    auto model = load_synthetic(synthetic_family("gemma2"));
    const size_t total = g_len.total;
    const std::vector<int32_t> t = token_run(total);
    Session split(*model, options(true)), flat(*model, options(false));
    run_both(split, flat, t, 0, g_len.first_prompt);
    // Within the kept history (a speculative rollback): no re-evaluation needed.
    split.truncate(static_cast<uint32_t>(total - 20));
    flat.truncate(static_cast<uint32_t>(total - 20));
    run_both(split, flat, t, total - 20, 10);
    // Past it: the window layers' rows are gone, the session evaluates the kept tokens again.
    split.truncate(static_cast<uint32_t>(g_len.deep));
    flat.truncate(static_cast<uint32_t>(g_len.deep));
    assert_int_equal(split.position(), g_len.deep);
    assert_null(split.logits());   // as after any truncate
    run_both(split, flat, t, g_len.deep, g_len.deep_prompt);

    // A fork continues from the shared history; the parent is untouched by it.
    auto child = split.fork();
    auto flat_child = flat.fork();
    std::vector<int32_t> other = token_run(total + g_len.fork_extra);
    for (size_t i = total; i < other.size(); ++i) other[i] = static_cast<int32_t>((i * 13 + 5) % 300);
    run_both(*child, *flat_child, other, total, g_len.fork_extra);
    split.feed(t.data(), 5);
    flat.feed(t.data(), 5);
    assert_same_logits(split, flat);

    // A saved state moves between the layouts both ways, and goes on giving the same logits.
    const std::vector<uint8_t> saved = child->save(), saved_flat = flat_child->save();
    Session into_flat(*model, options(false)), into_split(*model, options(true));
    into_flat.restore(saved.data(), saved.size());
    into_split.restore(saved_flat.data(), saved_flat.size());
    assert_true(into_split.window_blocks_held() <= (4 - 1 + 64 + 15) / 16 + 1);
    std::vector<int32_t> more = token_run(g_len.more);
    for (size_t i = 0; i < more.size(); ++i) {
        for (Session *s : {child.get(), flat_child.get(), &into_flat, &into_split}) s->feed(&more[i], 1);
        assert_same_logits(*child, *flat_child);
        assert_same_logits(into_flat, *flat_child);
        assert_same_logits(into_split, *flat_child);
    }
}

// A long feed cancelled part way has released window blocks behind it, yet rolls back to where it started
// (the window rows are rebuilt on next use) and goes on as if it never ran, as do a fork and a saved state. The cancel comes from another thread after a
// delay, so a try may land before the first pass or after the last: several delays, one must land inside.
void test_cancelled_feed_rolls_back(void **) {
    auto model = load_synthetic(synthetic_family("gemma2"));
    const std::vector<int32_t> t = token_run(100 + g_len.cancelled_feed);
    int mid_feed = 0;
    for (int delay_us : {200, 1000, 3000, 10000, 30000}) {
        if (mid_feed > 0 && g_backend != EMBER_BACKEND_CPU) break;   // one is enough where passes are slow
        Session split(*model, options(true)), flat(*model, options(false));
        split.feed(t.data(), 100);
        flat.feed(t.data(), 100);
        std::atomic<bool> cancel{false};
        std::thread canceller([&] {
            std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
            cancel = true;
        });
        bool cancelled = false;
        try {
            split.feed(t.data() + 100, g_len.cancelled_feed, nullptr, &cancel);
        } catch (const Error &e) {
            assert_int_equal(e.status(), EMBER_ERR_CANCELLED);
            cancelled = true;
        }
        canceller.join();
        if (!cancelled) continue;
        assert_int_equal(split.position(), 100);
        assert_same_logits(split, flat);   // the old logits survive a cancellation
        // A fork and a saved state of the rolled-back session carry on as the session does.
        auto child = split.fork();
        const std::vector<uint8_t> saved = split.save();
        Session restored(*model, options(true));
        restored.restore(saved.data(), saved.size());
        assert_same_logits(restored, flat);
        auto flat_child = flat.fork();
        const std::vector<int32_t> head(t.begin(), t.begin() + 160);   // 40 tokens of prompt, 20 of decode
        run_both(split, flat, head, 100, 40);
        run_both(*child, *flat_child, head, 100, 40);
        Session flat2(*model, options(false));
        flat2.feed(t.data(), 100);
        run_both(restored, flat2, head, 100, 40);
        ++mid_feed;
    }
    assert_true(mid_feed > 0);
}

} // namespace

int main(int argc, char **argv) {
    if (const int rc = test_backend_arg(argc, argv, &g_backend); rc >= 0) return rc;
    if (g_backend != EMBER_BACKEND_CPU) g_len = kGpuLengths;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounded_and_bit_identical),
        cmocka_unit_test(test_q8_0_cache),
        cmocka_unit_test(test_q4_0_cache),
        cmocka_unit_test(test_truncate_fork_restore),
        cmocka_unit_test(test_cancelled_feed_rolls_back),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
