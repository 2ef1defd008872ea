// threadpool.hpp — the CPU backend's persistent worker threads.
//
// Why not std::async or a task queue: a decode step of a small model runs ~50 parallel ops of a few
// microseconds each, so dispatch latency dominates. Workers spin on an atomic generation counter for a
// short while after each job (then sleep on a condition variable), and the calling thread takes part
// as thread 0, so a dispatch costs well under a microsecond while work keeps coming (~0.25 us measured
// on 2 cores). A pool with more threads than usable CPUs does not spin (see threadpool.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ember::cpu {

class ThreadPool {
public:
    // n_threads >= 1 counts the caller: n_threads - 1 workers are started.
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int size() const { return n_threads_; }

    // Calls fn(ith, nth) once on each of the nth = size() threads (ith = 0 on the caller) and returns
    // when all calls have returned. fn must not throw. Not reentrant (fn must not call run on the same
    // pool), but callers on different threads may share a pool: their runs take turns.
    template <class F>
    void run(F &&fn) {
        // remove_reference: F is an lvalue reference when fn is a named callable.
        using Callable = std::remove_reference_t<F>;
        run_impl([](void *ctx, int ith, int nth) { (*static_cast<Callable *>(ctx))(ith, nth); },
                 const_cast<void *>(static_cast<const void *>(&fn)));
    }

    // Splits [0, n) into contiguous chunks, one per thread, and calls fn(begin, end) for non-empty ones.
    template <class F>
    void parallel_for(int64_t n, F &&fn) {
        run([&](int ith, int nth) {
            const int64_t per = (n + nth - 1) / nth;
            const int64_t b = per * ith;
            const int64_t e = b + per < n ? b + per : n;
            if (b < e) fn(b, e);
        });
    }

private:
    void stop_workers();   // wakes every started worker with stop_ set and joins it
    using Fn = void (*)(void *ctx, int ith, int nth);
    void run_impl(Fn fn, void *ctx);
    void worker(int ith);
    // Waits until generation_ differs from `seen` (spinning first, then sleeping); returns the new value.
    uint64_t wait_for_job(uint64_t seen);

    int n_threads_;
    std::vector<std::thread> workers_;
    Fn fn_ = nullptr;
    void *ctx_ = nullptr;
    alignas(64) std::atomic<uint64_t> generation_{0};
    alignas(64) std::atomic<int> pending_{0};
    std::atomic<bool> stop_{false};
    std::mutex run_mutex_;             // one run at a time (contexts may share a pool, see backend.hpp)
    std::mutex mutex_;
    std::condition_variable cv_;       // workers sleep here between jobs
    std::condition_variable done_cv_;  // the caller sleeps here when workers are late
    std::atomic<int> sleepers_{0};
    std::atomic<bool> caller_waiting_{false};
    // How long an idle worker spins before sleeping: 0 when the pool has more threads than the process
    // may use CPUs, where a spinner would only hold a core that a thread with work is waiting for.
    int64_t spin_ns_ = 0;
};

} // namespace ember::cpu
