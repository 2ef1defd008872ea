// recurrent_avx2.cpp — recurrent_loops.hpp's kernels in 16 lanes with fused multiply-adds, held in two
// AVX registers (lanes 0-7, 8-15): the same operations, and so the same bits, as recurrent_avx512.cpp.
#include "cpu/recurrent_loops.hpp"

#include <cmath>
#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

struct Lanes16Avx2 {
    static constexpr int W = 16;
    struct Reg {
        __m256 lo, hi;
    };
    static Reg zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
    static Reg load(const float *p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
    static void store(float *p, Reg v) { _mm256_storeu_ps(p, v.lo), _mm256_storeu_ps(p + 8, v.hi); }
    static Reg scale(Reg a, float s) {
        const __m256 v = _mm256_set1_ps(s);
        return {_mm256_mul_ps(a.lo, v), _mm256_mul_ps(a.hi, v)};
    }
    static Reg madd(Reg a, Reg b, Reg c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
    static Reg madd(Reg a, float b, Reg c) {
        const __m256 v = _mm256_set1_ps(b);
        return {_mm256_fmadd_ps(a.lo, v, c.lo), _mm256_fmadd_ps(a.hi, v, c.hi)};
    }
    static float madd1(float a, float b, float c) { return std::fma(a, b, c); }
};

} // namespace

void gated_delta_head_avx2(const DeltaHead &job) { gated_delta_head<Lanes16Avx2>(job); }
void ssm_conv_chunk_avx2(const ConvChunk &job) { ssm_conv_chunk(job); }

} // namespace ember::cpu::detail
