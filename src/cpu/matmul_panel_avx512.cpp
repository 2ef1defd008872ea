// matmul_panel_avx512.cpp — the prefill GEMM for Q4_0, Q8_0, Q4_K and Q6_K weights (and Q3_K, IQ4_NL, IQ4_XS,
// MXFP4 through Q6_K's panel, Q2_K with its offsets beside it) on AVX-512 with VNNI:
// 16-row panels repacked on the fly, multiplied with VPDPBUSD. Compiled with the AVX-512 flags
// (CMakeLists.txt: *_avx512.cpp) and reached only through the kernel table after the CPU check
// (cpu_features.cpp); see simd_avx2.hpp for why nothing here calls ordinary inline functions of other
// headers.
//
// Why. The AVX2 panel GEMM (matmul_panel_avx2.cpp) holds 4 weights of each of 8 rows in a 256-bit
// vector and needs maddubs (u8 x s8 -> 16-bit pairs), a 16-bit add and, once per block, madd against
// ones to widen. VPDPBUSD does the multiply, the sum of 4 and the 32-bit accumulation in one
// instruction, and a 512-bit vector holds 16 rows: per 32 multiply-adds about 1 op instead of ~2.4,
// with 32 registers for an 8-token tile. The block's product per row is the same exact integer as the
// AVX2 kernels compute, and the scales are applied with the same float operations in the same order,
// lane by lane, so this level gives the bits of the AVX2 level (tests/test_cpu_kernels.cpp compares
// them) and results still do not depend on the batch size or the thread count.
//
// Q4_K is multiplied against activations quantized with one scale per super-block of 256 (QuantActsK,
// vec_dot.hpp), which every level's Q4_K kernel follows to the bit: per super-block, token and row two
// exact integers (the codes' products weighted by the 6-bit scales, and the mins against the
// activations' block sums), then two FMAs. The 6-bit scales are applied in the integers (VPDPWSSD), so
// the float epilogue runs once per super-block instead of once per block of 32 (see the Q4_K section).
//
// Layout and order as in the AVX2 file, with 16 rows: a packed block holds the 16 rows' codes one per
// byte, vector k (64 bytes) holding 4 consecutive elements of each row (dword i = row i), and the rows'
// scales. Partial panels repeat their last row in the unused lanes and never store them; between
// k-chunks the accumulators are stored to y and reloaded exactly.
#include "core/dtype.hpp"
#include "cpu/panel_pack_x86.hpp"
#include "cpu/rows16.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"

// avx512fintrin.h's _mm512_undefined_* initialise themselves on purpose (GCC bug 105593), which GCC 12
// reports as -Wuninitialized once Q6_K's tile is inlined into more packers (the build already silences
// the maybe- form for these files, CMakeLists.txt).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

constexpr int kPanelRows = kPanel16;
// Tokens per tile: 8 accumulators and 8 block sums in registers (of 32), and 8 independent VPDPBUSD
// chains to cover its latency.
constexpr int kTileTokens = 8;

// 4 activation bytes broadcast to every row's lane.
inline __m512i broadcast4(const int8_t *x) {
    int32_t v;
    __builtin_memcpy(&v, x, 4);
    return _mm512_set1_epi32(v);
}

struct ChunkEdges {
    __mmask16 mask;   // the panel's real rows
    bool first, last;
};
template <int T, class Tokens>
inline void load_acc(const Tokens &op, const ChunkEdges &e, __m512 (&acc)[T]) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[t] = e.first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(e.mask, op.y[t]);
}
template <int T, class Tokens>
inline void store_acc(const MatmulJob &job, int64_t r, const Tokens &op, const ChunkEdges &e, __m512 (&acc)[T]) {
    const __m512 bias = e.last && job.bias ? _mm512_maskz_loadu_ps(e.mask, job.bias + r) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(op.y[t], e.mask, e.last ? _mm512_add_ps(acc[t], bias) : acc[t]);
}

// ---- Q4_0, Q8_0 --------------------------------------------------------------------------------------
// Unsigned codes one per byte (Q4Block16, panel_pack_x86.hpp), s the codes' scale. Q4_0's codes
// (0..15) sit kOffset = 8 above the weights, Q8_0's (w + 128, so that the signed weights become
// VPDPBUSD's unsigned operand and the activations its signed one as they are) kOffset = 128:
// sum (code - kOffset) x = sum code x - kOffset sum x, taken off in float from the exact integer
// (|sum code x| <= 32 * 255 * 127 < 2^24, so both terms and the difference are exact), which gives
// the row tiles' exact integer as a float, then one rounding for the scales, as they do.
using Q4Block = Q4Block16;

template <int kOffset>
struct Q4Panel {
    using Block = Q4Block;
    template <int T>
    static void tile(const MatmulJob &job, const Block *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, const ChunkEdges &e) {
        const PanelTokens<T> op(job, b0, r, t0);
        __m512 acc[T];
        load_acc<T>(op, e, acc);
        for (int64_t b = 0; b < n; ++b) {
            __m512i isum[T];
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {
                const __m512i w = _mm512_load_si512(pb[b].q + 64 * k);
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) isum[t] = _mm512_dpbusd_epi32(isum[t], w, broadcast4(op.xq[t] + b * 32 + 4 * k));
            }
            const __m512 s = _mm512_load_ps(pb[b].s);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                __m512 f = _mm512_cvtepi32_ps(isum[t]);
                const __m512 dx = _mm512_set1_ps(op.xd[t][b]);
                f = _mm512_fnmadd_ps(_mm512_set1_ps(static_cast<float>(kOffset)), _mm512_set1_ps(op.xs[t][b]), f);
                acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(s, dx), acc[t]);
            }
        }
        store_acc<T>(job, r, op, e, acc);
    }
};

struct PackQ4_0 : Q4Panel<8> {
    static constexpr int64_t kUnit = 1;
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        pack_q4_0_16(rows, b0, n, out, 0);
    }
};

struct PackQ8_0 : Q4Panel<128> {
    static constexpr int64_t kUnit = 1;
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        pack_q8_0_16(rows, b0, n, out, 0x80);
    }
};

// ---- Q4_K ----------------------------------------------------------------------------------------------
// Against activations with one scale per super-block (QuantActsK; vec_dot.hpp gives the steps every
// level follows): per super-block, token and row the exact integers
//   isum = sum_j sc_j * sum_l code_(32j + l) q_(32j + l)   and   msum = sum_j m_j * sum_j(q),
// then two float steps, acc = fma(float(isum), d * d_x, acc) and acc = fnmadd(float(msum), dmin * d_x, acc).
// The codes (0..15) are VPDPBUSD's unsigned operand as for Q4_0. A 16-element half's sum fits in 16 bits
// (|h| <= 16 * 15 * 127 = 30480), so VPDPWSSD against the pair (sc_j, 0) multiplies it by its scale and
// adds it to isum in one instruction, the half's high word (its sign) meeting the 0: two per sub-block,
// where the per-32 kernel spent a convert, a multiply, two FMAs and broadcasts. msum is 4 VPDPWSSDs of the
// rows' min pairs against the token's block sums (int16 pairs, broadcast). Both integers are exact in
// int32 (|isum| < 2^25, |msum| < 2^24), the float steps once per super-block: the bits of every level.
// Measured against the per-32 panel it replaced (test_cpu_kernels' EMBER_KERNEL_BENCH=gemm, EMBER_CPU_ISA=
// avx512, interleaved weights, 256 tokens, medians of 5 alternating rounds on a loaded 2-vCPU Xeon): 1
// thread 1.12-1.16x, 2 threads 1.08-1.14x. Tried and left out, each within the noise of this: the
// scales in float (a convert and an FMA per sub-block into two exact partial sums, added once), both
// halves' sums in flight at once (4, 6 or 8 tokens per tile), 32-row panels (each broadcast serving two
// VPDPBUSDs), token slabs of 32, 64 or 256, and prefetching the next super-block's activations.
struct PackQ4_K {
    using Block = Q4KBlock16;
    static constexpr int64_t kUnit = QK_K / 32;  // packed blocks per super-block
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) { pack_q4_k_16(rows, b0, n, out); }

    template <int T>
    static void tile(const MatmulJob &job, const Block *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, const ChunkEdges &e) {
        const PanelTokensK<T> op(job, b0, r, t0);
        __m512 acc[T];
        load_acc<T>(op, e, acc);
        for (int64_t s = 0; s < n / kUnit; ++s) {
            const Block *sb = pb + s * kUnit;
            __m512i isum[T];
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int j = 0; j < 8; ++j) {
                const __m512i sc = _mm512_load_si512(sb[j].sc);
#pragma GCC unroll 2
                for (int h = 0; h < 2; ++h) {
                    __m512i half[T];
#pragma GCC unroll 8
                    for (int t = 0; t < T; ++t) half[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
                    for (int k = 4 * h; k < 4 * h + 4; ++k) {
                        const __m512i w = _mm512_load_si512(sb[j].q + 64 * k);
#pragma GCC unroll 8
                        for (int t = 0; t < T; ++t)
                            half[t] = _mm512_dpbusd_epi32(half[t], w, broadcast4(op.xq[t] + s * QK_K + 32 * j + 4 * k));
                    }
#pragma GCC unroll 8
                    for (int t = 0; t < T; ++t) isum[t] = _mm512_dpwssd_epi32(isum[t], half[t], sc);
                }
            }
            const __m512 d = _mm512_load_ps(reinterpret_cast<const float *>(sb[kQ4KD].sb));
            const __m512 dmin = _mm512_load_ps(reinterpret_cast<const float *>(sb[kQ4KDmin].sb));
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                __m512i msum = _mm512_setzero_si512();
#pragma GCC unroll 4
                for (int p = 0; p < 4; ++p)
                    msum = _mm512_dpwssd_epi32(msum, _mm512_load_si512(sb[kQ4KMins + p].sb),
                                               broadcast4(reinterpret_cast<const int8_t *>(op.xs[t] + s * 8 + 2 * p)));
                const __m512 dx = _mm512_set1_ps(op.xd[t][s]);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, dx), acc[t]);
                acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, dx), acc[t]);
            }
        }
        store_acc<T>(job, r, op, e, acc);
    }
};

// ---- Q6_K --------------------------------------------------------------------------------------------
// value = d * sc * (code - 32), sc a signed 8-bit scale per 16 elements. As in the AVX2 file the weight
// w = code - 32 is the signed operand and the activation x + 128 (the broadcast XOR-ed with 0x80) the
// unsigned one; VPDPBUSD sums a 16-element half exactly per row (at most 16 * 255 * 32 in magnitude),
// which is multiplied by that half's scale in the integers, and the 128 * sum of w * sc the offset
// brings in (computed when packing) is taken off: the AVX2 kernel's integer, by other means.
struct alignas(64) Q6Block {
    int8_t w[2][4 * 64];   // half h: vector k, dword i = row i, elements 16h + 4k .. 16h + 4k + 3
    int32_t sc[2][kPanelRows];
    int32_t off[kPanelRows];
    float d[kPanelRows];
};

struct PackQ6_K {
    using Block = Q6Block;
    static constexpr int64_t kUnit = QK_K / 32;
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        pack_q6_k<kPanelRows>(rows, b0, n, out, transpose16, [](Block &b, int i, const Q6Piece &q) {
            b.sc[0][i] = q.sc_lo;
            b.sc[1][i] = q.sc_hi;
        });
    }

    // The exact integer of packed block b (activation block b of the tile's tokens) for each row.
    template <int T>
    static void block_ints(const Q6Block &qb, const PanelTokens<T> &op, int64_t b, __m512i (&isum)[T]) {
        const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
        const __m512i off = _mm512_load_si512(qb.off);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) isum[t] = _mm512_sub_epi32(_mm512_setzero_si512(), off);
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
            __m512i half[T];
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) half[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) {
                const __m512i w = _mm512_load_si512(qb.w[h] + 64 * k);
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t)
                    half[t] = _mm512_dpbusd_epi32(half[t], _mm512_xor_si512(broadcast4(op.xq[t] + b * 32 + 16 * h + 4 * k), flip), w);
            }
            const __m512i sc = _mm512_load_si512(qb.sc[h]);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(half[t], sc));
        }
    }

    template <int T>
    static void tile(const MatmulJob &job, const Block *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, const ChunkEdges &e) {
        const PanelTokens<T> op(job, b0, r, t0);
        __m512 acc[T];
        load_acc<T>(op, e, acc);
        for (int64_t b = 0; b < n; ++b) {
            __m512i isum[T];
            block_ints<T>(pb[b], op, b, isum);
            const __m512 d = _mm512_load_ps(pb[b].d);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t)
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, _mm512_set1_ps(op.xd[t][b])), acc[t]);
        }
        store_acc<T>(job, r, op, e, acc);
    }
};

// ---- Q4_K, Q6_K, Q4_0 and Q8_0 interleaved at load (rows16.hpp) ---------------------------------------------
// A panel is a group, rows[0] its first record; the blocks are the file-layout packers' (the same
// values), read from the records without a transpose (panel_pack_x86.hpp).
struct PackQ4_K_Rows16 : PackQ4_K {
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        pack_q4_k_16_rows16(rows[0], b0, n, out);
    }
};

// Q6_K: off = 128 (sc_lo sum w_lo + sc_hi sum w_hi) per row, the row sums of w formed by VPDPBUSD against
// ones (4 bytes per dword, exact), as q6k_piece forms them from the codes' byte sums.
struct PackQ6_K_Rows16 : PackQ6_K {
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        q6k_rows16_blocks(rows[0], b0, n, [out](int64_t i, const uint8_t *rec, int kb, __m512 d, const __m512i (&w)[8]) {
            const __m512i ones = _mm512_set1_epi8(1);
            Block &pb = out[i];
            __m512i off = _mm512_setzero_si512();
            for (int half = 0; half < 2; ++half) {
                __m512i sum = _mm512_setzero_si512();
                for (int v = 0; v < 4; ++v) {
                    _mm512_store_si512(pb.w[half] + 64 * v, w[4 * half + v]);
                    sum = _mm512_dpbusd_epi32(sum, ones, w[4 * half + v]);
                }
                const __m512i sc = q6k_rows16_scale(rec, 2 * kb + half);
                _mm512_store_si512(pb.sc[half], sc);
                off = _mm512_add_epi32(off, _mm512_mullo_epi32(sc, sum));
            }
            _mm512_store_si512(pb.off, _mm512_slli_epi32(off, 7));
            _mm512_store_ps(pb.d, d);
        });
    }
};

// Q4_0 and Q8_0: the same blocks from a group's records (panel_pack_x86.hpp).
struct PackQ4_0_Rows16 : PackQ4_0 {
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        pack_q4_0_16_rows16(rows[0], b0, n, out, 0);
    }
};
struct PackQ8_0_Rows16 : PackQ8_0 {
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        pack_q8_0_16_rows16(rows[0], b0, n, out, 0x80);
    }
};

// ---- Q3_K, IQ4_NL, IQ4_XS, MXFP4 (and Q2_K's codes) ---------------------------------------------------------------------
// Signed codes with a scale per 16 (Q3_K) or 32 elements, and no offset: Q6_K's panel and kernel as they
// are, packed from a piece per row and activation block (Piece::get): w the code (-4..3) or the table
// entry (|w| <= 127: VPDPBUSD has no 16-bit intermediate to overflow), Q3_K's signed scales, the others
// scale 1 with the block's float scale in d (IQ4_XS: d * (ls - 32), exact). A half's sum is then at most
// 16 * 255 * 127 and a block's total, once the offset is off, 32 * 127 * 127 (or Q3_K's 32 * 4 * 127 *
// 32): exact in int32 and in the float convert. The integers and the float operations per block are
// those of the row tiles (vec_dot_b32_*), so results do not depend on the token count.

template <class Piece>
struct PackPieces : PackQ6_K {  // PackQ6_K's Block and tile
    static constexpr int64_t kUnit = 1;
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        pack_pieces<Piece, kPanelRows>(rows, b0, n, out, transpose16, [](Block &b, int i, const Q6Piece &q) {
            b.sc[0][i] = q.sc_lo;
            b.sc[1][i] = q.sc_hi;
        });
    }
};

// ---- Q2_K --------------------------------------------------------------------------------------------
// value = d * sc * code - dmin * m per 16 elements: the codes (0..3) and scales go through Q6_K's integer
// products; the offsets need each token's sum of x per 16 elements, which is the same for every row, so
// it is taken once per (token, block) from the activation bytes and meets the rows' m (small integers,
// exact as floats) in two FMAs: m_0 sx_0 + m_1 sx_1, exact, the row tile's integer (vec_dot_b32_avx2.cpp),
// then the same fnmadd by dmin * d_x, in the same order.
struct alignas(64) Q2Block {
    Q6Block q;
    float m[2][kPanelRows];
    float dmin[kPanelRows];
};

struct PackQ2_K {
    using Block = Q2Block;
    static constexpr int64_t kUnit = 1;
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        for (int64_t b = 0; b < n; ++b) {
            __m128i lo[kPanelRows], hi[kPanelRows];
            for (int i = 0; i < kPanelRows; ++i) {
                const auto &blk = reinterpret_cast<const BlockQ2_K *>(rows[i])[(b0 + b) / 8];
                const int kb = static_cast<int>((b0 + b) % 8);
                const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(blk.qs + 32 * (kb / 4)));
                const __m256i q = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * (kb % 4))), _mm256_set1_epi8(3));
                const int s0 = blk.scales[2 * kb], s1 = blk.scales[2 * kb + 1];
                const Q6Piece p = piece_of(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1), s0 & 15, s1 & 15,
                                           avx2_half_to_float(blk.d));
                lo[i] = p.lo, hi[i] = p.hi;
                out[b].q.sc[0][i] = p.sc_lo, out[b].q.sc[1][i] = p.sc_hi;
                out[b].q.off[i] = p.off, out[b].q.d[i] = p.d;
                out[b].m[0][i] = static_cast<float>(s0 >> 4), out[b].m[1][i] = static_cast<float>(s1 >> 4);
                out[b].dmin[i] = avx2_half_to_float(blk.dmin);
            }
            transpose16(lo, reinterpret_cast<uint8_t *>(out[b].q.w[0]));
            transpose16(hi, reinterpret_cast<uint8_t *>(out[b].q.w[1]));
        }
    }

    template <int T>
    static void tile(const MatmulJob &job, const Block *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, const ChunkEdges &e) {
        const PanelTokens<T> op(job, b0, r, t0);
        __m512 acc[T];
        load_acc<T>(op, e, acc);
        for (int64_t b = 0; b < n; ++b) {
            const Q6Block &qb = pb[b].q;
            __m512i isum[T];
            PackQ6_K::block_ints<T>(qb, op, b, isum);
            const __m512 d = _mm512_load_ps(qb.d), dmin = _mm512_load_ps(pb[b].dmin);
            const __m512 m0 = _mm512_load_ps(pb[b].m[0]), m1 = _mm512_load_ps(pb[b].m[1]);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const int8_t *x = op.xq[t] + b * 32;
                const float sx0 = static_cast<float>(sum16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x))));
                const float sx1 = static_cast<float>(sum16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x + 16))));
                const __m512 dx = _mm512_set1_ps(op.xd[t][b]);
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(d, dx), acc[t]);
                const __m512 msum = _mm512_fmadd_ps(m0, _mm512_set1_ps(sx0), _mm512_mul_ps(m1, _mm512_set1_ps(sx1)));
                acc[t] = _mm512_fnmadd_ps(msum, _mm512_mul_ps(dmin, dx), acc[t]);
            }
        }
        store_acc<T>(job, r, op, e, acc);
    }
};

// ---- the driver ----------------------------------------------------------------------------------------

template <class Pack>
void panel_tokens(const MatmulJob &job, const typename Pack::Block *pb, int64_t b0, int64_t n, int64_t r, int64_t tb,
                  int64_t te, const ChunkEdges &e) {
    int64_t t = tb;
    for (; t + kTileTokens <= te; t += kTileTokens) Pack::template tile<kTileTokens>(job, pb, b0, n, r, t, e);
    switch (te - t) {
    case 1: Pack::template tile<1>(job, pb, b0, n, r, t, e); break;
    case 2: Pack::template tile<2>(job, pb, b0, n, r, t, e); break;
    case 3: Pack::template tile<3>(job, pb, b0, n, r, t, e); break;
    case 4: Pack::template tile<4>(job, pb, b0, n, r, t, e); break;
    case 5: Pack::template tile<5>(job, pb, b0, n, r, t, e); break;
    case 6: Pack::template tile<6>(job, pb, b0, n, r, t, e); break;
    case 7: Pack::template tile<7>(job, pb, b0, n, r, t, e); break;
    default: break;
    }
}

// The shared loop nest (panel_pack_x86.hpp) with this ISA's panels and edges.
template <class Pack>
void drive_panels(const MatmulJob &job, int64_t r0, int64_t r1) {
    panel_loop<Pack, kPanelRows>(
        job, r0, r1,
        [](int64_t nr, bool first, bool last) { return ChunkEdges{static_cast<__mmask16>((1u << nr) - 1), first, last}; },
        [&job](const typename Pack::Block *buf, int64_t b0, int64_t n, int64_t r, int64_t tb, int64_t te,
               const ChunkEdges &e) { panel_tokens<Pack>(job, buf, b0, n, r, tb, te, e); });
}

} // namespace

// The AVX-512 level's row kernels for these formats: the panels for more tokens than one tile pass,
// the AVX2 row tiles (which give the same bits) for small batches and decode, but Q4_0's and Q4_K's
// decode, which have their own VPDPBUSD tiles (vec_dot_avx512.cpp, vec_dot_k_avx512.cpp).
void matmul_rows_q4_0_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return drive_panels<PackQ4_0>(job, r0, r1);
    if (job.n_tokens == 1) return matmul_rows_q4_0_decode_avx512(job, r0, r1);
    matmul_rows_q4_0_avx2(job, r0, r1);
}
void matmul_rows_q4_k_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return drive_panels<PackQ4_K>(job, r0, r1);
    if (job.n_tokens == 1) return matmul_rows_q4_k_decode_avx512(job, r0, r1);
    matmul_rows_q4_k_avx2(job, r0, r1);
}
void matmul_rows_q6_k_avx512(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens > kTokTile) return drive_panels<PackQ6_K>(job, r0, r1);
    matmul_rows_q6_k_avx2(job, r0, r1);
}

// Interleaved Q4_K, Q6_K, Q4_0 and Q8_0 (rows16.hpp), whole groups, more tokens than one tile pass (rows16_rows sends
// only longer products here).
void matmul_panels_q4_k_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ4_K_Rows16>(job, r0, r1); }
void matmul_panels_q6_k_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ6_K_Rows16>(job, r0, r1); }
void matmul_panels_q4_0_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ4_0_Rows16>(job, r0, r1); }
void matmul_panels_q8_0_rows16_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ8_0_Rows16>(job, r0, r1); }

// Prefill (more tokens than one tile pass) of Q8_0 and the formats of quant_b32.hpp; the row kernels
// (vec_dot_avx512.cpp, vec_dot_b32_avx512.cpp) hand over to these.
void matmul_panels_q8_0_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ8_0>(job, r0, r1); }
void matmul_panels_q2_k_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ2_K>(job, r0, r1); }
void matmul_panels_q3_k_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackPieces<Q3KPiece>>(job, r0, r1); }
void matmul_panels_iq4_nl_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackPieces<IQ4NLPiece>>(job, r0, r1); }
void matmul_panels_iq4_xs_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackPieces<IQ4XSPiece>>(job, r0, r1); }
void matmul_panels_mxfp4_avx512(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackPieces<MXFP4Piece>>(job, r0, r1); }

} // namespace ember::cpu::detail
