// threadpool.hpp — the CPU backend's persistent worker threads.
//
// Why not std::async or a task queue: a decode step of a small model runs ~50 parallel ops of a few
// microseconds each, so dispatch latency dominates. Workers spin on an atomic generation counter for a
// short while after each job (then sleep on a condition variable), and the calling thread takes part,
// so a dispatch costs well under a microsecond while work keeps coming (~0.25 us measured on 2 cores).
//
// Why jobs are chunks taken from a counter, not one share per thread: an embedded runtime shares the
// CPU with its host, and the OS may deschedule any worker for a whole time slice (milliseconds). A job
// that waits for every worker then waits for the slowest, and decode collapsed 5x with one busy process
// beside it on 2 cores. Here a job is split into more chunks than threads; the caller and whichever
// workers arrive take chunks until none are left, a worker that arrives after the last chunk was taken
// does nothing, and the caller waits only for the workers that took one. On top of that the pool
// measures how much its workers actually help (cpu/threadpool.cpp) and uses fewer of them while they do
// not, trying more again from time to time: the thread count given is the most it uses.
#pragma once

#include <atomic>
#include <condition_variable>
#include "core/cpu_budget.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ember::cpu {

// The process-wide CPU budget (core/cpu_budget.hpp): every pool reads it at each job.
using ember::CpuBudget;
using ember::CpuPriority;

class ThreadPool {
public:
    // n_threads >= 1 counts the caller: n_threads - 1 workers are started.
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int size() const { return n_threads_; }
    // How many threads (the caller included) chunked jobs use now: size() or fewer, as measured and
    // as the CPU budget allows. Split work into a few chunks per thread of this.
    int width() const { return width_.load(std::memory_order_relaxed); }

    // Calls fn(c) once for each c in [0, n_chunks), spread over the caller and up to width() - 1 workers,
    // and returns when every call has returned. fn must not throw. Not reentrant (fn must not use this
    // pool), but callers on different threads may share a pool: their jobs take turns.
    template <class F>
    void run_chunks(int64_t n_chunks, F &&fn) {
        using Callable = std::remove_reference_t<F>;
        run_impl([](void *ctx, int64_t c) { (*static_cast<Callable *>(ctx))(c); },
                 const_cast<void *>(static_cast<const void *>(&fn)), n_chunks);
    }

    // Calls fn(ith, nth) once for each ith in [0, nth), nth = size(), and returns when all calls have
    // returned. The calls may run on fewer threads than nth (a descheduled worker's share is taken by
    // another thread), so fn must not rely on which thread runs it. fn must not throw. Not reentrant.
    template <class F>
    void run(F &&fn) {
        // remove_reference: F is an lvalue reference when fn is a named callable.
        using Callable = std::remove_reference_t<F>;
        struct Ctx {
            Callable *fn;
            int nth;
        } ctx{&fn, n_threads_};
        run_impl([](void *p, int64_t c) {
            auto *x = static_cast<Ctx *>(p);
            (*x->fn)(static_cast<int>(c), x->nth);
        }, &ctx, n_threads_);
    }

    // Splits [0, n) into contiguous chunks (a few per thread of width()) and calls fn(begin, end) for
    // each non-empty one, on whichever threads are free.
    template <class F>
    void parallel_for(int64_t n, F &&fn) {
        if (n <= 0) return;
        int64_t chunks = static_cast<int64_t>(width()) * kChunksPerThread;
        if (chunks > n) chunks = n;
        run_chunks(chunks, [&](int64_t c) { fn(n * c / chunks, n * (c + 1) / chunks); });
    }

    // Chunks per thread that parallel_for makes: enough that a late or slow thread leaves at most a
    // small share for the others, few enough that handing them out (an atomic RMW each) stays cheap.
    static constexpr int kChunksPerThread = 4;

private:
    using Fn = void (*)(void *ctx, int64_t chunk);
    void stop_workers();   // wakes every started worker with stop_ set and joins it
    void run_impl(Fn fn, void *ctx, int64_t n_chunks);
    void worker(std::atomic<int> &cpu);
    // Waits until generation_ differs from `seen` (spinning first, then sleeping); returns the new value.
    uint64_t wait_for_job(uint64_t seen, std::atomic<int> &cpu);
    // Takes chunks of the current job until none are left; returns how many it took.
    int64_t take_chunks();
    // Feeds one job's timing to the width controller (threadpool.cpp): the job took wall_ns, and the
    // caller spent own_ns on own_chunks of its n_chunks.
    void adapt(int64_t est_ns, int64_t wall_ns, bool stalled);
    int max_width() const;  // size(), capped by the CPU budget
    // The share of the time since the last call that the calling thread ran rather than waited for a
    // CPU (1 when unknown: first call, another thread, no scheduler statistics); restarts the count.
    double caller_share();
    // Whether the calling thread has waited for a CPU so long since the current window began that the
    // window cannot pay for its width (threadpool.cpp, kStallNs); false if unknown.
    bool caller_stalled() const;
    // Whether a worker last ran (spinning or on a chunk) on the CPU the caller runs on now: then the
    // caller's waits for its CPU are (partly) its own workers' doing, which fewer threads would undo.
    bool cpu_shared_with_workers() const;
    // Whether the machine's other runnable tasks leave a CPU for each of `width` threads of this pool now
    // (then a worker on the caller's CPU is the OS's passing placement, not a lack of CPUs).
    bool cpus_to_spare(int width) const;
    // Whether that was so in at least half of the current window's checks.
    bool workers_took_my_cpu() const { return window_.checks > 0 && 2 * window_.shared >= window_.checks; }

    int n_threads_;
    std::vector<std::thread> workers_;
    // Where each worker last ran (sched_getcpu), for cpu_shared_with_workers; one cache line each.
    struct alignas(64) WorkerCpu {
        std::atomic<int> cpu{-1};
    };
    std::unique_ptr<WorkerCpu[]> worker_cpus_;
    Fn fn_ = nullptr;
    void *ctx_ = nullptr;
    int64_t n_chunks_ = 0;
    alignas(64) std::atomic<uint64_t> generation_{0};
    alignas(64) std::atomic<int> seats_{0};          // workers that may still join the current job
    alignas(64) std::atomic<int64_t> next_chunk_{0};
    alignas(64) std::atomic<int> finished_{0};       // workers of the current job that are done
    std::atomic<bool> stop_{false};
    std::atomic<int> width_;
    std::mutex run_mutex_;             // one job at a time (contexts may share a pool, see backend.hpp)
    std::mutex mutex_;
    std::condition_variable cv_;       // workers sleep here between jobs
    std::condition_variable done_cv_;  // the caller sleeps here when workers are late
    std::atomic<int> sleepers_{0};
    std::atomic<bool> caller_waiting_{false};
    // How long an idle worker spins before sleeping: 0 when the pool has more threads than the process
    // may use CPUs, where a spinner would only hold a core that a thread with work is waiting for.
    int64_t spin_ns_ = 0;

    // The width controller's state (touched only by the caller, under run_mutex_).
    struct Window {
        int64_t est_ns = 0;   // what the window's jobs would have taken on the caller alone (estimated)
        int64_t wall_ns = 0;  // what they took
        int jobs = 0;
        int checks = 0;       // caller_stalled checks (one per kCheckNs at most)
        int shared = 0;       // of those, how many found a worker on the caller's CPU
    } window_;
    struct Sched {
        std::thread::id tid;  // whose clocks these are
        int64_t run_ns = 0, wait_ns = 0;
        bool valid = false;
    } sched_;                         // the caller's scheduler clocks at the current window's start
    int64_t last_check_ns_ = 0;       // when caller_stalled() was last read
    // The share of its time the caller ran in the recent windows at width 1 (a running mean), or -1
    // before the first; alone_share() reads it as 1 then (a whole CPU).
    double alone_share_ = -1.0;
    double alone_share() const { return alone_share_ > 0 ? alone_share_ : 1.0; }
    int alone_windows_ = -1;          // windows at width 1 since the drop to it; -1 once judged
    // Whether, a few windows after a drop to one thread, the caller still waits for its CPU (so the
    // drop did not help, and two threads are worth a probe now); true once per drop at most.
    bool waits_alone();
    int settled_ = 1;                 // the width measured best; width_ is settled_ + 1 while probing
    bool probing_ = false;            // this window runs one thread wider to see whether it pays
    int low_windows_ = 0;             // consecutive windows whose speedup did not pay for the width
    int64_t windows_to_probe_ = 0;    // windows at settled_ before the next probe
    int64_t probe_interval_ = 0;      // grows while probes fail (exponential back-off)
};

} // namespace ember::cpu
