// vec_dot_avx512.cpp — the AVX-512 level's Q8_0 row kernel: the Q8_0 tile of the AVX2 level
// (vec_dot_q8_0_x86.hpp) with its integer products formed by VPDPBUSD (256-bit, AVX512-VL + VNNI)
// instead of maddubs + madd: one instruction where there were two, the same exact integers, so the same
// bits as the AVX2 level. Compiled with the AVX-512 flags and reached only through the kernel table
// after the CPU check (cpu_features.cpp).
#include "cpu/matmul_avx2.hpp"
#include "cpu/vec_dot.hpp"
#include "cpu/vec_dot_q8_0_x86.hpp"

#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

struct DotVnni {
    static __m256i dot(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};

} // namespace

void matmul_rows_q8_0_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive<Q8_0T<DotVnni>>(job, r0, r1); }

} // namespace ember::cpu::detail
