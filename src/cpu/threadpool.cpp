// threadpool.cpp — see threadpool.hpp for why the pool spins.
//
// Protocol. The caller publishes (fn_, ctx_, pending_) and then bumps generation_; a worker that sees a
// new generation runs the job and decrements pending_; the caller returns once pending_ is 0. Because
// run() waits for every worker, a worker sees each generation exactly once and never two jobs at a
// time, so one generation counter is all the state a job needs.
//
// Memory ordering. generation_ is bumped with a seq_cst (so also release) RMW and read with acquire,
// which makes fn_/ctx_/pending_ visible to the worker; pending_ is decremented with a seq_cst RMW and
// polled with acquire, which makes the job's writes visible to the caller and orders the worker's last
// reads of fn_/ctx_ before the next run() overwrites them.
//
// Sleeping without lost wake-ups, both ways. A worker that gives up spinning registers in sleepers_
// and re-checks generation_ while holding mutex_; the caller bumps generation_ and then reads
// sleepers_. Both sides use seq_cst, so (Dekker) at least one sees the other: either the worker sees
// the new generation and does not sleep, or the caller sees a sleeper, takes mutex_ (which the worker
// holds until it is inside cv_.wait) and notifies. The caller's own sleep when a worker is late uses
// the same pattern with caller_waiting_ and pending_.
//
// Oversubscription. With more threads than usable CPUs a spinning thread can only delay the thread it
// waits for, so such a pool never spins: workers sleep between jobs and the caller sleeps until they
// finish (measured on 2 cores: a 3-thread pool then dispatches in ~75 us, against ~220 us per run with
// spinning workers).
#include "cpu/threadpool.hpp"

#include <chrono>

#if defined(__linux__)
#include <sched.h>
#endif

namespace ember::cpu {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// How long a worker keeps spinning after a job before it sleeps. A decode step dispatches a job every
// few microseconds, so this covers the gaps of serial work between kernels with a wide margin, yet
// an idle pool stops burning a core within a fraction of a millisecond.
constexpr auto kSpin = std::chrono::microseconds(200);
// The caller waits for the workers by spinning too, for at most this long: a job that takes longer
// has a worker that was descheduled, and the caller then sleeps so as not to compete with it.
constexpr auto kCallerSpin = std::chrono::microseconds(50);

int usable_cpus() {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
    const unsigned n = std::thread::hardware_concurrency();
    return n ? static_cast<int>(n) : 1;
}

} // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    spin_ns_ = n_threads_ <= usable_cpus() ? std::chrono::nanoseconds(kSpin).count() : 0;
    workers_.reserve(static_cast<size_t>(n_threads_ - 1));
    try {
        for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
    } catch (...) {
        // A thread that could not start (out of memory or threads): the destructor will not run, so the
        // ones already started are stopped and joined here, or they would end the process unjoined.
        stop_workers();
        throw;
    }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
    if (workers_.empty()) return;
    stop_.store(true, std::memory_order_relaxed);  // published by the release below
    generation_.fetch_add(1, std::memory_order_seq_cst);
    {
        std::lock_guard<std::mutex> lock(mutex_);
    }
    cv_.notify_all();
    for (auto &t : workers_) t.join();
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns_);
    for (unsigned i = 1; spin_ns_ > 0; ++i) {
        const uint64_t g = generation_.load(std::memory_order_acquire);
        if (g != seen) return g;
        cpu_relax();
        // Reading the clock costs ~20 ns; every 64 pauses keeps that negligible.
        if ((i & 63) == 0 && std::chrono::steady_clock::now() >= deadline) break;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    uint64_t g;
    cv_.wait(lock, [&] { return (g = generation_.load(std::memory_order_seq_cst)) != seen; });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return g;
}

void ThreadPool::worker(int ith) {
    uint64_t seen = 0;  // generation_ starts at 0 and the constructor runs no job
    for (;;) {
        seen = wait_for_job(seen);
        if (stop_.load(std::memory_order_relaxed)) return;
        fn_(ctx_, ith, n_threads_);
        // The last worker wakes the caller if it went to sleep (same Dekker pairing as sleepers_,
        // with caller_waiting_ and pending_ in the roles of sleepers_ and generation_).
        if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_waiting_.load(std::memory_order_seq_cst)) {
            { std::lock_guard<std::mutex> lock(mutex_); }
            done_cv_.notify_one();
        }
    }
}

void ThreadPool::run_impl(Fn fn, void *ctx) {
    if (n_threads_ == 1) {
        fn(ctx, 0, 1);
        return;
    }
    // Uncontended (~20 ns) unless two contexts that share the pool run at once, which then take turns.
    std::lock_guard<std::mutex> run_lock(run_mutex_);
    fn_ = fn;
    ctx_ = ctx;
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        { std::lock_guard<std::mutex> lock(mutex_); }
        cv_.notify_all();
    }
    fn(ctx, 0, n_threads_);
    if (pending_.load(std::memory_order_acquire) == 0) return;
    if (spin_ns_ > 0) {
        const auto deadline = std::chrono::steady_clock::now() + kCallerSpin;
        for (unsigned i = 1; pending_.load(std::memory_order_acquire) != 0; ++i) {
            cpu_relax();
            if ((i & 63) == 0 && std::chrono::steady_clock::now() >= deadline) break;
        }
        if (pending_.load(std::memory_order_acquire) == 0) return;
    }
    // A worker is late (descheduled by another process, or the pool is oversubscribed): sleep, so as
    // not to hold a core that the late worker may be waiting for.
    std::unique_lock<std::mutex> lock(mutex_);
    caller_waiting_.store(true, std::memory_order_seq_cst);
    done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_seq_cst) == 0; });
    caller_waiting_.store(false, std::memory_order_relaxed);
}

} // namespace ember::cpu
