// threadpool.cpp — see threadpool.hpp for why jobs are chunks and why the pool spins.
//
// Protocol. The caller publishes a job (fn_, ctx_, n_chunks_, next_chunk_ = 0, finished_ = 0) and the
// number of workers that may join it (seats_), then bumps generation_. A worker that sees a new
// generation takes a seat (a CAS that fails once seats_ is 0) and then chunks from next_chunk_ until
// none are left, and counts itself in finished_. The caller takes chunks too; when none are left it
// closes the job (seats_ = 0, by exchange, which also tells it how many workers joined) and waits until
// that many have finished. A worker that comes late — descheduled, or still waking up — finds no seat
// and goes back to waiting: no job ever waits for a thread that has not started on it.
//
// A worker may see a generation and take its seat only after the caller has moved on to a later job:
// it then joins that later job (the seat it took is that job's, and fn_/ctx_ are read after the seat),
// which is just as correct. A worker never holds a seat of a job the caller has finished with, because
// the caller closes seats before it waits and waits for every seat taken before it.
//
// Memory ordering. seats_ is stored with release after the job's fields, and taken with an acquire
// CAS, so a worker with a seat sees the job. finished_ is incremented with a seq_cst RMW and polled with
// acquire, which makes the chunks' writes visible to the caller and orders the worker's last reads of
// the job before the next job overwrites them.
//
// Sleeping without lost wake-ups, both ways. A worker that gives up spinning registers in sleepers_
// and re-checks generation_ while holding mutex_; the caller bumps generation_ and then reads
// sleepers_. Both sides use seq_cst, so (Dekker) at least one sees the other: either the worker sees
// the new generation and does not sleep, or the caller sees a sleeper, takes mutex_ (which the worker
// holds until it is inside cv_.wait) and notifies. The caller's own sleep when a worker is late uses
// the same pattern with caller_waiting_ and finished_.
//
// Oversubscription. With more threads than usable CPUs a spinning thread can only delay the thread it
// waits for, so such a pool never spins: workers sleep between jobs and the caller sleeps until they
// finish.
//
// Width. Each job the workers share is timed by the caller: it took wall_ns, and the caller did k of its
// n chunks in own_ns. Had the caller been alone it would have taken about own_ns * n / k, less the time
// the OS kept it off its CPU where that was more than alone (the workers competing with it for the
// CPUs: the caller's scheduler statistics say how long it waited, see adapt), so est / wall over a
// window of jobs is the speedup the workers bring. When a worker is descheduled in
// the middle of a chunk the caller waits for it, and the speedup falls below 1 under a busy neighbour
// (measured on 2 cores: ~0.5 at 2 threads). The controller drops a thread when the speedup is less
// than 0.6 per thread for two windows in a row, and every so often runs one window a thread wider to
// see whether it pays again (probes back off exponentially while they fail, so a failed probe costs a
// few percent at most). A window in which the caller waited for its CPU so long that it cannot pay
// ends at once as a loss (kStallNs), so beside a busy process the pool narrows within milliseconds.
#include "cpu/threadpool.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>
#endif

namespace ember::cpu {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// How long a worker keeps spinning after a job before it sleeps. A decode step dispatches a job every
// few microseconds, so this covers the gaps of serial work between kernels with a wide margin, yet
// an idle pool stops burning a core within a fraction of a millisecond. A High priority budget spins
// 4x longer; a Low one never spins.
constexpr int64_t kSpinNs = 200'000;
// The caller waits for the workers by spinning too, for at most this long: a job that takes longer
// has a worker that was descheduled, and the caller then sleeps so as not to compete with it.
constexpr int64_t kCallerSpinNs = 50'000;

// Width controller: a window is at least this many shared jobs and this much time, so that it spans
// a few decode steps of a small model (one step is ~50 jobs, 0.5-2 ms).
constexpr int kWindowJobs = 64;
constexpr int64_t kWindowNs = 10'000'000;
// A thread is kept while the measured speedup is at least this much per thread (2 threads: 1.2).
constexpr double kMinGainPerThread = 0.6;
// A window ends early, as a loss (one of the two in a row that drop a thread, or a failed probe), once
// the caller has waited at least kStallNs for its CPU in it and has run less than kMinGainPerThread of
// what it ran alone (alone_share(); 1 before any window at width 1): even a perfect speedup of the
// width would then fall short, so the rest of the window can only cost. Beside one busy process on 2
// cores, width 2 means three runnable threads on two CPUs: the caller ran about half the time (its
// worker and it sharing a core, or it waiting 3-5 ms for a slice every few decode steps of
// stories15M), and the two whole 10 ms windows the controller used to need to see that cost ~12 ms
// of a 90 ms run; two windows that end early take ~8 ms. 2 ms at least, so that one wake-up of another
// task (a daemon's, or a build's that runs out its slice before the caller gets its CPU back) is not
// one. Not one window alone: in a process's first milliseconds the caller waited as much beside the
// shared machine's builds alone (its cgroup's weight not yet established), where two threads pay.
// Neither this nor the discount of the caller's waits applies while the machine has a CPU to spare for
// every thread of the pool (cpus_to_spare): a worker that starts on the caller's CPU beside an idle one
// is moved there by the OS within milliseconds, and a pool that dropped to one thread meanwhile stayed
// there (measured on the quiet machine: 7 of 8 runs of stories15M decoded at 1400 instead of 2300).
constexpr int64_t kStallNs = 2'000'000;
// After a drop to one thread, the caller's share alone over this many windows says whether the drop
// gave it its CPU back. Beside one busy process it ran 94-100 % of the time alone; where it still ran
// less than kAloneFull, the waits were not the workers' doing (other jobs take the caller's CPU either
// way: seen on the shared build machine, where the caller ran 50-90 % alone and width 2 decoded up
// to 1.5x faster), so the pool probes two threads again at once instead of after kProbeFirst windows.
constexpr int kAloneWindows = 2;
constexpr double kAloneFull = 0.85;
// How often the caller's wait for a CPU is read during a window at width 2 or more.
constexpr int64_t kCheckNs = 1'000'000;
// Windows at the settled width between probes: from ~0.16 s, doubling after each failed probe up to
// ~2.5 s, so a machine that stays busy pays one slow window in 256.
constexpr int64_t kProbeFirst = 16;
constexpr int64_t kProbeMax = 256;

// The calling thread's time on a CPU and time runnable but waiting for one, in ns since it started
// (the kernel's /proc/thread-self/schedstat: sum_exec_runtime and run_delay). False where there is no
// such file (not Linux, or a kernel without CONFIG_SCHED_INFO): the controller then assumes the caller
// always had its CPU. One open/read/close, ~1.5 us here: read at most every kCheckNs, and at each
// window's end.
bool thread_sched_times(int64_t &run_ns, int64_t &wait_ns) {
#if defined(__linux__)
    const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[96];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    char *end = nullptr;
    const long long run = std::strtoll(buf, &end, 10);
    if (end == buf) return false;
    char *end2 = nullptr;
    const long long wait = std::strtoll(end, &end2, 10);
    if (end2 == end) return false;
    run_ns = run;
    wait_ns = wait;
    return true;
#else
    (void)run_ns;
    (void)wait_ns;
    return false;
#endif
}

// Tasks that run or wait for a CPU on the whole machine now (/proc/loadavg's fourth field, before the
// slash), or -1 where that cannot be read. ~3 us; read only where a window would end as a loss.
int machine_runnable() {
#if defined(__linux__)
    const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[128];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    const char *p = buf;
    for (int field = 0; field < 3 && p; ++field) {
        p = std::strchr(p, ' ');
        if (p) ++p;
    }
    return p && *p >= '0' && *p <= '9' ? std::atoi(p) : -1;
#else
    return -1;
#endif
}

// The CPU the calling thread runs on, or -1 where that cannot be asked (then nothing counts as shared).
int current_cpu() {
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}

int usable_cpus() {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
    const unsigned n = std::thread::hardware_concurrency();
    return n ? static_cast<int>(n) : 1;
}

// The process-wide budget, read by every pool at every job (relaxed: any recent value will do).
// EMBER_CPU_ADAPT_LOG=1 prints every window's measurement and decision to stderr (tuning, benchmarks).
const bool g_log = [] {
    const char *e = std::getenv("EMBER_CPU_ADAPT_LOG");
    return e && e[0] == '1';
}();

} // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads), width_(n_threads_) {
    settled_ = n_threads_;
    probe_interval_ = kProbeFirst;
    spin_ns_ = n_threads_ <= usable_cpus() ? kSpinNs : 0;
    workers_.reserve(static_cast<size_t>(n_threads_ - 1));
    worker_cpus_ = std::make_unique<WorkerCpu[]>(static_cast<size_t>(n_threads_ > 1 ? n_threads_ - 1 : 1));
    try {
        for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(worker_cpus_[static_cast<size_t>(i - 1)].cpu); });
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

uint64_t ThreadPool::wait_for_job(uint64_t seen, std::atomic<int> &cpu) {
    const int prio = static_cast<int>(cpu_budget_priority());
    const int64_t spin = prio == static_cast<int>(CpuPriority::Low) ? 0 : prio == static_cast<int>(CpuPriority::High) ? 4 * spin_ns_ : spin_ns_;
    const int64_t deadline = now_ns() + spin;
    for (unsigned i = 1; spin > 0; ++i) {
        const uint64_t g = generation_.load(std::memory_order_acquire);
        if (g != seen) return g;
        cpu_relax();
        // Reading the clock costs ~20 ns; every 64 pauses keeps that negligible. So does saying where
        // the spinning runs (see cpu_shared_with_workers).
        if ((i & 63) == 0) {
            cpu.store(current_cpu(), std::memory_order_relaxed);
            if (now_ns() >= deadline) break;
        }
    }
    std::unique_lock<std::mutex> lock(mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    uint64_t g;
    cv_.wait(lock, [&] { return (g = generation_.load(std::memory_order_seq_cst)) != seen; });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return g;
}

int64_t ThreadPool::take_chunks() {
    int64_t done = 0;
    for (int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed); c < n_chunks_;
         c = next_chunk_.fetch_add(1, std::memory_order_relaxed), ++done)
        fn_(ctx_, c);
    return done;
}

void ThreadPool::worker(std::atomic<int> &cpu) {
    uint64_t seen = 0;  // generation_ starts at 0 and the constructor runs no job
    for (;;) {
        seen = wait_for_job(seen, cpu);
        if (stop_.load(std::memory_order_relaxed)) return;
        int s = seats_.load(std::memory_order_relaxed);
        while (s > 0 && !seats_.compare_exchange_weak(s, s - 1, std::memory_order_acquire, std::memory_order_relaxed)) {
        }
        if (s <= 0) continue;  // came too late: the chunks were all taken and the job closed
        cpu.store(current_cpu(), std::memory_order_relaxed);
        take_chunks();
        // The last worker wakes the caller if it went to sleep (same Dekker pairing as sleepers_,
        // with caller_waiting_ and finished_ in the roles of sleepers_ and generation_).
        finished_.fetch_add(1, std::memory_order_seq_cst);
        if (caller_waiting_.load(std::memory_order_seq_cst)) {
            { std::lock_guard<std::mutex> lock(mutex_); }
            done_cv_.notify_one();
        }
    }
}

int ThreadPool::max_width() const {
    const int cap = cpu_budget_max_threads();
    return cap > 0 && cap < n_threads_ ? cap : n_threads_;
}

void ThreadPool::run_impl(Fn fn, void *ctx, int64_t n_chunks) {
    if (n_chunks <= 0) return;
    // One chunk runs here, and says nothing about the workers, so it opens no window. Except at width
    // 1: there the windows must go on (they schedule the probes of a wider width), and a decode
    // product, which makes one range per thread of width() (row_steal.hpp), is one chunk. Without them
    // a pool that dropped to one thread during decode (a busy neighbour, a throttled core) never
    // probed again: whole runs at half speed.
    if (n_threads_ == 1 || (n_chunks == 1 && width_.load(std::memory_order_relaxed) > 1)) {
        for (int64_t c = 0; c < n_chunks; ++c) fn(ctx, c);
        return;
    }
    // Uncontended (~20 ns) unless two contexts that share the pool run at once, which then take turns.
    std::lock_guard<std::mutex> run_lock(run_mutex_);
    const int cap = max_width();
    if (!cpu_budget_adaptive()) {
        settled_ = cap;
        probing_ = false;
        width_.store(cap, std::memory_order_relaxed);
    } else if (settled_ > cap || width_.load(std::memory_order_relaxed) > cap) {
        settled_ = settled_ > cap ? cap : settled_;
        probing_ = false;
        width_.store(settled_, std::memory_order_relaxed);
    }
    const int width = width_.load(std::memory_order_relaxed);
    const int64_t t0 = now_ns();
    if (width == 1) {
        // Alone: the window still advances (it schedules the next probe); est = wall by definition.
        for (int64_t c = 0; c < n_chunks; ++c) fn(ctx, c);
        const int64_t wall = now_ns() - t0;
        adapt(wall, wall, false);
        return;
    }
    const int seats = static_cast<int>(n_chunks - 1 < width - 1 ? n_chunks - 1 : width - 1);
    fn_ = fn;
    ctx_ = ctx;
    n_chunks_ = n_chunks;
    next_chunk_.store(0, std::memory_order_relaxed);
    finished_.store(0, std::memory_order_relaxed);
    seats_.store(seats, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        { std::lock_guard<std::mutex> lock(mutex_); }
        cv_.notify_all();
    }
    const int64_t own = take_chunks();
    const int64_t t_own = now_ns();
    const int joined = seats - seats_.exchange(0, std::memory_order_acq_rel);
    if (finished_.load(std::memory_order_acquire) != joined) {
        const bool spin = spin_ns_ > 0 && static_cast<int>(cpu_budget_priority()) != static_cast<int>(CpuPriority::Low);
        if (spin) {
            const int64_t deadline = t_own + kCallerSpinNs;
            for (unsigned i = 1; finished_.load(std::memory_order_acquire) != joined; ++i) {
                cpu_relax();
                if ((i & 63) == 0 && now_ns() >= deadline) break;
            }
        }
        if (finished_.load(std::memory_order_acquire) != joined) {
            // A worker is late (descheduled by another process, or the pool is oversubscribed): sleep,
            // so as not to hold a core that the late worker may be waiting for.
            std::unique_lock<std::mutex> lock(mutex_);
            caller_waiting_.store(true, std::memory_order_seq_cst);
            done_cv_.wait(lock, [&] { return finished_.load(std::memory_order_seq_cst) == joined; });
            caller_waiting_.store(false, std::memory_order_relaxed);
        }
    }
    const int64_t t_end = now_ns();
    // The caller's scheduler clocks are read at most every kCheckNs (~1.5 us a read: 0.15 % at most).
    bool stalled = false;
    if (t_end - last_check_ns_ >= kCheckNs) {
        last_check_ns_ = t_end;
        window_.checks += 1;
        window_.shared += cpu_shared_with_workers() ? 1 : 0;
        stalled = workers_took_my_cpu() && caller_stalled() && !cpus_to_spare(width);
    }
    // A caller that took no chunk (descheduled right after publishing) says nothing about its speed.
    if (own > 0 || stalled) adapt(own > 0 ? (t_own - t0) * n_chunks / own : 0, t_end - t0, stalled);
}

double ThreadPool::caller_share() {
    const std::thread::id me = std::this_thread::get_id();
    int64_t run = 0, wait = 0;
    const bool ok = thread_sched_times(run, wait);
    double share = 1.0;
    if (ok && sched_.valid && sched_.tid == me) {
        const int64_t d_run = run - sched_.run_ns, d_wait = wait - sched_.wait_ns;
        if (d_run > 0 && d_wait >= 0) share = static_cast<double>(d_run) / static_cast<double>(d_run + d_wait);
    }
    sched_ = Sched{me, run, wait, ok};
    return share;
}

bool ThreadPool::cpu_shared_with_workers() const {
    const int me = current_cpu();
    if (me < 0) return false;
    for (int i = 0; i + 1 < n_threads_; ++i)
        if (worker_cpus_[static_cast<size_t>(i)].cpu.load(std::memory_order_relaxed) == me) return true;
    return false;
}

bool ThreadPool::cpus_to_spare(int width) const {
    const int runnable = machine_runnable();
    if (runnable < 0) return false;
    // Ours among them: the caller and every worker not asleep (spinning counts as running).
    const int ours = n_threads_ - sleepers_.load(std::memory_order_relaxed);
    const int others = runnable > ours ? runnable - ours : 0;
    // The CPUs the caller may use now (a host may have pinned it since the pool started).
    return others + width <= usable_cpus();
}

bool ThreadPool::waits_alone() {
    if (alone_windows_ < 0 || ++alone_windows_ < kAloneWindows) return false;
    alone_windows_ = -1;
    return alone_share() < kAloneFull;
}

bool ThreadPool::caller_stalled() const {
    int64_t run = 0, wait = 0;
    if (!sched_.valid || sched_.tid != std::this_thread::get_id() || !thread_sched_times(run, wait)) return false;
    const int64_t d_run = run - sched_.run_ns, d_wait = wait - sched_.wait_ns;
    return d_wait >= kStallNs && static_cast<double>(d_run) < kMinGainPerThread * alone_share() * static_cast<double>(d_run + d_wait);
}

void ThreadPool::adapt(int64_t est_ns, int64_t wall_ns, bool stalled) {
    if (!cpu_budget_adaptive()) return;
    // The window's start on the caller's scheduler clocks, unless the last window's end is that (same
    // thread). A window that two callers' jobs share then reads as a full share: as before this existed.
    if (window_.jobs == 0 && !(sched_.valid && sched_.tid == std::this_thread::get_id())) caller_share();
    window_.est_ns += est_ns;
    window_.wall_ns += wall_ns;
    ++window_.jobs;
    const bool stalled_out = stalled && width_.load(std::memory_order_relaxed) > 1;
    if (!stalled_out && (window_.jobs < kWindowJobs || window_.wall_ns < kWindowNs)) return;
    // The caller's chunk times, and so est, include the time it waited for a CPU. Where it ran less of
    // its time than it did alone (at width 1, alone_share()), that is the workers taking its CPU, which
    // alone it would have had: only the share it ran counts. Measured beside one busy process: raw
    // speedup 1.1-1.96 at width 2 while width 2 decoded at 0.5-0.7x of one thread (the caller and its
    // worker halving one core), and the caller ran 97-100 % of its time at width 1. Where it waits as
    // much alone (other jobs on the machine take its CPU either way) the speedup stands.
    const double share = caller_share();
    const int width = width_.load(std::memory_order_relaxed);
    if (width == 1) alone_share_ = alone_share_ < 0 ? share : 0.5 * (alone_share_ + share);
    const double lost = width > 1 && workers_took_my_cpu() && share < alone_share() && !cpus_to_spare(width) ? share / alone_share() : 1.0;
    // A window that stalled out reads as no gain at all.
    const double speedup = stalled_out ? 0.0 : static_cast<double>(window_.est_ns) * lost / static_cast<double>(window_.wall_ns);
    if (probing_ || speedup >= kMinGainPerThread * width) low_windows_ = 0;
    const int jobs = window_.jobs, shared = window_.shared, checks = window_.checks;
    const double wall_ms = static_cast<double>(window_.wall_ns) * 1e-6;
    window_ = Window{};
    const int before = settled_;
    if (probing_) {
        // The probe's speedup against the caller alone decides, as for the settled width.
        probing_ = false;
        if (speedup >= kMinGainPerThread * width) {
            settled_ = width;
            probe_interval_ = kProbeFirst;
        } else {
            probe_interval_ = probe_interval_ * 2 < kProbeMax ? probe_interval_ * 2 : kProbeMax;
        }
        windows_to_probe_ = probe_interval_;
    } else if (width >= 2 && speedup < kMinGainPerThread * width) {
        // Two windows in a row, so that a one-off stall (the first touch of mapped weights, whose page
        // faults the threads take in turn) does not cost a probe interval at the narrower width.
        if (++low_windows_ >= 2) {
            settled_ = width - 1;
            windows_to_probe_ = probe_interval_;
            low_windows_ = 0;
            if (settled_ == 1) {
                alone_share_ = -1.0;  // measured afresh, alone
                alone_windows_ = 0;
            }
        }
    } else if (width < max_width() && (--windows_to_probe_ <= 0 || waits_alone())) {
        probing_ = true;
    }
    width_.store(probing_ ? settled_ + 1 : settled_, std::memory_order_relaxed);
    if (g_log)
        std::fprintf(stderr, "ember threadpool %p: window of %d jobs, %.1f ms at width %d%s: caller's share %.2f (a worker on its CPU %d of %d times), speedup %.2f -> %s %d\n",
                     static_cast<void *>(this), jobs, wall_ms, width, stalled_out ? ", stalled" : "", share, shared, checks, speedup, probing_ ? "probing" : settled_ != before ? "settled" : "stays",
                     probing_ ? settled_ + 1 : settled_);
}

} // namespace ember::cpu
