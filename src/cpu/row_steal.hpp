// row_steal.hpp — a decode product's rows split into one contiguous range per thread, with stealing.
//
// Why not the pool's chunks taken from one counter (matmul.cpp does that for prefill): decode streams
// the weights, and a thread that jumps to a far chunk loses its stream (the hardware prefetcher and the
// kernels' software prefetch restart). Measured on a 2-vCPU Xeon VM, TinyLlama-shaped Q4_0 at 2 threads:
// 6 or 16 chunks per product 37-38 tokens/s, one contiguous half per thread 41-42. But one share per
// thread would wait for a thread that the OS deschedules (the problem chunking solved). So each thread
// takes its own range from the front, one granule (about 16 KiB of weights) at a time, and a thread whose
// range is done takes granules from the back of the others' ranges: the owner's stream stays contiguous,
// and a descheduled thread holds up the rest by at most the granule it is in.
#pragma once

#include "cpu/threadpool.hpp"

#include <atomic>
#include <cstdint>

namespace ember::cpu::detail {

// Most ranges one job splits into (one per thread of the pool's width); wider pools use chunks instead.
constexpr int kStealMaxRanges = 16;
// Weights per granule: about a microsecond of streaming, against one uncontended atomic per granule
// (measured, TinyLlama Q4_0 decode: 4-16 KiB 41-42 tokens/s, 32-64 KiB 39-40, 256 KiB 40).
constexpr int64_t kStealGranuleBytes = 16 * 1024;

// Calls fn(r0, r1) over disjoint row ranges covering [0, n_rows), each a multiple of `align` rows (the
// last one excepted), on the pool's threads (width() ranges). Returns false, having done nothing, when
// the pool is wider than kStealMaxRanges. fn must not throw.
template <class F>
bool run_rows_stealing(ThreadPool &pool, int64_t n_rows, size_t row_bytes, int64_t align, F &&fn) {
    const int nth = pool.width();
    if (nth > kStealMaxRanges) return false;
    if (nth == 1) {
        // One thread (the pool narrowed on a busy machine): the whole product in one call, as a pool of
        // one thread runs it, without a CAS per granule and with the kernel's stream unbroken (measured
        // beside a busy process: a decode token took 730 us against 711 at -t 1 while granules were
        // handed out here). Still through the pool, whose windows at width 1 schedule the next probe.
        pool.run_chunks(1, [&](int64_t) { fn(int64_t{0}, n_rows); });
        return true;
    }
    int64_t gran = static_cast<int64_t>(kStealGranuleBytes / (row_bytes ? row_bytes : 1));
    gran = gran < align ? align : gran / align * align;
    const int64_t n_gran = (n_rows + gran - 1) / gran;
    // Each range's next granule from the front (low 32 bits) and its end (high 32 bits), in granules,
    // on a cache line of its own: only the owner touches it until the others run out.
    struct alignas(64) Range {
        std::atomic<uint64_t> fb;
    };
    Range ranges[kStealMaxRanges];
    for (int i = 0; i < nth; ++i)
        ranges[i].fb.store(static_cast<uint64_t>(n_gran * i / nth) | static_cast<uint64_t>(n_gran * (i + 1) / nth) << 32,
                           std::memory_order_relaxed);
    auto rows = [&](int64_t g) { fn(g * gran, (g + 1) * gran < n_rows ? (g + 1) * gran : n_rows); };
    pool.run_chunks(nth, [&](int64_t own) {
        // The own range, front to back.
        for (uint64_t v = ranges[own].fb.load(std::memory_order_relaxed);;) {
            const uint64_t f = v & 0xffffffffu, b = v >> 32;
            if (f >= b) break;
            if (!ranges[own].fb.compare_exchange_weak(v, v + 1, std::memory_order_relaxed)) continue;  // v reloaded
            rows(static_cast<int64_t>(f));
            v = ranges[own].fb.load(std::memory_order_relaxed);
        }
        // Then the others', from their backs.
        for (int k = 1; k < nth; ++k) {
            Range &r = ranges[(own + k) % nth];
            for (uint64_t v = r.fb.load(std::memory_order_relaxed);;) {
                const uint64_t f = v & 0xffffffffu, b = v >> 32;
                if (f >= b) break;
                if (!r.fb.compare_exchange_weak(v, v - (uint64_t{1} << 32), std::memory_order_relaxed)) continue;
                rows(static_cast<int64_t>(b - 1));
                v = r.fb.load(std::memory_order_relaxed);
            }
        }
    });
    return true;
}

} // namespace ember::cpu::detail
