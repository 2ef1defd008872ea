// recurrent_avx512.cpp — recurrent_loops.hpp's delta rule in 16 lanes with fused multiply-adds in one
// AVX-512 register: the same operations, and so the same bits, as recurrent_avx2.cpp's two registers.
#include "cpu/recurrent_loops.hpp"

#include <cmath>
#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

struct Lanes16Avx512 {
    static constexpr int W = 16;
    using Reg = __m512;
    static Reg zero() { return _mm512_setzero_ps(); }
    static Reg load(const float *p) { return _mm512_loadu_ps(p); }
    static void store(float *p, Reg v) { _mm512_storeu_ps(p, v); }
    static Reg scale(Reg a, float s) { return _mm512_mul_ps(a, _mm512_set1_ps(s)); }
    static Reg madd(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
    static Reg madd(Reg a, float b, Reg c) { return _mm512_fmadd_ps(a, _mm512_set1_ps(b), c); }
    static float madd1(float a, float b, float c) { return std::fma(a, b, c); }
};

} // namespace

void gated_delta_head_avx512(const DeltaHead &job) { gated_delta_head<Lanes16Avx512>(job); }

} // namespace ember::cpu::detail
