// matmul_walk.hpp — the walk the tiled matmul drivers share (matmul_avx2.hpp's drive for the AVX2
// kernels, matmul_float_avx512.cpp's for the AVX-512 float tiles): weight rows in blocks of about
// kRowBlockBytes, every group of up to MaxT tokens passing over a block before the next, so that the block
// is read from memory once and then from L2. Internal linkage, as in matmul_avx2.hpp: each ISA's file
// compiles its own copy.
#pragma once

#include "cpu/vec_dot.hpp"

#include <cstdint>

namespace ember::cpu::detail {

namespace {

// Calls rows.operator()<T>(rb, re, t0) with T = n, a constant (1 .. MaxT) for the tiles' unrolling.
template <int T, int MaxT, class Rows>
inline void rows_for_group(int64_t n, Rows &rows, int64_t rb, int64_t re, int64_t t0) {
    if constexpr (T < MaxT) {
        if (n == T) return rows.template operator()<T>(rb, re, t0);
        return rows_for_group<T + 1, MaxT>(n, rows, rb, re, t0);
    } else {
        rows.template operator()<MaxT>(rb, re, t0);
    }
}

// rows.operator()<T>(rb, re, t0) computes weight rows [rb, re) for tokens t0 .. t0 + T - 1.
template <int MaxT, class Rows>
void walk_row_blocks(const MatmulJob &job, int64_t r0, int64_t r1, Rows &&rows) {
    int64_t block = static_cast<int64_t>(kRowBlockBytes / (job.row_bytes ? job.row_bytes : 1));
    block = block < 4 ? 4 : block & ~int64_t{3};
    for (int64_t rb = r0; rb < r1; rb += block) {
        const int64_t re = rb + block < r1 ? rb + block : r1;
        for (int64_t t0 = 0; t0 < job.n_tokens; t0 += MaxT)
            rows_for_group<1, MaxT>(job.n_tokens - t0 < MaxT ? job.n_tokens - t0 : MaxT, rows, rb, re, t0);
    }
}

} // namespace

} // namespace ember::cpu::detail
