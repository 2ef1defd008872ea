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

inline __m256i bytes16(const int8_t *b) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(b)));
}

inline __m256i table_of(const int8_t *t) { return bytes16(t); }

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

// ---- the table formats (IQ4_NL, IQ4_XS, MXFP4), two blocks of 32 at a time ------------------------------
// Their blocks have one scale each (IQ4_XS's d * (ls - 32) is exact in float), so the integer part of a
// block is a plain sum of table entries times activations, and two blocks share every vector operation:
// the low nibbles of blocks j and j + 1 (their elements 0..15) make one 256-bit index vector, the high
// nibbles (16..31) another, and the activations are permuted to match (once per token, for all rows).
// No cross-lane shuffle of weights is needed, and four rows' totals of both blocks come out of three
// hadds as [rows of block j | rows of block j + 1]. A last odd block pairs with zero weights and zero
// activations.
struct Pair {
    __m256i lo, hi;   // table entries: [block j elements 0..15 | block j + 1's], then 16..31
    float d0, d1;     // the blocks' scales (d1 = 0 without a second block)
};

// Nibble indices of two blocks' 16 code bytes (b1 may be null: no second block), looked up in table.
inline void nibble_pair(const uint8_t *b0, const uint8_t *b1, __m256i table, Pair &o) {
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b0));
    const __m128i v1 = b1 ? _mm_loadu_si128(reinterpret_cast<const __m128i *>(b1)) : _mm_setzero_si128();
    const __m256i v = _mm256_set_m128i(v1, v0), m4 = _mm256_set1_epi8(15);
    o.lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
    o.hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    if (!b1) {  // zero weights, whatever the table holds at index 0
        o.lo = _mm256_blend_epi32(o.lo, _mm256_setzero_si256(), 0xf0);
        o.hi = _mm256_blend_epi32(o.hi, _mm256_setzero_si256(), 0xf0);
    }
}

struct IQ4NLPair {
    static constexpr int kPairBytes = 2 * sizeof(BlockIQ4_NL);
    static void load(const uint8_t *row, int64_t ib, bool two, Pair &o) {
        const auto *b = reinterpret_cast<const BlockIQ4_NL *>(row) + ib;
        nibble_pair(b[0].qs, two ? b[1].qs : nullptr, table_of(kIq4nlValues), o);
        o.d0 = avx2_half_to_float(b[0].d);
        o.d1 = two ? avx2_half_to_float(b[1].d) : 0.0f;
    }
};

// 2^(e - 128), as core/dtype.hpp's e8m0_half_to_fp32 (subnormal for e < 2).
inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

struct MXFP4Pair {
    static constexpr int kPairBytes = 2 * sizeof(BlockMXFP4);
    static void load(const uint8_t *row, int64_t ib, bool two, Pair &o) {
        const auto *b = reinterpret_cast<const BlockMXFP4 *>(row) + ib;
        nibble_pair(b[0].qs, two ? b[1].qs : nullptr, table_of(kMxfp4Values), o);
        o.d0 = e8m0_half(b[0].e);
        o.d1 = two ? e8m0_half(b[1].e) : 0.0f;
    }
};

// IQ4_XS: ib is even and a super-block holds 8 sub-blocks, so both blocks are in one super-block.
struct IQ4XSPair {
    static constexpr int kPairBytes = sizeof(BlockIQ4_XS) / 4;
    static void load(const uint8_t *row, int64_t ib, bool, Pair &o) {
        const auto &b = reinterpret_cast<const BlockIQ4_XS *>(row)[ib / 8];
        const int j = static_cast<int>(ib % 8);
        nibble_pair(b.qs + 16 * j, b.qs + 16 * j + 16, table_of(kIq4nlValues), o);
        const float d = avx2_half_to_float(b.d);
        const int s = b.scales_l[j / 2], h = b.scales_h >> (2 * j);  // j even: low and high nibble of one byte
        o.d0 = d * static_cast<float>(((s & 15) | (h & 3) << 4) - 32);  // exact: 11 + 6 significant bits
        o.d1 = d * static_cast<float>(((s >> 4) | (h >> 2 & 3) << 4) - 32);
    }
};

template <class F, int R, int T>
void tile_pairs(const MatmulJob &job, int64_t r, int64_t t0) {
    const int64_t nb = job.xq.nb;
    const uint8_t *w[R];
    for (int i = 0; i < R; ++i) w[i] = job.w + static_cast<size_t>(r + i) * job.row_bytes;
    const int8_t *xq[T];
    const float *xd[T];
    for (int t = 0; t < T; ++t) {
        xq[t] = job.xq.qs + (t0 + t) * job.n_in;
        xd[t] = job.xq.d + (t0 + t) * nb;
    }
    const __m256i ones16 = _mm256_set1_epi16(1), zero = _mm256_setzero_si256();
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    const bool pf = streams(job, T, t0);  // decode: prefetch the weights ahead (matmul_avx2.hpp)
    for (int64_t ib = 0; ib < nb; ib += 2) {
        if (pf) prefetch_step<R, F::kPairBytes>(w[0], ib / 2);
        const bool two = ib + 1 < nb;
        Pair pr[R];
        __m256i alo[R], ahi[R];
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) {
            F::load(w[i], ib, two, pr[i]);
            alo[i] = _mm256_sign_epi8(pr[i].lo, pr[i].lo);
            ahi[i] = _mm256_sign_epi8(pr[i].hi, pr[i].hi);
        }
        __m256 dw;  // [block j's scale of rows 0..3 | block j + 1's]
        if constexpr (R == 4)
            dw = _mm256_setr_ps(pr[0].d0, pr[1].d0, pr[2].d0, pr[3].d0, pr[0].d1, pr[1].d1, pr[2].d1, pr[3].d1);
        else
            dw = _mm256_setr_ps(pr[0].d0, 0, 0, 0, pr[0].d1, 0, 0, 0);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            const __m256i xa = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[t] + ib * 32));
            const __m256i xb = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(xq[t] + ib * 32 + 32)) : zero;
            const __m256i xlo = _mm256_permute2x128_si256(xa, xb, 0x20), xhi = _mm256_permute2x128_si256(xa, xb, 0x31);
            __m256i p[4] = {zero, zero, zero, zero};
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
                const __m256i a = _mm256_madd_epi16(_mm256_maddubs_epi16(alo[i], _mm256_sign_epi8(xlo, pr[i].lo)), ones16);
                const __m256i b = _mm256_madd_epi16(_mm256_maddubs_epi16(ahi[i], _mm256_sign_epi8(xhi, pr[i].hi)), ones16);
                p[i] = _mm256_add_epi32(a, b);
            }
            const __m256i tot = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
            const __m256 dx = _mm256_set_m128(_mm_set1_ps(two ? xd[t][ib + 1] : 0.0f), _mm_broadcast_ss(xd[t] + ib));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(dw, dx), acc[t]);
        }
    }
    for (int t = 0; t < T; ++t) {
        float out[4];
        _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(acc[t]), _mm256_extractf128_ps(acc[t], 1)));
        for (int i = 0; i < R; ++i) job.y[(t0 + t) * job.y_stride + r + i] = out[i] + (job.bias ? job.bias[r + i] : 0.0f);
    }
}

template <class F, int R, int T>
struct Tile {
    static void run(const MatmulJob &job, int64_t r, int64_t t0) { tile<F, R, T>(job, r, t0); }
};
template <class F, int R, int T>
struct TilePairs {
    static void run(const MatmulJob &job, int64_t r, int64_t t0) { tile_pairs<F, R, T>(job, r, t0); }
};

template <template <class, int, int> class K, class F, int R>
void tokens(const MatmulJob &job, int64_t r) {
    int64_t t0 = 0;
    for (; t0 + kTokTile <= job.n_tokens; t0 += kTokTile) K<F, R, kTokTile>::run(job, r, t0);
    static_assert(kTokTile == 4);
    switch (job.n_tokens - t0) {
    case 3: K<F, R, 3>::run(job, r, t0); break;
    case 2: K<F, R, 2>::run(job, r, t0); break;
    case 1: K<F, R, 1>::run(job, r, t0); break;
    default: break;
    }
}

template <template <class, int, int> class K, class F>
void matmul_rows(const MatmulJob &job, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) tokens<K, F, 4>(job, r);
    for (; r < r1; ++r) tokens<K, F, 1>(job, r);
}

} // namespace

void matmul_rows_q2_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<Tile, Q2K>(job, r0, r1); }
void matmul_rows_q3_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<Tile, Q3K>(job, r0, r1); }
void matmul_rows_iq4_nl_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<TilePairs, IQ4NLPair>(job, r0, r1); }
void matmul_rows_iq4_xs_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<TilePairs, IQ4XSPair>(job, r0, r1); }
void matmul_rows_mxfp4_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { matmul_rows<TilePairs, MXFP4Pair>(job, r0, r1); }

} // namespace ember::cpu::detail
