// bandwidth.cpp — ember-bandwidth: the memory bandwidth this machine reaches, which bounds batch-1 decode
// (tokens/s <= read bandwidth / bytes of weights read per token).
//
// Measures, for 1..T threads, reading a buffer far larger than the caches (the decode pattern: every
// weight streamed once per token) and a STREAM-like copy (a[i] = b[i], counting the bytes read and
// written). Each figure is the best of several passes. Prints one JSON line per thread count, with the
// CPU model (decode's share of the bandwidth is only meaningful per machine).
//
// With `rows` as the third argument it also reads the way the decode tiles do (see read_rows_avx2): R
// rows at once, 64 bytes of each per step, with no software prefetch or one PF bytes ahead at the rate
// the tile consumes (one stream ahead of the tile, "tile", or one per row, "row"), for R in {1, 4, 8}
// and PF in {1, 2, 4, 8 KiB}, into L1 (T0) or L2 (T1). That says what a core can stream with the
// kernels' access pattern, beside the plain stream above.
//
// usage: ember-bandwidth [THREADS=2] [MIB=1024] [rows [ROW_BYTES=1152]]
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

#if defined(__x86_64__)
// The decode tiles' pattern over rows of row_bytes (a multiple of 64): R consecutive rows read side by
// side, one 64-byte piece of each per step, then the next R rows. With pf > 0 a software prefetch into
// L1 (hint T0) or L2 (T1), R lines per step, either as one stream pf bytes ahead of the tile's first row
// (kPerRow false: matmul_avx2.hpp's prefetch_step) or pf bytes ahead of each row, continuing in the same
// row of the next tile past a row's end (kPerRow true: prefetch_rows).
template <int R, int kLocality, bool kPerRow>  // kLocality: 3 = T0 (L1), 2 = T1 (L2)
__attribute__((target("avx2"))) uint64_t read_rows_avx2(const uint8_t *p, size_t n_rows, size_t row_bytes, size_t pf) {
    __m256i acc[R];
    for (int i = 0; i < R; ++i) acc[i] = _mm256_setzero_si256();
    for (size_t r = 0; r + R <= n_rows; r += R) {
        const uint8_t *row0 = p + r * row_bytes;
        for (size_t o = 0; o < row_bytes; o += 64) {
            if (pf && !kPerRow)
                for (int k = 0; k < R; ++k) __builtin_prefetch(row0 + pf + o * R + 64 * k, 0, kLocality);
            if (pf && kPerRow) {
                const size_t q = o + pf;
                const uint8_t *b = q < row_bytes ? row0 + q : row0 + R * row_bytes + (q - row_bytes);
                for (int i = 0; i < R; ++i) __builtin_prefetch(b + i * row_bytes, 0, kLocality);
            }
            for (int i = 0; i < R; ++i) {
                const __m256i *v = reinterpret_cast<const __m256i *>(row0 + i * row_bytes + o);
                acc[i] = _mm256_add_epi64(acc[i], _mm256_add_epi64(_mm256_loadu_si256(v), _mm256_loadu_si256(v + 1)));
            }
        }
    }
    for (int i = 1; i < R; ++i) acc[0] = _mm256_add_epi64(acc[0], acc[i]);
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i *>(lanes), acc[0]);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

using ReadRowsFn = uint64_t (*)(const uint8_t *, size_t, size_t, size_t);
template <int R>
ReadRowsFn read_rows_fn_r(bool l2, bool per_row) {
    if (per_row) return l2 ? read_rows_avx2<R, 2, true> : read_rows_avx2<R, 3, true>;
    return l2 ? read_rows_avx2<R, 2, false> : read_rows_avx2<R, 3, false>;
}
ReadRowsFn read_rows_fn(int rows, bool l2, bool per_row) {
    switch (rows) {
    case 1: return read_rows_fn_r<1>(l2, per_row);
    case 4: return read_rows_fn_r<4>(l2, per_row);
    default: return read_rows_fn_r<8>(l2, per_row);
    }
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
    const bool rows_mode = argc > 3 && std::strcmp(argv[3], "rows") == 0;
    const size_t row_bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1152;
    if (max_threads < 1 || mib < 64 || (argc > 3 && !rows_mode) || row_bytes < 64 || row_bytes % 64 != 0) {
        std::fprintf(stderr, "usage: ember-bandwidth [THREADS>=1] [MIB>=64] [rows [ROW_BYTES, a multiple of 64]]\n");
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
#if defined(__x86_64__)
    if (rows_mode && __builtin_cpu_supports("avx2")) {
        // Each thread a contiguous share of whole 8-row tiles, as decode's row split gives it.
        const size_t n_rows = n * sizeof(uint64_t) / row_bytes / 8 * 8;
        const auto *base = reinterpret_cast<const uint8_t *>(a);
        for (int threads = 1; threads <= max_threads; ++threads)
            for (int rows : {1, 4, 8})
                for (const char *kind : {"none", "tile", "row"})
                    for (bool l2 : {false, true})
                        for (size_t pf : {1024, 2048, 4096, 8192}) {
                            const bool none = kind[0] == 'n';
                            if (none && (l2 || pf != 1024)) continue;  // once
                            const ReadRowsFn fn = read_rows_fn(rows, l2, kind[0] == 'r');
                            double best = 1e30;
                            for (int pass = 0; pass < 5; ++pass)
                                best = std::min(best, timed(threads, n_rows / 8, [&](int t, size_t lo, size_t hi) {
                                                    sums[static_cast<size_t>(t)] += fn(base + lo * 8 * row_bytes, (hi - lo) * 8, row_bytes, none ? 0 : pf);
                                                }));
                            std::printf("{\"pattern\":\"rows\",\"threads\":%d,\"rows\":%d,\"row_bytes\":%zu,\"prefetch\":\"%s\",\"ahead\":%zu,\"hint\":\"%s\",\"read_gb_s\":%.2f}\n",
                                        threads, rows, row_bytes, kind, none ? 0 : pf, l2 ? "T1" : "T0",
                                        static_cast<double>(n_rows * row_bytes) / best / 1e9);
                        }
    }
#endif
    return 0;
}
