// test_alloc_failure.cpp — running out of memory, through the public ABI: every fallible call returns
// EMBER_OK or EMBER_ERR_OUT_OF_MEMORY (never another status, never a crash), leaves its out-handle NULL
// when it fails, and everything it had allocated is freed again (the live-allocation count of this
// program returns to where it was; the ASan build's leak checker checks the same at exit). A request
// whose step runs out of memory on the engine's worker thread ends FAILED with EMBER_ERR_OUT_OF_MEMORY.
//
// The allocator hook is this program's own operator new (it replaces the one libember would call; the
// library allocates through the C++ containers, so that is all of its heap). It fails either the N-th
// allocation (each N in turn, as SQLite's fault injection does), every allocation from the N-th on
// (memory stays short while the error is reported and the call unwinds), or every allocation above a
// size limit (an n_ctx or KV budget that does not fit). Free functions are not injected: they run
// disarmed, as an application's cleanup would after its own allocation failed.
#include "test_util.h"

#include <ember/ember.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace {

// -1: no injected failures. Otherwise the number of allocations on the armed thread still to succeed.
thread_local long t_countdown = -1;
thread_local bool t_persistent = false;   // once one failed, fail all that follow
thread_local bool t_paused = false;       // the test's own allocations are never failed
thread_local bool t_fired = false;        // a failure was injected since arm()
std::atomic<size_t> g_size_limit{0};      // 0: none
std::atomic<long> g_any_countdown{-1};    // the same as t_countdown for allocations on any thread (one-shot)
std::atomic<bool> g_any_fired{false};
std::atomic<long> g_live{0};              // blocks allocated and not yet freed, all threads

void *allocate(size_t n) {
    if (t_countdown >= 0 && !t_paused) {
        if (t_countdown == 0) {
            t_fired = true;
            if (!t_persistent) t_countdown = -1;   // one-shot: the allocations after it succeed
            throw std::bad_alloc();
        }
        --t_countdown;
    }
    for (long c = g_any_countdown.load(); c >= 0 && !t_paused;) {
        if (g_any_countdown.compare_exchange_weak(c, c - 1)) {
            if (c == 0) {
                g_any_fired = true;
                throw std::bad_alloc();
            }
            break;
        }
    }
    const size_t limit = g_size_limit.load(std::memory_order_relaxed);
    if (limit && n > limit) throw std::bad_alloc();
    void *p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    g_live.fetch_add(1, std::memory_order_relaxed);
    return p;
}

void release(void *p) {
    if (!p) return;
    g_live.fetch_sub(1, std::memory_order_relaxed);
    std::free(p);
}

void arm(long n, bool persistent) {
    t_countdown = n;
    t_persistent = persistent;
    t_fired = false;
}

void disarm() { t_countdown = -1; }

// Allocations of the test itself (outside the library) while armed.
struct Paused {
    Paused() { t_paused = true; }
    ~Paused() { t_paused = false; }
};

} // namespace

// The replaceable global allocation functions (aligned ones are left to the C++ runtime: they come in
// pairs, and nothing of ember's that can fail asks for more than the default alignment in a loop).
void *operator new(size_t n) { return allocate(n); }
void *operator new[](size_t n) { return allocate(n); }
void *operator new(size_t n, const std::nothrow_t &) noexcept {
    try {
        return allocate(n);
    } catch (...) {
        return nullptr;
    }
}
void *operator new[](size_t n, const std::nothrow_t &) noexcept {
    try {
        return allocate(n);
    } catch (...) {
        return nullptr;
    }
}
void operator delete(void *p) noexcept { release(p); }
void operator delete[](void *p) noexcept { release(p); }
void operator delete(void *p, size_t) noexcept { release(p); }
void operator delete[](void *p, size_t) noexcept { release(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { release(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { release(p); }

namespace {

std::string g_model_path;

const char *model_path() {
    if (g_model_path.empty()) {
        const char *p = test_find_model("stories260K.gguf", "stories260K/stories260K.gguf");
        test_require(p, "stories260K.gguf");
        g_model_path = p;
    }
    return g_model_path.c_str();
}

// One pass over the library's fallible calls. Returns true when every call succeeded, false when one
// ran out of memory (then it stops and frees what it made); any other outcome fails the test.
struct Outcome {
    bool completed = true;
    const char *where = nullptr;
};

bool check(ember_status st, const char *what, Outcome &o) {
    if (st == EMBER_OK || st == EMBER_END_OF_GENERATION) return true;
    if (st != EMBER_ERR_OUT_OF_MEMORY) {
        fail_msg("%s returned %s (%s); only EMBER_OK or EMBER_ERR_OUT_OF_MEMORY are expected", what,
                 ember_status_string(st), ember_last_error());
    }
    if (std::strlen(ember_last_error()) == 0) fail_msg("%s: out of memory without a message", what);
    o.completed = false;
    o.where = what;
    return false;
}

Outcome scenario(long fail_at = -1, bool persistent = false) {
    Outcome o;
    ember_model *model = reinterpret_cast<ember_model *>(1);
    ember_session *session = nullptr, *fork = nullptr;
    ember_sampler *sampler = nullptr;
    ember_engine *engine = nullptr;
    ember_request *request = nullptr;
    std::vector<unsigned char> state;
    std::vector<ember_token> tokens(64);
    size_t n = 0, len = 0;
    char text[256];
    ember_session_params sp;
    ember_engine_params ep;
    ember_request_params rp;
    ember_sampler_params smp;
    ember_model_params mp;
    const char *prompt = "Once upon a time, there was a little girl";

    state.reserve(1 << 16);
    arm(fail_at, persistent);
    ember_model_params_init(&mp);
    const ember_status load = ember_model_load(model_path(), &mp, &model);
    if (load != EMBER_OK && model) fail_msg("a failed load left *out non-NULL");
    if (!check(load, "ember_model_load", o)) goto done;
    if (!check(ember_tokenize(model, prompt, std::strlen(prompt), EMBER_TOKENIZE_ADD_SPECIAL, tokens.data(),
                              tokens.size(), &n), "ember_tokenize", o))
        goto done;
    if (!check(ember_detokenize(model, tokens.data(), n, 0, text, sizeof text, &len), "ember_detokenize", o)) goto done;

    ember_session_params_init(&sp);
    sp.n_ctx = 64;
    // Three threads: the CPU backend's pool starts two worker threads, whose creation is an injection
    // point too; when the second cannot start, the first must be stopped and joined.
    sp.n_threads = 3;
    sp.n_seq_max = 2;
    {
        const ember_status st = ember_session_create(model, &sp, &session);
        if (st != EMBER_OK && session) fail_msg("a failed ember_session_create left *out non-NULL");
        if (!check(st, "ember_session_create", o)) goto done;
    }
    if (!check(ember_session_feed(session, tokens.data(), n), "ember_session_feed", o)) goto done;
    ember_sampler_params_init(&smp);
    smp.temperature = 0;
    if (!check(ember_sampler_create(&smp, &sampler), "ember_sampler_create", o)) goto done;
    for (int i = 0; i < 4; ++i) {
        ember_token t;
        const char *piece;
        size_t piece_len;
        if (!check(ember_generate_next(session, sampler, &t, &piece, &piece_len), "ember_generate_next", o)) goto done;
    }
    if (!check(ember_session_save(session, nullptr, 0, &len), "ember_session_save (size)", o)) goto done;
    {
        Paused p;
        state.resize(len);
    }
    if (!check(ember_session_save(session, state.data(), state.size(), &len), "ember_session_save", o)) goto done;
    if (!check(ember_session_restore(session, state.data(), state.size()), "ember_session_restore", o)) goto done;
    if (!check(ember_session_fork(session, &fork), "ember_session_fork", o)) goto done;
    if (!check(ember_session_feed(fork, tokens.data() + 1, 3), "ember_session_feed (fork)", o)) goto done;

    ember_engine_params_init(&ep);
    ep.n_ctx = 64;
    ep.n_seq_max = 2;
    ep.n_threads = 1;
    ep.manual_step = true;
    {
        const ember_status st = ember_engine_create(model, &ep, &engine);
        if (st != EMBER_OK && engine) fail_msg("a failed ember_engine_create left *out non-NULL");
        if (!check(st, "ember_engine_create", o)) goto done;
    }
    ember_request_params_init(&rp);
    rp.prompt = tokens.data();
    rp.n_prompt = n;
    rp.max_tokens = 4;
    if (!check(ember_request_submit(engine, &rp, &request), "ember_request_submit", o)) goto done;
    for (int i = 0; i < 16; ++i) {
        bool busy = false;
        if (!check(ember_engine_step(engine, &busy), "ember_engine_step", o)) goto done;
        if (!busy) break;
    }
    {
        ember_request_state rs;
        ember_token got[8];
        if (!check(ember_request_poll(request, got, 8, &n, &rs), "ember_request_poll", o)) goto done;
        // A step that ran out of memory fails the requests it carried, with that status.
        if (rs == EMBER_REQUEST_FAILED) {
            ember_status why = EMBER_OK;
            ember_request_error(request, &why, nullptr);
            if (!check(why, "the request", o)) goto done;
        }
    }
    if (!check(ember_request_text(request, text, sizeof text, &len), "ember_request_text", o)) goto done;

done:
    disarm();   // frees are not injected: they cannot report a failure (docs/reliability.md, known gaps)
    ember_request_free(request);
    ember_engine_free(engine);
    ember_sampler_free(sampler);
    ember_session_free(fork);
    ember_session_free(session);
    if (model != reinterpret_cast<ember_model *>(1)) ember_model_free(model);
    return o;
}

// Warm-up: whatever the library allocates once per process (the backend registry, this thread's error
// message) is allocated before blocks are counted.
long warm_up() {
    ember_model *m = nullptr;
    ember_model_load("/nonexistent/a/path/long/enough/for/the/message/to/live/on/the/heap.gguf", nullptr, &m);
    if (!scenario().completed) fail_msg("the scenario fails without injected failures");
    return g_live.load();
}

void run_injection(bool persistent) {
    const long base = warm_up();
    long n = 0, failures = 0, recovered = 0;
    for (;; ++n) {
        const Outcome o = scenario(n, persistent);
        const long live = g_live.load();
        if (live != base)
            fail_msg("failing allocation %ld (%s) leaked %ld blocks", n, o.where ? o.where : "completed", live - base);
        if (!t_fired) break;   // the scenario made fewer than n + 1 allocations: every one was tried
        if (o.completed) ++recovered;
        else ++failures;
    }
    std::printf("%s failures: each of the scenario's %ld allocations failed in turn; it stopped with "
                "EMBER_ERR_OUT_OF_MEMORY %ld times and recovered to completion %ld times\n",
                persistent ? "persistent" : "one-shot", n, failures, recovered);
    if (failures < 50) fail_msg("too few injection points (%ld): is the hook in use?", failures);
}

void test_one_shot_failures(void **) { run_injection(false); }

// The engine's worker thread: a step that runs out of memory fails the requests it carried with
// EMBER_ERR_OUT_OF_MEMORY, and the engine goes on serving the next ones.
void test_engine_worker_failures(void **) {
    const long base = warm_up();
    ember_model *m = nullptr;
    if (ember_model_load(model_path(), nullptr, &m) != EMBER_OK) fail_msg("load: %s", ember_last_error());
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 64;
    ep.n_threads = 1;
    ember_engine *e = nullptr;
    assert_int_equal(ember_engine_create(m, &ep, &e), EMBER_OK);
    ember_token prompt[32];
    size_t n_prompt = 0;
    const char *text = "Once upon a time, there was a little girl named Lily. She";
    assert_int_equal(ember_tokenize(m, text, std::strlen(text), EMBER_TOKENIZE_ADD_SPECIAL, prompt, 32, &n_prompt),
                     EMBER_OK);
    long n = 0, refused = 0, failed = 0, done = 0;
    for (;; ++n) {
        ember_request_params rp;
        ember_request_params_init(&rp);
        rp.prompt = prompt;
        rp.n_prompt = n_prompt;
        rp.max_tokens = 20;   // past a block boundary: cached blocks are published and released
        ember_request *r = nullptr;
        g_any_fired = false;
        g_any_countdown = n;
        const ember_status st = ember_request_submit(e, &rp, &r);
        if (st != EMBER_OK) {
            g_any_countdown = -1;
            assert_int_equal(st, EMBER_ERR_OUT_OF_MEMORY);
            assert_null(r);
            ++refused;
            continue;
        }
        assert_int_equal(ember_request_wait(r, UINT32_MAX), EMBER_OK);
        g_any_countdown = -1;
        ember_request_state rs;
        size_t count = 0;
        assert_int_equal(ember_request_poll(r, nullptr, 0, &count, &rs), EMBER_OK);
        if (rs == EMBER_REQUEST_FAILED) {
            ember_status why = EMBER_OK;
            const char *msg = nullptr;
            assert_int_equal(ember_request_error(r, &why, &msg), EMBER_OK);
            if (why != EMBER_ERR_OUT_OF_MEMORY) fail_msg("a request failed with %s: %s", ember_status_string(why), msg);
            ++failed;
        } else {
            assert_int_equal(rs, EMBER_REQUEST_DONE);
            ++done;
        }
        ember_request_free(r);
        if (!g_any_fired) break;
    }
    std::printf("engine worker: %ld injection points; submit refused %ld, requests failed with "
                "EMBER_ERR_OUT_OF_MEMORY %ld, completed %ld\n", n, refused, failed, done);
    if (failed < 5) fail_msg("too few failed steps (%ld)", failed);
    ember_engine_free(e);
    ember_model_free(m);
    assert_int_equal(g_live.load(), base);
}

void test_persistent_failures(void **) { run_injection(true); }

// A size limit: allocations over 64 MiB fail, as they would on a machine without that memory. On the
// CPU backend, named here: it keeps the KV cache in host memory, which this program's operator new
// sees. A GPU backend (what AUTO picks on a machine with one) puts the cache in device memory, which the
// hook never sees, so the same calls would rightly succeed there.
void test_size_limit(void **) {
    const long base = warm_up();
    ember_model *m = nullptr;
    if (ember_model_load(model_path(), nullptr, &m) != EMBER_OK) fail_msg("load: %s", ember_last_error());
    g_size_limit = size_t{64} << 20;
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = 1u << 20;   // 640 MiB of KV cache for stories260K
    sp.n_threads = 1;
    sp.backend = EMBER_BACKEND_CPU;
    ember_session *s = reinterpret_cast<ember_session *>(1);
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_ERR_OUT_OF_MEMORY);
    assert_null(s);
    assert_non_null(std::strstr(ember_last_error(), "out of memory"));
    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_ctx = 2048;
    ep.kv_bytes = uint64_t{1} << 30;
    ep.manual_step = true;
    ep.backend = EMBER_BACKEND_CPU;
    ember_engine *e = reinterpret_cast<ember_engine *>(1);
    assert_int_equal(ember_engine_create(m, &ep, &e), EMBER_ERR_OUT_OF_MEMORY);
    assert_null(e);
    // Within the limit, the same calls work.
    sp.n_ctx = 256;
    assert_int_equal(ember_session_create(m, &sp, &s), EMBER_OK);
    ember_session_free(s);
    g_size_limit = 0;
    ember_model_free(m);
    assert_int_equal(g_live.load(), base);
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_shot_failures),
        cmocka_unit_test(test_persistent_failures),
        cmocka_unit_test(test_engine_worker_failures),
        cmocka_unit_test(test_size_limit),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
