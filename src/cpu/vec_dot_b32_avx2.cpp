// vec_dot_b32_avx2.cpp — matmul row kernels for the formats of quant_b32.hpp (Q2_K, Q3_K, IQ4_NL,
// IQ4_XS, MXFP4) on AVX2 + FMA + F16C. Compiled with -mavx2 -mfma -mf16c and reached only through the
// kernel table; nothing here calls ordinary inline functions of other headers (see simd_avx2.hpp).
//
// Each block of 32 weights is decoded in registers into 32 signed bytes q (the code, the centred code
// or the table entry: a byte shuffle does the table look-up), then multiplied with the token's 8-bit
// activations by maddubs (unsigned times signed: Q2_K's codes are unsigned already, the others go
// through the sign trick |q| * sign(x, q), safe since no decoded q is -128), widened to 32 bits by
// madd with the halves' integer scales (low 128 bits: elements 0..15, high: 16..31), reduced to one exact
// total per row and block, and scaled by d * d_x in float (tile() below: four rows share the vector
// operations). All these integer steps are exact (pairs at most 2 * 127 * 127 = 32258, under 2^15;
// scaled sums under 2^24), as in the scalar twin. Each output is summed in block order with the same
// operations whatever the tile, so results do not depend on how rows or tokens are split across threads
// and calls.
//
// A format's work is split in what its (super-)block needs once per row — prepare(): the scales
// unpacked to bytes, the f16 factors converted, Q2_K/Q3_K's code bytes loaded — and what each block of 32
// needs — codes() and scales(), cheap shifts, masks and shuffles of that state.
#include "core/dtype.hpp"
#include "cpu/matmul_avx2.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"
#include "cpu/vec_dot_b32_x86.hpp"

namespace ember::cpu::detail {

namespace {

// The 16-bit scales of block kb from 16 signed bytes (both 128-bit halves hold them): sub-block 2 kb's
// byte in the low half's 8 lanes, 2 kb + 1's in the high half's, sign-extended (byte placed in the high
// byte of each 16-bit lane, then shifted down arithmetically).
inline __m256i halves_of(__m256i bytes, int kb) {
    const short lo = static_cast<short>((2 * kb) << 8 | 0x80), hi = static_cast<short>((2 * kb + 1) << 8 | 0x80);
    const __m256i ctl = _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo));
    return _mm256_srai_epi16(_mm256_shuffle_epi8(bytes, ctl), 8);
}


// Bits 2k, 2k + 1 of each byte (Q2_K/Q3_K's low code bits for element l in byte l).
inline __m256i two_bits(__m256i v, int k) {
    return _mm256_and_si256(_mm256_srli_epi16(v, 2 * k), _mm256_set1_epi8(3));
}

struct Q2K {
    static constexpr bool kSigned = false, kMin = true;
    static constexpr int kSub = 8;
    static constexpr size_t kBytes = sizeof(BlockQ2_K);
    struct State {
        __m256i qs[2], sc, m;
        float d, dmin;
    };
    static void prepare(const uint8_t *p, State &s) {
        const auto &b = *reinterpret_cast<const BlockQ2_K *>(p);
        s.qs[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs));
        s.qs[1] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs + 32));
        const __m256i v = bytes16(reinterpret_cast<const int8_t *>(b.scales));
        s.sc = _mm256_and_si256(v, _mm256_set1_epi8(15));
        s.m = _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
        s.d = avx2_half_to_float(b.d);
        s.dmin = avx2_half_to_float(b.dmin);
    }
    static __m256i codes(const State &s, int kb) { return two_bits(s.qs[kb / 4], kb % 4); }
    static __m256i scales(const State &s, int kb) { return halves_of(s.sc, kb); }
    static __m256i mins(const State &s, int kb) { return halves_of(s.m, kb); }
};

struct Q3K {
    static constexpr bool kSigned = true, kMin = false;
    static constexpr int kSub = 8;
    static constexpr size_t kBytes = sizeof(BlockQ3_K);
    struct State {
        __m256i qs[2], hm, sc;
        float d, dmin;
    };
    static void prepare(const uint8_t *p, State &s) {
        const auto &b = *reinterpret_cast<const BlockQ3_K *>(p);
        s.qs[0] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs));
        s.qs[1] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.qs + 32));
        s.hm = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b.hmask));
        // The 16 6-bit scales: low nibbles of bytes 0..7 are sub-blocks 0..7, their high nibbles 8..15;
        // bits 2 (j / 4) of byte 8 + j % 4 are sub-block j's top two.
        uint64_t lo8, hi4 = 0;
        __builtin_memcpy(&lo8, b.scales, 8);
        __builtin_memcpy(&hi4, b.scales + 8, 4);
        const __m128i l = _mm_cvtsi64_si128(static_cast<long long>(lo8));
        const __m128i low = _mm_and_si128(_mm_unpacklo_epi64(l, _mm_srli_epi16(l, 4)), _mm_set1_epi8(15));
        // Byte j of top = (byte 8 + j % 4) >> 2 (j / 4) & 3: bytes 8..11 as a word, repeated, word g
        // shifted by 2g (the bits a byte receives from the next one land above the mask).
        const __m128i h = _mm_set1_epi32(static_cast<int>(hi4));
        const __m128i top = _mm_and_si128(_mm_srlv_epi32(h, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
        const __m128i sc = _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(top, 4)), _mm_set1_epi8(32));
        s.sc = _mm256_broadcastsi128_si256(sc);
        s.d = avx2_half_to_float(b.d);
    }
    static __m256i codes(const State &s, int kb) {
        const __m256i low = two_bits(s.qs[kb / 4], kb % 4);
        const __m256i bit = _mm256_and_si256(s.hm, _mm256_set1_epi8(static_cast<char>(1 << kb)));
        const __m256i clear = _mm256_cmpeq_epi8(bit, _mm256_setzero_si256());  // -1 where the high bit is 0
        return _mm256_add_epi8(low, _mm256_and_si256(clear, _mm256_set1_epi8(-4)));
    }
    static __m256i scales(const State &s, int kb) { return halves_of(s.sc, kb); }
    static __m256i mins(const State &, int) { return _mm256_setzero_si256(); }
};

// Two blocks' halves' products (vec_dot_b32_x86.hpp): maddubs (pairs at most 2 * 127 * 127 = 32258)
// and madd against ones, per half, added.
struct DotAvx2 {
    static __m256i dot2(__m256i a1, __m256i s1, __m256i a2, __m256i s2) {
        const __m256i ones = _mm256_set1_epi16(1);
        return _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(a1, s1), ones),
                                _mm256_madd_epi16(_mm256_maddubs_epi16(a2, s2), ones));
    }
};

// The exact totals of four rows' 8-lane integer sums, row i in lane i.
inline __m128i totals4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// R (4 or 1) floats in the lanes of a vector, the rest zero.
template <int R, class V>
inline __m128 lanes(V v) {
    if constexpr (R == 4) return _mm_setr_ps(v(0), v(1), v(2), v(3));
    else return _mm_set_ss(v(0));
}

// R rows (4, or 1 for the last rows of a chunk) x T tokens (1..kTokTile): each row's (super-)block is
// prepared once and each block decoded once for the T tokens, each token's activation block loaded once
// for the R rows. Per (token, block) the R exact integer totals go into one vector, converted and scaled
// in one FMA: row i's lane does the same float operations whatever R and T are, so results do not
// depend on the tiling.
template <class F, int R, int T>
void tile(const MatmulJob &job, int64_t r, int64_t t0) {
    const int64_t nb = job.xq.nb, nsb = nb / F::kSub;
    const uint8_t *w[R];
    for (int i = 0; i < R; ++i) w[i] = job.w + static_cast<size_t>(r + i) * job.row_bytes;
    const int8_t *xq[T];
    const float *xd[T];
    for (int t = 0; t < T; ++t) {
        xq[t] = job.xq.qs + (t0 + t) * job.n_in;
        xd[t] = job.xq.d + (t0 + t) * nb;
    }
    const __m256i ones8 = _mm256_set1_epi8(1), zero = _mm256_setzero_si256();
    __m128 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
    const bool pf = streams(job, T, t0);  // decode: prefetch the weights ahead (matmul_avx2.hpp)
    for (int64_t sb = 0; sb < nsb; ++sb) {
        if (pf) prefetch_step<R, static_cast<int>(F::kBytes)>(w[0], sb);
        typename F::State st[R];
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) F::prepare(w[i] + sb * F::kBytes, st[i]);
        // Built in registers: four scalar stores and a vector load would stall on store forwarding.
        const __m128 dw = lanes<R>([&](int i) { return st[i].d; });
        __m128 dmw = _mm_setzero_ps();
        if constexpr (F::kMin) dmw = lanes<R>([&](int i) { return st[i].dmin; });
#pragma GCC unroll 8
        for (int kb = 0; kb < F::kSub; ++kb) {
            const int64_t ib = sb * F::kSub + kb;
            __m256i q[R], qa[R], sc[R];
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                q[i] = F::codes(st[i], kb);
                qa[i] = F::kSigned ? _mm256_sign_epi8(q[i], q[i]) : q[i];  // |q|
                sc[i] = F::scales(st[i], kb);
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[t] + ib * 32));
                __m256i p[4] = {zero, zero, zero, zero};
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) {
                    const __m256i xs = F::kSigned ? _mm256_sign_epi8(x, q[i]) : x;
                    p[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(qa[i], xs), sc[i]);
                }
                const __m128 dx = _mm_broadcast_ss(xd[t] + ib);
                acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(totals4(p[0], p[1], p[2], p[3])), _mm_mul_ps(dw, dx), acc[t]);
                if constexpr (F::kMin) {
                    const __m256i sx = _mm256_maddubs_epi16(ones8, x);  // the pairs' sums of x
                    __m256i m[4] = {zero, zero, zero, zero};
#pragma GCC unroll 4
                    for (int i = 0; i < R; ++i) m[i] = _mm256_madd_epi16(sx, F::mins(st[i], kb));
                    acc[t] = _mm_fnmadd_ps(_mm_cvtepi32_ps(totals4(m[0], m[1], m[2], m[3])), _mm_mul_ps(dmw, dx), acc[t]);
                }
            }
        }
    }
    for (int t = 0; t < T; ++t) {
        float out[4];
        _mm_storeu_ps(out, acc[t]);
        for (int i = 0; i < R; ++i) job.y[(t0 + t) * job.y_stride + r + i] = out[i] + (job.bias ? job.bias[r + i] : 0.0f);
    }
}

template <class F, int R, int T>
struct Tile {
    static void run(const MatmulJob &job, int64_t r, int64_t t0) { tile<F, R, T>(job, r, t0); }
};

} // namespace

void matmul_rows_q2_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<Tile, Q2K>(job, r0, r1); }
void matmul_rows_q3_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_q3_k_avx2(job, r0, r1);  // same bits, matmul_panel_avx2.cpp
    matmul_rows<Tile, Q3K>(job, r0, r1);
}
void matmul_rows_iq4_nl_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<TilePairs<DotAvx2>::K, IQ4NLPair>(job, r0, r1); }
void matmul_rows_iq4_xs_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<TilePairs<DotAvx2>::K, IQ4XSPair>(job, r0, r1); }
void matmul_rows_mxfp4_avx2(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return matmul_panels_mxfp4_avx2(job, r0, r1);  // same bits, matmul_panel_avx2.cpp
    matmul_rows<TilePairs<DotAvx2>::K, MXFP4Pair>(job, r0, r1);
}

} // namespace ember::cpu::detail
