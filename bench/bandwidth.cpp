// bandwidth.cpp — ember-bandwidth: the memory bandwidth this machine reaches, which bounds batch-1 decode
// (tokens/s <= read bandwidth / bytes of weights read per token).
//
// Measures, for 1..T threads, reading a buffer far larger than the caches (the decode pattern: every
// weight streamed once per token) and a STREAM-like copy (a[i] = b[i], counting the bytes read and
// written). Each figure is the best of several passes. Prints one JSON line per thread count, with the
// CPU model (decode's share of the bandwidth is only meaningful per machine).
//
// usage: ember-bandwidth [THREADS=2] [MIB=1024]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Four independent sums, so the loop is bound by loads rather than by one add chain. The result is
// returned and printed, so the compiler cannot drop the reads.
uint64_t read_sum_scalar(const uint64_t *p, size_t n) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) a += p[i], b += p[i + 1], c += p[i + 2], d += p[i + 3];
    for (; i < n; ++i) a += p[i];
    return a + b + c + d;
}

#if defined(__x86_64__)
// The same with 256-bit loads, 4 lines per step in 4 accumulators: with 8-byte loads one core issues
// too few loads per cycle to find the memory's limit (measured on a Xeon VM: 12.9 GB/s scalar, where
// decode kernels with vector loads read faster than that), so the figure would be the loop's, not the
// memory's. Decode's kernels load 256 or 512 bits at a time too.
__attribute__((target("avx2"))) uint64_t read_sum_avx2(const uint64_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i *v = reinterpret_cast<const __m256i *>(p + i);
        a = _mm256_add_epi64(a, _mm256_add_epi64(_mm256_loadu_si256(v + 0), _mm256_loadu_si256(v + 1)));
        b = _mm256_add_epi64(b, _mm256_add_epi64(_mm256_loadu_si256(v + 2), _mm256_loadu_si256(v + 3)));
        c = _mm256_add_epi64(c, _mm256_add_epi64(_mm256_loadu_si256(v + 4), _mm256_loadu_si256(v + 5)));
        d = _mm256_add_epi64(d, _mm256_add_epi64(_mm256_loadu_si256(v + 6), _mm256_loadu_si256(v + 7)));
    }
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i *>(lanes), _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + read_sum_scalar(p + i, n - i);
}
#endif

uint64_t read_sum(const uint64_t *p, size_t n) {
#if defined(__x86_64__)
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2) return read_sum_avx2(p, n);
#endif
    return read_sum_scalar(p, n);
}

// Runs fn(thread, begin, end) on `threads` threads over [0, n) and returns the seconds taken.
template <class F>
double timed(int threads, size_t n, F fn) {
    std::vector<std::thread> pool;
    const double t0 = now();
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] { fn(t, n * t / threads, n * (t + 1) / threads); });
    for (auto &th : pool) th.join();
    return now() - t0;
}

// "model name" of /proc/cpuinfo ("unknown" elsewhere), with JSON's special characters dropped.
std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
            std::string m = line.substr(line.find(':') + 2), out;
            for (char c : m)
                if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) out += c;
            return out;
        }
    return "unknown";
}

// n words, 2 MiB-aligned and advised for huge pages (*huge cleared where the advice fails); the memory
// is never freed (the program ends after measuring).
uint64_t *alloc_words(size_t n, bool *huge) {
    const size_t align = size_t{2} << 20, bytes = n * sizeof(uint64_t) + align;
    void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    auto *base = reinterpret_cast<uint64_t *>((reinterpret_cast<uintptr_t>(p) + align - 1) & ~uintptr_t{align - 1});
#if defined(MADV_HUGEPAGE)
    if (::madvise(base, n * sizeof(uint64_t), MADV_HUGEPAGE) != 0) *huge = false;
#else
    *huge = false;
#endif
    return base;
}

} // namespace

int main(int argc, char **argv) {
    const int max_threads = argc > 1 ? std::atoi(argv[1]) : 2;
    const size_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
    if (max_threads < 1 || mib < 64) {
        std::fprintf(stderr, "usage: ember-bandwidth [THREADS>=1] [MIB>=64]\n");
        return 2;
    }
    const size_t n = mib * 1024 * 1024 / sizeof(uint64_t);
    // Transparent huge pages where the kernel gives them (madvise): with 4 KiB pages the loop also
    // measures TLB misses, which in a VM (nested paging) cost a large share of the bandwidth, and the
    // figure would be the pages' limit rather than the memory's (the CPU backend gives decode the same
    // pages by default, see src/core/huge_page_copy.hpp).
    bool huge = true;
    uint64_t *pa = alloc_words(n, &huge), *pb = alloc_words(n, &huge);
    if (!pa || !pb) {
        std::fprintf(stderr, "ember-bandwidth: cannot allocate 2 x %zu MiB\n", mib);
        return 1;
    }
    uint64_t *a = pa, *b = pb;
    // Touch every page first (with the threads that will read it, so pages land on their nodes).
    timed(max_threads, n, [&](int, size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) a[i] = i, b[i] = ~i;
    });
    std::vector<uint64_t> sums(static_cast<size_t>(max_threads));
    const std::string cpu = cpu_model();
    for (int threads = 1; threads <= max_threads; ++threads) {
        double best_read = 1e30, best_copy = 1e30;
        for (int pass = 0; pass < 5; ++pass) {
            best_read = std::min(best_read, timed(threads, n, [&](int t, size_t lo, size_t hi) {
                                     sums[static_cast<size_t>(t)] += read_sum(a + lo, hi - lo);
                                 }));
            best_copy = std::min(best_copy, timed(threads, n, [&](int, size_t lo, size_t hi) {
                                     std::memcpy(b + lo, a + lo, (hi - lo) * sizeof(uint64_t));
                                 }));
        }
        const double bytes = static_cast<double>(n * sizeof(uint64_t));
        uint64_t check = 0;
        for (uint64_t s : sums) check ^= s;
        std::printf("{\"cpu\":\"%s\",\"huge_pages\":%s,\"threads\":%d,\"buffer_mib\":%zu,\"read_gb_s\":%.2f,\"copy_gb_s\":%.2f,\"check\":%llu}\n",
                    cpu.c_str(), huge ? "true" : "false", threads, mib, bytes / best_read / 1e9, 2 * bytes / best_copy / 1e9,
                    static_cast<unsigned long long>(check % 1000));
    }
    return 0;
}
