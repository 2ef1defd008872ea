// vec_dot_b32_avx2.cpp — matmul row kernels for the formats of quant_b32.hpp (Q2_K, Q3_K, IQ4_NL,
// IQ4_XS, MXFP4) on AVX2 + FMA + F16C. Compiled with -mavx2 -mfma -mf16c and reached only through the
// kernel table; nothing here calls ordinary inline functions of other headers (see simd_avx2.hpp).
//
// Each block of 32 weights is decoded in registers into 32 signed bytes q (the code, the centred code
// or the table entry: a byte shuffle does the table look-up), then multiplied with the token's 8-bit
// activations by maddubs (unsigned times signed: Q2_K's codes are unsigned already, the others go
// through the sign trick |q| * sign(x, q), safe since no decoded q is -128), widened to 32 bits by
// madd with the halves' integer scales (low 128 bits: elements 0..15, high: 16..31), converted once and
// accumulated with one FMA by d * d_x. All these integer steps are exact (pairs at most 2 * 127 * 127 =
// 32258, under 2^15; scaled sums under 2^24), as in the scalar twin. A block is decoded once for up to
// kTokTile tokens. Rows are independent and each output is summed in block order, so results do not
// depend on how rows or tokens are split across threads and calls.
#include "core/dtype.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

namespace ember::cpu::detail {

namespace {

struct Dec {
    __m256i q;      // 32 signed codes
    __m256i sc;     // 16-bit scales: sc_0 in the low 128 bits, sc_1 in the high
    float d;
    __m256i m;      // Q2_K: 16-bit mins m_0, m_1 placed as sc
    float dmin;
};

inline __m256i halves_i16(int a, int b) {
    return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(b)), _mm_set1_epi16(static_cast<short>(a)));
}

// 32 table entries from 16 bytes of nibbles in Q4_0's placement.
inline __m256i table_lookup(const uint8_t *qs, __m256i table) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
    const __m128i m4 = _mm_set1_epi8(15);
    const __m256i idx = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
    return _mm256_shuffle_epi8(table, idx);
}

inline __m256i table_of(const int8_t *t) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i *>(t));
    return _mm256_set_m128i(v, v);
}

// Bits 2k, 2k + 1 of 32 bytes (Q2_K/Q3_K's low code bits for element l in byte l).
inline __m256i two_bits(const uint8_t *qs, int k) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qs));
    return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
}

struct Q2K {
    static constexpr bool kSigned = false, kMin = true;
    static void decode(const uint8_t *row, int64_t ib, Dec &o) {
        const auto &b = reinterpret_cast<const BlockQ2_K *>(row)[ib / 8];
        const int kb = static_cast<int>(ib % 8);
        o.q = two_bits(b.qs + 32 * (kb / 4), kb % 4);
        const uint8_t s0 = b.scales[2 * kb], s1 = b.scales[2 * kb + 1];
        o.sc = halves_i16(s0 & 15, s1 & 15);
        o.m = halves_i16(s0 >> 4, s1 >> 4);
        o.d = avx2_half_to_float(b.d);
        o.dmin = avx2_half_to_float(b.dmin);
    }
};

// Q3_K's scale j, as quant_b32.hpp's q3_k_scale (repeated: that one is baseline code).
inline int q3k_scale(const uint8_t *s, int j) {
    const int lo = (s[j % 8] >> (j < 8 ? 0 : 4)) & 15;
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

struct Q3K {
    static constexpr bool kSigned = true, kMin = false;
    static void decode(const uint8_t *row, int64_t ib, Dec &o) {
        const auto &b = reinterpret_cast<const BlockQ3_K *>(row)[ib / 8];
        const int kb = static_cast<int>(ib % 8);
        const __m256i low = two_bits(b.qs + 32 * (kb / 4), kb % 4);
        const __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.hmask));
        const __m256i bit = _mm256_and_si256(hm, _mm256_set1_epi8(static_cast<char>(1 << kb)));
        const __m256i clear = _mm256_cmpeq_epi8(bit, _mm256_setzero_si256());  // -1 where the high bit is 0
        o.q = _mm256_add_epi8(low, _mm256_and_si256(clear, _mm256_set1_epi8(-4)));
        o.sc = halves_i16(q3k_scale(b.scales, 2 * kb), q3k_scale(b.scales, 2 * kb + 1));
        o.d = avx2_half_to_float(b.d);
    }
};

struct IQ4NL {
    static constexpr bool kSigned = true, kMin = false;
    static void decode(const uint8_t *row, int64_t ib, Dec &o) {
        const auto &b = reinterpret_cast<const BlockIQ4_NL *>(row)[ib];
        o.q = table_lookup(b.qs, table_of(kIq4nlValues));
        o.sc = _mm256_set1_epi16(1);
        o.d = avx2_half_to_float(b.d);
    }
};

struct IQ4XS {
    static constexpr bool kSigned = true, kMin = false;
    static void decode(const uint8_t *row, int64_t ib, Dec &o) {
        const auto &b = reinterpret_cast<const BlockIQ4_XS *>(row)[ib / 8];
        const int j = static_cast<int>(ib % 8);
        o.q = table_lookup(b.qs + 16 * j, table_of(kIq4nlValues));
        const int ls = (((b.scales_l[j / 2] >> (4 * (j % 2))) & 15) | ((b.scales_h >> (2 * j)) & 3) << 4) - 32;
        o.sc = _mm256_set1_epi16(static_cast<short>(ls));
        o.d = avx2_half_to_float(b.d);
    }
};

struct MXFP4 {
    static constexpr bool kSigned = true, kMin = false;
    static void decode(const uint8_t *row, int64_t ib, Dec &o) {
        const auto &b = reinterpret_cast<const BlockMXFP4 *>(row)[ib];
        o.q = table_lookup(b.qs, table_of(kMxfp4Values));
        o.sc = _mm256_set1_epi16(1);
        // 2^(e - 128), as core/dtype.hpp's e8m0_half_to_fp32 (subnormal for e < 2).
        const uint32_t bits = b.e < 2 ? 0x00200000u << b.e : static_cast<uint32_t>(b.e - 1) << 23;
        __builtin_memcpy(&o.d, &bits, 4);
    }
};

template <class F>
void matmul_rows(const MatmulJob &job, int64_t r0, int64_t r1) {
    const int64_t nb = job.xq.nb;
    const __m256i ones8 = _mm256_set1_epi8(1);
    for (int64_t r = r0; r < r1; ++r) {
        const uint8_t *w = job.w + static_cast<size_t>(r) * job.row_bytes;
        const float bias = job.bias ? job.bias[r] : 0.0f;
        for (int64_t t0 = 0; t0 < job.n_tokens; t0 += kTokTile) {
            const int nt = job.n_tokens - t0 < kTokTile ? static_cast<int>(job.n_tokens - t0) : kTokTile;
            __m256 acc[kTokTile];
            for (int j = 0; j < kTokTile; ++j) acc[j] = _mm256_setzero_ps();
            Dec dec;
            for (int64_t ib = 0; ib < nb; ++ib) {
                F::decode(w, ib, dec);
                const __m256i qa = F::kSigned ? _mm256_sign_epi8(dec.q, dec.q) : dec.q;  // |q|
                for (int j = 0; j < nt; ++j) {
                    const int64_t t = t0 + j;
                    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(job.xq.qs + t * job.n_in + ib * 32));
                    const __m256i xs = F::kSigned ? _mm256_sign_epi8(x, dec.q) : x;
                    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(qa, xs), dec.sc);
                    const float dx = job.xq.d[t * nb + ib];
                    acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dec.d * dx), acc[j]);
                    if constexpr (F::kMin) {
                        const __m256i m = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, x), dec.m);
                        acc[j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(dec.dmin * dx), acc[j]);
                    }
                }
            }
            for (int j = 0; j < nt; ++j) job.y[(t0 + j) * job.y_stride + r] = avx2_hsum(acc[j]) + bias;
        }
    }
}

} // namespace

void matmul_rows_q2_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<Q2K>(job, r0, r1); }
void matmul_rows_q3_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<Q3K>(job, r0, r1); }
void matmul_rows_iq4_nl_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<IQ4NL>(job, r0, r1); }
void matmul_rows_iq4_xs_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<IQ4XS>(job, r0, r1); }
void matmul_rows_mxfp4_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<MXFP4>(job, r0, r1); }

} // namespace ember::cpu::detail
