// matmul_panel_avx2.cpp — the prefill GEMM for Q4_0, Q8_0, Q4_K and Q6_K weights (Q3_K, MXFP4 through Q6_K's) on AVX2: 8-row panels
// repacked on the fly into an interleaved layout, so that one integer product serves 8 rows at once.
// Compiled with -mavx2 -mfma -mf16c and reached only through the kernel table (see simd_avx2.hpp); the
// row kernels hand a matmul over when it has more tokens than one tile pass (kTokTile).
//
// Why. The row tiles of matmul_avx2.hpp multiply one row's 32 weights by one token's 32 activations
// per _mm256_maddubs_epi16, and then need a madd, a convert and an FMA per (row, token, block) to apply
// that block's scales: 4 vector ops per 32 multiply-adds, with 16 accumulators that spill. Here a
// 32-byte vector holds 4 consecutive weights of each of 8 rows, multiplied by the same 4 activations
// broadcast to every row: one maddubs still does 32 multiply-adds, but its 16-bit pair sums belong to
// 8 rows (2 lanes each), so a block's 8 products add up in 16 bits (Q4: at most 8 * 2 * 15 * 127 =
// 30480, no saturation) and one madd, convert and FMA finish the block for 8 rows: about 2.4 ops per 32
// multiply-adds instead of 4, no horizontal sums, and a 4-token tile fits the 16 registers. Q4_K, whose
// activations have one scale per super-block (QuantActsK), goes further: its block's 16-bit sums meet
// the 6-bit scale in that madd, the 8 sub-blocks add up in int32, and the convert and FMAs run once per
// super-block (kernel, 2048 -> 5632, 128 tokens, 2 threads: ~180 -> ~200 GMAC/s, medians of 4
// alternating rounds; TinyLlama Q4_K_M prefill of 128 tokens ~+12 %, 2026-11-26).
// Measured (TinyLlama shape, 128-token prompt, 2 threads, 2026-11-21, an EPYC VM): prefill Q4_0 0.87 ->
// ~1.4x llama.cpp, Q4_K_M 0.73 -> ~1.3x; docs/benchmarks.md has today's figures.
//
// Layout. Weights stay as stored in the file: decode streams them as they are (the row kernels), and
// nothing is copied or kept at load. A panel of 8 rows x one k-chunk (up to kPackBytes) is repacked
// into a buffer on the stack, in L1, and then multiplied against every token of a slab, so the
// repacking (a 4-byte transpose and nibble split) is amortised over up to 128 tokens (perf: under 10 %
// of the panel time at 64 tokens). A packed block holds the 8 rows' codes one per byte as 8 vectors,
// byte 4i + j of vector k being row i's element 4k + j, and the rows' scales for that block (Q4_K's: also
// a slice of its super-block's other operands).
//
// Order. Every output lane computes its row alone with the same operations whatever panel, chunk or
// thread it falls in (partial panels repeat a row in the unused lanes and never store them), and
// between k-chunks the accumulator is stored to y and reloaded exactly, so results do not depend on
// the thread count.
#include "core/dtype.hpp"
#include "cpu/panel_pack_x86.hpp"
#include "cpu/quant_k.hpp"
#include "cpu/simd_avx2.hpp"
#include "cpu/vec_dot.hpp"
#include "cpu/vec_dot_k_x86.hpp"

namespace ember::cpu::detail {

namespace {

constexpr int kPanelRows = 8;

// Transposes the 4-byte groups of 8 rows' 16 bytes (row i in src[i]) into 4 vectors, vector k holding
// group k of rows 0..7: rows i and i + 4 go in the two 128-bit lanes, so that the 32/64-bit unpacks do
// two 4 x 4 transposes at once.
inline void transpose_groups(const __m128i (&src)[kPanelRows], uint8_t *dst) {
    __m256i v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_set_m128i(src[i + 4], src[i]);
    const __m256i x0 = _mm256_unpacklo_epi32(v[0], v[1]), x1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i x2 = _mm256_unpacklo_epi32(v[2], v[3]), x3 = _mm256_unpackhi_epi32(v[2], v[3]);
    auto *out = reinterpret_cast<__m256i *>(dst);
    _mm256_store_si256(out + 0, _mm256_unpacklo_epi64(x0, x2));
    _mm256_store_si256(out + 1, _mm256_unpackhi_epi64(x0, x2));
    _mm256_store_si256(out + 2, _mm256_unpacklo_epi64(x1, x3));
    _mm256_store_si256(out + 3, _mm256_unpackhi_epi64(x1, x3));
}

// Two 16-bit values (a token's block sums b, b + 1) broadcast to every row's lane.
inline __m256i broadcast_pair(const int16_t *x) {
    int32_t v;
    __builtin_memcpy(&v, x, 4);
    return _mm256_set1_epi32(v);
}

// 4 activation bytes (elements e .. e + 3 of a token) broadcast to every row's lane.
inline __m256i broadcast4(const int8_t *x) {
    int32_t v;
    __builtin_memcpy(&v, x, 4);
    return _mm256_set1_epi32(v);
}

// The accumulators start at 0 on the first chunk and from y otherwise (lanes where `mask` is set);
// y gets them raw, plus the bias after the last chunk.
struct ChunkEdges {
    __m256i mask;
    bool first, last;
};
// (Op: PanelTokens or PanelTokensK, whose y[t] is where token t's outputs go.)
template <int T, class Op>
inline void load_acc(const Op &op, const ChunkEdges &e, __m256 (&acc)[T]) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[t] = e.first ? _mm256_setzero_ps() : _mm256_maskload_ps(op.y[t], e.mask);
}
template <int T, class Op>
inline void store_acc(const MatmulJob &job, int64_t r, const Op &op, const ChunkEdges &e, __m256 (&acc)[T]) {
    const __m256 bias = e.last && job.bias ? _mm256_maskload_ps(job.bias + r, e.mask) : _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) _mm256_maskstore_ps(op.y[t], e.mask, e.last ? _mm256_add_ps(acc[t], bias) : acc[t]);
}

// ---- Q4_0 ------------------------------------------------------------------------------------------
// A packed block holds the 8 rows' codes one per byte (0..15) as 8 vectors: byte 4i + j of vector k is
// row i's element 4k + j, so vector k meets the activation bytes 4k .. 4k + 3; s is the codes' scale
// (Q4_0: d; Q8_0: d). The nibbles are split when packing rather than in the kernel (256 bytes per block
// rather than 128): the kernel then does no masking, and its 8 weight vectors are plain loads, which
// leaves registers for the 4-token tile (the two measured within this machine's noise, +-15 %, on
// 2048 x 2048 x 64 tokens; the register budget decided).
struct alignas(32) Q4Block {
    uint8_t q[256];
    float s[kPanelRows];
    // Q4_K's offsets once (it has its own block now): kept so that Q4_0's and Q8_0's k-chunks stay the
    // size they were measured at.
    float pad[kPanelRows];
};
// The block loop the Q4 and Q8_0 panels share: per packed block, its 8 weight vectors against each
// token's 4 broadcast activations, summed by Ops::step into one integer vector per token, then
// Ops::finish applies the block's scales. Ops::operand(w) is what step takes beside w, formed once per
// vector for all T tokens.
// One packed block's 8 code vectors (q) against T tokens' activations from x[t] + off: Ops::step's sums.
template <class Ops, int T>
inline void block_sums(const uint8_t *q, const int8_t *const (&x)[T], int64_t off, __m256i (&isum)[T]) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i *>(q + 32 * k));
        const __m256i p = Ops::operand(w);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) Ops::step(isum[t], w, p, broadcast4(x[t] + off + 4 * k));
    }
}

template <class Ops, int T>
inline void q_tile(const MatmulJob &job, const Q4Block *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, const ChunkEdges &e) {
    const PanelTokens<T> op(job, b0, r, t0);
    __m256 acc[T];
    load_acc<T>(op, e, acc);
    for (int64_t b = 0; b < n; ++b) {
        __m256i isum[T];
        block_sums<Ops, T>(pb[b].q, op.xq, b * 32, isum);
        const __m256 s = _mm256_load_ps(pb[b].s);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) acc[t] = Ops::finish(isum[t], s, pb[b], op, t, b, acc[t]);
    }
    store_acc<T>(job, r, op, e, acc);
}

struct Q4Panel {
    using Block = Q4Block;
    // Codes 0..15 (unsigned) against signed activations: a block's 8 maddubs pairs add in 16 bits.
    static __m256i operand(__m256i w) { return w; }
    static void step(__m256i &isum, __m256i w, __m256i, __m256i x) {
        isum = _mm256_add_epi16(isum, _mm256_maddubs_epi16(w, x));
        keep_in_register(isum);
    }
    template <int T>
    static __m256 finish(__m256i isum, __m256 s, const Block &, const PanelTokens<T> &op, int t, int64_t b, __m256 acc) {
        // The codes sit 8 above the value: sum (q - 8) x = sum q x - 8 sum x, exact in float
        // (|sum q x| <= 32 * 15 * 127), then one rounding for the scales.
        __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(isum, _mm256_set1_epi16(1)));
        f = _mm256_fnmadd_ps(_mm256_set1_ps(8.0f), _mm256_broadcast_ss(op.xs[t] + b), f);
        return _mm256_fmadd_ps(f, _mm256_mul_ps(s, _mm256_broadcast_ss(op.xd[t] + b)), acc);
    }
    // T tokens against n packed blocks (activation blocks b0 ..) of the panel at row r.
    template <int T>
    static void tile(const MatmulJob &job, const Block *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, const ChunkEdges &e) {
        q_tile<Q4Panel, T>(job, pb, b0, n, r, t0, e);
    }
};

// Q4_0: blocks [b0, b0 + n) of the panel's rows. Byte l of qs holds element l in its low nibble and
// l + 16 in its high nibble, so the transposed bytes split into vectors 0..3 and 4..7.
struct PackQ4_0 : Q4Panel {
    static constexpr int64_t kUnit = 1;  // activation blocks per weight block
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        const __m256i low4 = _mm256_set1_epi8(0x0f);
        for (int64_t b = 0; b < n; ++b) {
            __m128i src[kPanelRows];
            alignas(16) uint16_t d[kPanelRows];
            for (int i = 0; i < kPanelRows; ++i) {
                const auto *blk = reinterpret_cast<const BlockQ4_0 *>(rows[i]) + b0 + b;
                src[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(blk->qs));
                d[i] = blk->d;
            }
            alignas(32) uint8_t both[128];
            transpose_groups(src, both);
            auto *q = reinterpret_cast<__m256i *>(out[b].q);
            for (int k = 0; k < 4; ++k) {
                const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i *>(both + 32 * k));
                _mm256_store_si256(q + k, _mm256_and_si256(v, low4));
                _mm256_store_si256(q + 4 + k, _mm256_and_si256(_mm256_srli_epi16(v, 4), low4));
            }
            _mm256_store_ps(out[b].s, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i *>(d))));
        }
    }
};

// ---- Q4_K ------------------------------------------------------------------------------------------
// Against per-256 activations (QuantActsK; vec_dot.hpp gives the steps every level follows). A packed
// sub-block j holds Q4Block's codes, so its 8 maddubs pairs add in 16 bits as Q4_0's do (at most
// 8 * 2 * 15 * 127 = 30480), and then one madd against sc_j (each row's two lanes hold it) gives each
// row's exact sub-block product times sc_j as one int32 lane: the super-block's 8 of them add up to isum
// in int32 (< 2^25). The mins' term msum = sum_j m_j * (block sum of q) is 4 madds of the rows' min pairs
// against the token's block-sum pairs. Per super-block and token that is 8 madds and adds for the
// scales, 4 madds for the mins and 6 float ops (two FMAs), where per-32 activations took a madd and ~6
// float ops per sub-block: ~148 vector ops per super-block and token instead of ~176.
// Same integers and float steps as the row tile (vec_dot_k_avx2.cpp), which hands over above kTokTile
// tokens.
struct alignas(32) Q4KBlock {
    uint8_t q[256];           // Q4Block's codes
    int16_t sc[2 * kPanelRows];  // lanes 2i, 2i + 1: row i's sc_j
    // A 32-byte slice of the super-block's other operands, one per sub-block j: 0 the rows' d, 1 their
    // dmin (as floats), 2..5 row i's mins m_2p, m_2p+1 (p = j - 2) in dword i; 6, 7 nothing.
    union {
        float f[kPanelRows];
        int16_t m[2 * kPanelRows];
    } side;
};

struct PackQ4_K {
    using Block = Q4KBlock;
    static constexpr int64_t kUnit = QK_K / 32;
    // Super-blocks [b0 / 8, (b0 + n) / 8) (n and b0 multiples of 8), one packed block per sub-block: the
    // codes as q4k_codes packs them, the scales and the super-block's operands as above.
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        for (int64_t sb = 0; sb < n / kUnit; ++sb) {
            const int64_t s = b0 / kUnit + sb;
            Block *pb = out + sb * kUnit;
            const BlockQ4_K *blk[kPanelRows];
            for (int i = 0; i < kPanelRows; ++i) {
                blk[i] = reinterpret_cast<const BlockQ4_K *>(rows[i]) + s;
                const Q4KIntScales q = q4k_int_scales(*blk[i]);
                alignas(32) int32_t sc[8], m[4];
                _mm256_store_si256(reinterpret_cast<__m256i *>(sc), q.sc);
                _mm_store_si128(reinterpret_cast<__m128i *>(m), q.m);
                for (int j = 0; j < 8; ++j) __builtin_memcpy(pb[j].sc + 2 * i, sc + j, 4);
                for (int p = 0; p < 4; ++p) __builtin_memcpy(pb[2 + p].side.m + 2 * i, m + p, 4);
                pb[0].side.f[i] = avx2_half_to_float(blk[i]->d);
                pb[1].side.f[i] = avx2_half_to_float(blk[i]->dmin);
            }
            q4k_codes<kPanelRows>(blk, pb, transpose_groups);
        }
    }

    template <int T>
    static void tile(const MatmulJob &job, const Block *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, const ChunkEdges &e) {
        const PanelTokensK<T> op(job, b0, r, t0);
        __m256 acc[T];
        load_acc<T>(op, e, acc);
        for (int64_t sb = 0; sb < n / kUnit; ++sb) {
            const Block *bk = pb + sb * kUnit;
            __m256i isum[T];
#pragma GCC unroll 8
            for (int j = 0; j < 8; ++j) {
                __m256i s16[T];  // Q4_0's 16-bit sums of the codes' products
                block_sums<Q4Panel, T>(bk[j].q, op.xq, QK_K * sb + 32 * j, s16);
                const __m256i sc = _mm256_load_si256(reinterpret_cast<const __m256i *>(bk[j].sc));
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {
                    const __m256i p = _mm256_madd_epi16(s16[t], sc);
                    isum[t] = j == 0 ? p : _mm256_add_epi32(isum[t], p);
                    keep_in_register(isum[t]);
                }
            }
            const __m256 d = _mm256_load_ps(bk[0].side.f), dmin = _mm256_load_ps(bk[1].side.f);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                __m256i msum = _mm256_setzero_si256();
#pragma GCC unroll 4
                for (int p = 0; p < 4; ++p)
                    msum = _mm256_add_epi32(msum, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i *>(bk[2 + p].side.m)),
                                                                    broadcast_pair(op.xs[t] + 8 * sb + 2 * p)));
                const __m256 dx = _mm256_broadcast_ss(op.xd[t] + sb);
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, dx), acc[t]);
                acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dmin, dx), acc[t]);
            }
        }
        store_acc<T>(job, r, op, e, acc);
    }
};

// ---- Q8_0 ------------------------------------------------------------------------------------------
// The 8 rows' weights w (-128..127) as they are, in Q4Block's layout (vector k: elements 4k .. 4k + 3 of
// each row), s = d. Both operands are signed, so the row tile's sign trick (vec_dot_q8_0_x86.hpp) moves
// w's sign onto the broadcast activations, |w| x sign(x, w), once per token and vector; maddubs' pairs
// (at most 2 * 128 * 127 = 32512) must be widened by madd before the next vector's are added. The sum
// over the block is the row tile's exact integer, and its scales are applied with the row tile's float
// operations: one multiply d_w * d_x and one FMA.
struct PackQ8_0 {
    using Block = Q4Block;
    static constexpr int64_t kUnit = 1;
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        for (int64_t b = 0; b < n; ++b) {
            __m128i lo[kPanelRows], hi[kPanelRows];
            alignas(16) uint16_t d[kPanelRows];
            for (int i = 0; i < kPanelRows; ++i) {
                const auto *blk = reinterpret_cast<const BlockQ8_0 *>(rows[i]) + b0 + b;
                lo[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(blk->qs));
                hi[i] = _mm_loadu_si128(reinterpret_cast<const __m128i *>(blk->qs + 16));
                d[i] = blk->d;
            }
            transpose_groups(lo, out[b].q);
            transpose_groups(hi, out[b].q + 128);
            _mm256_store_ps(out[b].s, _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i *>(d))));
        }
    }

    // Both signed: |w| (formed once per vector) against sign(x, w); the pairs widen before they add.
    static __m256i operand(__m256i w) { return _mm256_abs_epi8(w); }
    static void step(__m256i &isum, __m256i w, __m256i aw, __m256i x) {
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w)), _mm256_set1_epi16(1)));
    }
    template <int T>
    static __m256 finish(__m256i isum, __m256 s, const Block &, const PanelTokens<T> &op, int t, int64_t b, __m256 acc) {
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(s, _mm256_broadcast_ss(op.xd[t] + b)), acc);
    }
    template <int T>
    static void tile(const MatmulJob &job, const Block *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, const ChunkEdges &e) {
        q_tile<PackQ8_0, T>(job, pb, b0, n, r, t0, e);
    }
};

// ---- Q6_K --------------------------------------------------------------------------------------------
// value = d * sc * (code - 32), sc a signed 8-bit scale per 16 elements. 6-bit codes do not fit
// Q4's 16-bit sums of 8 products, so the roles turn: the weight w = code - 32 (-32..31) is the signed
// operand and the activation the unsigned one, x + 128 (1..255, the broadcast XOR-ed with 0x80); a
// pair is then at most 2 * 255 * 32 = 16320, two pairs add in 16 bits, and madd against the scales
// (each row's two lanes hold its scale) sums them into 32 bits. The 128 * sum of w * sc that the offset
// brings in depends on the weights alone and is computed when packing (off). Per lane the total is at
// most 32 * 32 * 127 * 128 < 2^24 after the offset is taken off, so the convert is exact.
struct alignas(32) Q6Block {
    int8_t w[2][128];      // half h (elements 16h ..): vector k, byte 4i + j = row i, element 16h + 4k + j
    int16_t sc[2][16];     // half h: lanes 2i, 2i + 1 = row i's scale
    int32_t off[kPanelRows];
    float d[kPanelRows];
};

struct PackQ6_K {
    using Block = Q6Block;
    static constexpr int64_t kUnit = QK_K / 32;
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        pack_q6_k<kPanelRows>(rows, b0, n, out, transpose_groups, [](Block &b, int i, const Q6Piece &q) {
            b.sc[0][2 * i] = b.sc[0][2 * i + 1] = static_cast<int16_t>(q.sc_lo);
            b.sc[1][2 * i] = b.sc[1][2 * i + 1] = static_cast<int16_t>(q.sc_hi);
        });
    }

    template <int T>
    static void tile(const MatmulJob &job, const Block *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, const ChunkEdges &e) {
        const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
        const PanelTokens<T> op(job, b0, r, t0);
        __m256 acc[T];
        load_acc<T>(op, e, acc);
        for (int64_t b = 0; b < n; ++b) {
            __m256i isum[T];
            const __m256i off = _mm256_load_si256(reinterpret_cast<const __m256i *>(pb[b].off));
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(), off);
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
                const __m256i sc = _mm256_load_si256(reinterpret_cast<const __m256i *>(pb[b].sc[h]));
#pragma GCC unroll 2
                for (int k = 0; k < 4; k += 2) {
                    const __m256i w0 = _mm256_load_si256(reinterpret_cast<const __m256i *>(pb[b].w[h] + 32 * k));
                    const __m256i w1 = _mm256_load_si256(reinterpret_cast<const __m256i *>(pb[b].w[h] + 32 * k + 32));
#pragma GCC unroll 4
                    for (int t = 0; t < T; ++t) {
                        const int8_t *x = op.xq[t] + b * 32 + 16 * h + 4 * k;
                        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_xor_si256(broadcast4(x), flip), w0),
                                                           _mm256_maddubs_epi16(_mm256_xor_si256(broadcast4(x + 4), flip), w1));
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, sc));
                        keep_in_register(isum[t]);
                    }
                }
            }
            const __m256 d = _mm256_load_ps(pb[b].d);
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t)
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, _mm256_broadcast_ss(op.xd[t] + b)), acc[t]);
        }
        store_acc<T>(job, r, op, e, acc);
    }
};

// Q3_K and MXFP4 through Q6_K's panel: their codes (|w| <= 4, resp. 12) keep within its 16-bit bound
// (|w| <= 32); the pieces are panel_pack_x86.hpp's. Same integers and float steps as their row tiles
// (vec_dot_b32_avx2.cpp), which hand over to these above kTokTile tokens. (IQ4's table reaches 127: its
// prefill stays on the row tiles at this level.)
template <class Piece>
struct PackPieces : PackQ6_K {  // PackQ6_K's Block and tile
    static constexpr int64_t kUnit = 1;
    static void pack(const uint8_t *const (&rows)[kPanelRows], int64_t b0, int64_t n, Block *out) {
        pack_pieces<Piece, kPanelRows>(rows, b0, n, out, transpose_groups, [](Block &b, int i, const Q6Piece &q) {
            b.sc[0][2 * i] = b.sc[0][2 * i + 1] = static_cast<int16_t>(q.sc_lo);
            b.sc[1][2 * i] = b.sc[1][2 * i + 1] = static_cast<int16_t>(q.sc_hi);
        });
    }
};

// ---- the driver ----------------------------------------------------------------------------------------

template <class Pack>
void panel_tokens(const MatmulJob &job, const typename Pack::Block *pb, int64_t b0, int64_t n, int64_t r, int64_t tb,
                  int64_t te, const ChunkEdges &e) {
    int64_t t = tb;
    for (; t + 4 <= te; t += 4) Pack::template tile<4>(job, pb, b0, n, r, t, e);
    switch (te - t) {
    case 1: Pack::template tile<1>(job, pb, b0, n, r, t, e); break;
    case 2: Pack::template tile<2>(job, pb, b0, n, r, t, e); break;
    case 3: Pack::template tile<3>(job, pb, b0, n, r, t, e); break;
    default: break;
    }
}

// The shared loop nest (panel_pack_x86.hpp) with this ISA's panels and edges.
template <class Pack>
void drive_panels(const MatmulJob &job, int64_t r0, int64_t r1) {
    panel_loop<Pack, kPanelRows>(
        job, r0, r1,
        [](int64_t nr, bool first, bool last) {
            return ChunkEdges{_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(nr)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                              first, last};
        },
        [&job](const typename Pack::Block *buf, int64_t b0, int64_t n, int64_t r, int64_t tb, int64_t te,
               const ChunkEdges &e) { panel_tokens<Pack>(job, buf, b0, n, r, tb, te, e); });
}

} // namespace

void matmul_panels_q4_0_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ4_0>(job, r0, r1); }
void matmul_panels_q8_0_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ8_0>(job, r0, r1); }
void matmul_panels_q4_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ4_K>(job, r0, r1); }
void matmul_panels_q6_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackQ6_K>(job, r0, r1); }
void matmul_panels_q3_k_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackPieces<Q3KPiece>>(job, r0, r1); }
void matmul_panels_mxfp4_avx2(const MatmulJob &job, int64_t r0, int64_t r1) { drive_panels<PackPieces<MXFP4Piece>>(job, r0, r1); }

} // namespace ember::cpu::detail
