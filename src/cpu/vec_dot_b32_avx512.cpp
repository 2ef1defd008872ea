// vec_dot_b32_avx512.cpp — the AVX-512 level's row kernels for the table formats (IQ4_NL, IQ4_XS,
// MXFP4): the AVX2 level's two-block tile (vec_dot_b32_x86.hpp) with each row's products of two blocks
// formed by two chained 256-bit VPDPBUSD instead of two maddubs, two madd and an add. The same exact
// integers, so the same bits as the AVX2 level. Compiled with the AVX-512 flags and reached only through
// the kernel table after the CPU check (cpu_features.cpp). Q2_K and Q3_K keep their AVX2 row tiles here:
// their 16-element scales are applied in the 16-bit madd, which VPDPBUSD has no place for. Prefill of
// all five goes to the panel GEMM.
#include "cpu/vec_dot_b32_x86.hpp"

#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

struct DotVnni {
    static __m256i dot2(__m256i a1, __m256i s1, __m256i a2, __m256i s2) {
        return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), a1, s1), a2, s2);
    }
};

} // namespace

// More tokens than one tile pass: the panel GEMM (matmul_panel_avx512.cpp), which gives the same bits.
void matmul_rows_iq4_nl_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_iq4_nl_avx512(job, r0, r1);
    matmul_rows<TilePairs<DotVnni>::K, IQ4NLPair>(job, r0, r1);
}
void matmul_rows_iq4_xs_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_iq4_xs_avx512(job, r0, r1);
    matmul_rows<TilePairs<DotVnni>::K, IQ4XSPair>(job, r0, r1);
}
void matmul_rows_mxfp4_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_mxfp4_avx512(job, r0, r1);
    matmul_rows<TilePairs<DotVnni>::K, MXFP4Pair>(job, r0, r1);
}
void matmul_rows_q2_k_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_q2_k_avx512(job, r0, r1);
    matmul_rows_q2_k_avx2(job, r0, r1);
}
void matmul_rows_q3_k_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_q3_k_avx512(job, r0, r1);
    matmul_rows_q3_k_avx2(job, r0, r1);
}

} // namespace ember::cpu::detail
