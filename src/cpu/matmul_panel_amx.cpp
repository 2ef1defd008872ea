// matmul_panel_amx.cpp — the prefill GEMM for Q4_0, Q8_0, Q4_K and Q6_K weights on AMX (Intel's tile unit:
// AMX-TILE and AMX-INT8, Sapphire Rapids and later). Compiled with the AVX-512 flags plus -mamx-tile
// -mamx-int8 (CMakeLists.txt: *_amx.cpp, only where the compiler knows them) and reached only through
// the kernel table once the CPU, the OS and the process's permission allow it (cpu_features.cpp).
//
// Why. A VPDPBUSD does 64 multiply-adds; one TDPBSSD does a 16 x 16 matrix of dot products of up to 64
// bytes (16 384) in about 16 cycles, off the vector ports. What stays on the vector ports is applying
// the scales: per 32-element block, token and 16 rows a convert, a multiply and an FMA, which the
// AVX-512 panel also does on top of its 8 VPDPBUSD. So the tiles take the integer work away and the
// float epilogue becomes the cost. Q4_K has one activation scale per super-block of 256 (QuantActsK,
// vec_dot.hpp) for that reason: its epilogue runs once per 256 inputs (below).
//
// Same bits as the AVX-512 level. Q4_0, Q8_0, Q6_K: each block's scales differ, so each TDPBSSD covers exactly one block
// (K = 32 bytes; a tile row could hold two, but their sums would mix), giving for 16 tokens x 16 rows the
// exact int32 block products, laid out as the AVX-512 panel holds them: C row t = token t, lane i = row
// i. They are stored and run through the AVX-512 panel's float operations in its order, lane by lane:
// - Q4_0: the weights as signed codes (code - 8, packed so), so the tile's integer is the AVX-512
//   kernel's integer less 8 x (sum of the block's activations), exactly what its FNMADD of 8 * sum forms
//   in float (all are integers below 2^24, so the float operation is exact and the same value);
// - Q8_0: the weights as stored, so the tile's integer is the AVX-512 kernel's after its exact float
//   correction (its codes are w + 128), as for Q4_0;
// - Q6_K: per 16-element half a TDPBSSD (the other half's weights zero in that B tile), giving the sums
//   of (code - 32) * x; the AVX-512 kernel's integer is sc0 * h0 + sc1 * h1, formed here in float by a
//   multiply and an FMA, both exact (|h| <= 16 * 32 * 127, |sc| <= 128: every partial and the total are
//   integers below 2^24).
// - Q4_K (vec_dot.hpp's steps, per super-block s: isum = sum_j sc_j * (codes . q of sub-block j), msum =
//   sum_j m_j * sum_j, both int32 and exact, then acc = fma(float(isum), d * d_s, acc) and acc =
//   fma(-float(msum), dmin * d_s, acc)): the 6-bit scales are folded into B, sc_j * code (<= 945) as its
//   low byte (unsigned: TDPBSUD) and its high byte (0..3) in a second B tile, so a product takes K = 64
//   (two sub-blocks) and a super-block's four K-steps accumulate in C (no zeroing or storing per block):
//   isum = C(low) + 256 C(high), exact (|isum| < 2^25). msum comes from the mins as 16-bit pairs
//   against QuantActsK's block sums (four VPDPWSSD per token). Then the two float steps above.
// So this level gives the AVX-512 (and AVX2) level's bits: tests/test_cpu_kernels.cpp compares them,
// and batch invariance holds however a matmul's tokens reach the tiles.
//
// Layout. A (tmm0, tmm1): 16 tokens x one block (32 bytes), read in place from the quantized
// activations (stride n_in). B (tmm2, tmm3): one block of a 16-row panel in the AVX-512 panel's packed
// layout, which is AMX's VNNI layout for B (8 rows of 16 dwords, dword i = 4 codes of row i). C
// (tmm4..tmm7): 16 x 16 int32. Weights are repacked on the fly per panel, chunk and slab, as at the
// other levels (panel_pack_x86.hpp's loop): nothing is kept at load. Q4_K and Q6_K interleaved 16 rows
// at load (rows16.hpp) are packed straight from their records (the codes already lie in B's layout: a
// nibble split, no transpose). A token group with fewer than 16 tokens (a slab's tail) reads its A tile
// from a zero-padded copy of its blocks and never stores the padding. The epilogues read a group's token
// scales from QuantActs' copies by groups of 16 (one pointer, not 16 spilled ones). Q4_K's tiles are all
// 16 x 64 bytes (its own configuration): A 16 tokens x 64 inputs, B per K-step 16 rows of 4 inputs x 16
// weight rows, packed per super-block (Q4KAmxBlock) with the rows' d, dmin and mins.
//
// What bounds it (measured on a Xeon with AMX, kernel benchmark below): per block of 16
// tokens x 16 rows, the tile instructions (two loads, the product and the C store: ~25 TSC cycles on
// their own, the store ~11) and the epilogue's 3-4 vector operations per token (~22 for Q4_0), which
// barely overlap: a loop of tile instructions and an epilogue on unrelated data takes about the sum of
// the two. What overlap there is depends on the order: the tile loops below issue each block's
// product of the next four, then one block's epilogue of the previous four, and store each product
// one epilogue after it was issued (when its TDPBSSD is done, so the store does not hold up the tile
// instructions behind it); a slab's full token groups run as one such pipeline (Q4Amx::tiles_full), so
// no group starts with products alone or ends with epilogues alone. Other orders measured slower
// (test_cpu_kernels' EMBER_KERNEL_BENCH=gemm for the kernel).
// Q4_K (measured 2026-11-26, kernel on one thread, variants of this file in a harness): its tiles are
// bound by the activations' A tiles coming from L2 (the same code with A in L1 ran 1.5x faster; software
// prefetch and a contiguous A layout did not help), then by the epilogue (a third) and the packing (10-20
// %). Hence two panels share each A tile (Q4KAmx::run<2, ..>), items go super-block by super-block so
// that a super-block's B stays in L1 for all groups, and a slab holds at most kAmxQ4KSlabBytes of
// activations so that they stay in L2 across the panels.
//
// Tile state. The tile configuration is per thread: every thread that runs these kernels loads it
// before its first tile instruction (configure_tiles). Each call checks the thread's configuration
// (STTILECFG) and loads ours only when it differs, so a thread keeps it across calls, and anything else
// in the process that reconfigures or releases the tiles on a shared thread (a host's own AMX code) is
// noticed instead of faulting. The state is left in use (no TILERELEASE): the next call would only
// have to load it again, and Linux puts in-use tiles to rest itself before a core idles.
// (GCC spells the feature macros __AMX_TILE__ / __AMX_INT8__, clang __AMXTILE__ / __AMXINT8__.)
#if (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_INT8__) || defined(__AMXINT8__))

#include "core/dtype.hpp"
#include "cpu/panel_pack_x86.hpp"
#include "cpu/rows16.hpp"
#include "cpu/vec_dot.hpp"

#include <type_traits>

// As in matmul_panel_avx512.cpp: avx512fintrin.h's _mm512_undefined_* initialise themselves on purpose
// (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

namespace ember::cpu::detail {

namespace {

constexpr int kRows = kPanel16;  // weight rows per panel: C's 16 int32 columns
constexpr int kGroup = 16;       // tokens per tile product: A's and C's 16 rows
// Tokens per slab (the activations of a slab's chunk stay in L2 across the panels). Twice the other
// levels': the packing is the same per panel, the products are ~4x cheaper, so it is spread wider.
constexpr int64_t kSlab = 256;
// Bytes of a panel's packed k-chunk (a stack buffer; the other levels' kPackBytes is 24 KiB): 64 blocks of
// Q4_0 / Q4_K, a whole row at TinyLlama's 2048 inputs, so fewer chunks reload and store the accumulators
// and each row's weights stream in longer runs. It and a token group's activations for the chunk no
// longer both fit L1 (48 KiB here); measured anyway, 2026-11-26, 3 alternating runs, TinyLlama prefill
// tokens/s, 24 KiB / 40 KiB: Q4_0 P 512 401-408 / 419-440, Q4_K_M P 512 348-355 / 364-368, P 128 within
// the noise (Q4_0 452-469 / 419-510, Q4_K_M 365-378 / 376-405); 64 KiB was no better than 40 on the kernel.
constexpr size_t kAmxPackBytes = 40 * 1024;
// Q6_K's (Q6AmxBlock, 960 bytes a block): 62 KiB, 64 blocks, also a whole row at 2048 inputs (40 KiB gave
// 40, so each row split in two chunks). Kernel, 2 threads, 256 tokens, 3 alternating rounds, 2026-11-26
// 08:59, GMAC/s, 40 / 62 KiB: 2048 -> 2048 414-425 / 461-466, 2048 -> 5632 461-467 / 484-490, 5632 -> 2048
// 406-415 / 431-446.
constexpr size_t kAmxQ6PackBytes = 62 * 1024;
// Q4_K's (Q4KAmxBlock, 8576 bytes a super-block) per panel: 2 super-blocks, 512 inputs (two panels'
// at a time). And the most activations a Q4_K slab holds (its token count adapts to n_in; see drive_q4k):
// 2026-11-26, kernel, 1 thread, 5632 -> 2048 at 256 tokens, 3 alternating rounds, medians: a slab of 256
// tokens (1.4 MiB of activations) 11.1 ms, 128 tokens 7.9 ms, 64 tokens 9.4 ms.
constexpr size_t kAmxQ4KPackBytes = 20 * 1024;
constexpr size_t kAmxQ4KSlabBytes = 768 * 1024;
// Below this many tokens a matmul goes to the AVX-512 kernels (the same bits): a tile's 16 token rows
// would be mostly padding.
constexpr int64_t kAmxMinTokens = 16;

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};
constexpr TileConfig make_config() {
    TileConfig c;
    for (int i = 0; i < 2; ++i) c.rows[i] = kGroup, c.colsb[i] = 32;          // A: 16 tokens x 32 bytes
    for (int i = 2; i < 4; ++i) c.rows[i] = 8, c.colsb[i] = 64;               // B: 8 x (16 rows x 4 bytes)
    for (int i = 4; i < 8; ++i) c.rows[i] = kGroup, c.colsb[i] = 4 * kRows;   // C: 16 x 16 int32
    return c;
}
constexpr TileConfig kConfig = make_config();
// Q4_K's (q4k-spec: K = 64 per product): every tile 16 x 64 bytes. A: 16 tokens x 64 activations; B: 16
// rows of 4 inputs x 16 weight rows (VNNI); C: 16 tokens x 16 rows, int32.
constexpr TileConfig make_config_k() {
    TileConfig c;
    for (int i = 0; i < 8; ++i) c.rows[i] = kGroup, c.colsb[i] = 64;
    return c;
}
constexpr TileConfig kConfigK = make_config_k();

// Loads the tile configuration `want` unless this thread has it already (see the top of the file).
inline void configure_tiles(const TileConfig &want) {
    alignas(64) uint8_t now[64];
    _tile_storeconfig(now);
    const __m512i a = _mm512_load_si512(now), b = _mm512_load_si512(&want);
    if (_mm512_cmpneq_epi64_mask(a, b) != 0) _tile_loadconfig(&want);
}

struct ChunkEdges {
    __mmask16 mask;  // the panel's real rows
    bool first, last;
};

// Token group t0 .. t0 + T - 1 of a tile (t0 a multiple of 16), nt of them real (T: nt rounded up to 4);
// the others are never stored (y null). A row b of blocks b0 .. starts at x + b * 32, rows `stride`
// apart. The tokens' block scales come from QuantActs' copy by groups of 16 (d16: token t's block b at
// 16 b + t from xd), whose padding tokens read zero.
template <int T>
struct GroupTokens {
    const int8_t *x;
    int64_t stride;
    const float *xd;
    float *y[T];
    GroupTokens(const MatmulJob &job, int64_t b0, int64_t r, int64_t t0, int nt) {
        x = job.xq.qs + t0 * job.n_in + b0 * 32;
        stride = job.n_in;
        xd = job.xq.d16 + (t0 / kGroup * job.xq.nb + b0) * kGroup;
        for (int t = 0; t < T; ++t) y[t] = t < nt ? job.y + (t0 + t) * job.y_stride + r : nullptr;
    }
};

template <int T>
inline void load_acc(const GroupTokens<T> &op, const ChunkEdges &e, __m512 (&acc)[T]) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[t] = e.first || !op.y[t] ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(e.mask, op.y[t]);
}
template <int T>
inline void store_acc(const MatmulJob &job, int64_t r, const GroupTokens<T> &op, const ChunkEdges &e, __m512 (&acc)[T]) {
    const __m512 bias = e.last && job.bias ? _mm512_maskz_loadu_ps(e.mask, job.bias + r) : _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
        if (op.y[t]) _mm512_mask_storeu_ps(op.y[t], e.mask, e.last ? _mm512_add_ps(acc[t], bias) : acc[t]);
}

// Where A tiles come from: in place (a full group), or for a short group (kPad) a copy of its real rows
// into a zero-padded 16 x 32 buffer per block in flight (slot j), so that no tile load reads past the
// activations. block(b, j): block b's A tile, rows a_stride() apart.
template <bool kPad>
struct ASource {
    const int8_t *x;
    int64_t stride;
    ASource(const int8_t *x_, int64_t stride_, int) : x(x_), stride(stride_) {}
    const int8_t *block(int64_t b, int) const { return x + b * 32; }
    int64_t a_stride() const { return stride; }
};
template <>
struct ASource<true> {
    const int8_t *x;
    int64_t stride;
    int nt;
    alignas(64) int8_t pad[4][kGroup * 32];
    ASource(const int8_t *x_, int64_t stride_, int nt_) : x(x_), stride(stride_), nt(nt_) { __builtin_memset(pad, 0, sizeof pad); }
    const int8_t *block(int64_t b, int j) {
        for (int t = 0; t < nt; ++t)
            _mm256_store_si256(reinterpret_cast<__m256i *>(pad[j] + 32 * t),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + t * stride + b * 32)));
        return pad[j];
    }
    int64_t a_stride() const { return 32; }
};

// tmm C = tmm A (tokens) x tmm B (weights): one block's products for 16 tokens x 16 rows. A macro, not a
// template: GCC's tile intrinsics paste the register number into their asm text, so it must be a
// literal.
#define EMBER_AMX_BLOCK_PRODUCT(A, B, C, a, a_stride, b) \
    do {                                               \
        _tile_loadd(A, a, a_stride);                   \
        _tile_loadd(B, b, 64);                         \
        _tile_zero(C);                                 \
        _tile_dpbssd(C, A, B);                         \
    } while (0)

// ---- Q4_0, Q8_0 ----------------------------------------------------------------------------------
// The AVX-512 panel's blocks (Q4Block16): Q4_0 packed as code - 8, Q8_0 as its weights.
struct Q4Amx {
    using Block = Q4Block16;

    // One block's float epilogue for T tokens: the AVX-512 panel's operations (see the top of the file).
    template <int T>
    static void apply(const int32_t (*c)[kRows], const Block &blk, const GroupTokens<T> &op, int64_t b, __m512 (&acc)[T]) {
        apply<T>(c, blk, op.xd + kGroup * b, acc);
    }
    // The same with the block's token scales at xd[t].
    template <int T>
    static void apply(const int32_t (*c)[kRows], const Block &blk, const float *xd, __m512 (&acc)[T]) {
        const __m512 s = _mm512_load_ps(blk.s);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
            const __m512 f = _mm512_cvtepi32_ps(_mm512_load_si512(c[t]));
            acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(s, _mm512_set1_ps(xd[t])), acc[t]);
        }
    }

    // Blocks in fours: four products into tmm4..tmm7 (A and B alternating between two tiles each), each
    // issued before one epilogue of the previous four and stored after it (see the top of the file).
    template <int T, bool kPad>
    static void tile(const MatmulJob &job, const Block *pb, int64_t n, int64_t r, const GroupTokens<T> &op, int nt,
                     const ChunkEdges &e) {
        __m512 acc[T];
        load_acc<T>(op, e, acc);
        ASource<kPad> src(op.x, op.stride, nt);
        const int64_t as = src.a_stride();
        alignas(64) int32_t c[2][4][kGroup][kRows];
        const int64_t n4 = n / 4 * 4;
        int64_t b = 0;
        if (n4 > 0) {
            EMBER_AMX_BLOCK_PRODUCT(0, 2, 4, src.block(0, 0), as, pb[0].q);
            EMBER_AMX_BLOCK_PRODUCT(1, 3, 5, src.block(1, 1), as, pb[1].q);
            EMBER_AMX_BLOCK_PRODUCT(0, 2, 6, src.block(2, 2), as, pb[2].q);
            EMBER_AMX_BLOCK_PRODUCT(1, 3, 7, src.block(3, 3), as, pb[3].q);
            _tile_stored(4, c[0][0], 4 * kRows);
            _tile_stored(5, c[0][1], 4 * kRows);
            _tile_stored(6, c[0][2], 4 * kRows);
            _tile_stored(7, c[0][3], 4 * kRows);
            // Blocks b .. b + 3's products (into c[1 - h]) interleaved with the epilogues of b - 4 .. b - 1
            // (from c[h]), each store one epilogue after its product.
            int h = 0;
            for (b = 4; b < n4; b += 4, h ^= 1) {
                int32_t (*cn)[kGroup][kRows] = c[h ^ 1];
                const int32_t (*cu)[kGroup][kRows] = c[h];
                EMBER_AMX_BLOCK_PRODUCT(0, 2, 4, src.block(b, 0), as, pb[b].q);
                apply<T>(cu[0], pb[b - 4], op, b - 4, acc);
                EMBER_AMX_BLOCK_PRODUCT(1, 3, 5, src.block(b + 1, 1), as, pb[b + 1].q);
                apply<T>(cu[1], pb[b - 3], op, b - 3, acc);
                _tile_stored(4, cn[0], 4 * kRows);
                EMBER_AMX_BLOCK_PRODUCT(0, 2, 6, src.block(b + 2, 2), as, pb[b + 2].q);
                apply<T>(cu[2], pb[b - 2], op, b - 2, acc);
                _tile_stored(5, cn[1], 4 * kRows);
                EMBER_AMX_BLOCK_PRODUCT(1, 3, 7, src.block(b + 3, 3), as, pb[b + 3].q);
                apply<T>(cu[3], pb[b - 1], op, b - 1, acc);
                _tile_stored(6, cn[2], 4 * kRows);
                _tile_stored(7, cn[3], 4 * kRows);
            }
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) apply<T>(c[h][j], pb[n4 - 4 + j], op, n4 - 4 + j, acc);
        }
        for (; b < n; ++b) {
            EMBER_AMX_BLOCK_PRODUCT(0, 2, 4, src.block(b, 0), as, pb[b].q);
            _tile_stored(4, c[0][0], 4 * kRows);
            apply<T>(c[0][0], pb[b], op, b, acc);
        }
        store_acc<T>(job, r, op, e, acc);
    }

    // Full token groups tb, tb + 16, .. (ng of them) of a chunk of n blocks (a multiple of 4), as tile<16,
    // false> runs each, in one pipeline: a group's first four products are interleaved with the
    // previous group's last four epilogues instead of waiting for them. Round i: products of blocks bp ..
    // of the group at xa, epilogues of round i - 1 (blocks be ..).
    static constexpr bool kGroupsPipelined = true;
    static void tiles_full(const MatmulJob &job, const Block *pb, int64_t b0, int64_t n, int64_t r, int64_t tb, int64_t ng,
                           const ChunkEdges &e) {
        const int64_t nq = n / 4, total = ng * nq, as = job.n_in;
        const int8_t *xa = job.xq.qs + tb * job.n_in + b0 * 32;  // the products' group's A at block 0
        int64_t bp = 0;                                          // the products' first block
        auto a_of = [&](int j) { return xa + (bp + j) * 32; };  // block bp + j
        auto b_of = [&](int j) { return pb[bp + j].q; };
        alignas(64) int32_t c[2][4][kGroup][kRows];
        __m512 acc[kGroup];
        load_acc<kGroup>(GroupTokens<kGroup>(job, b0, r, tb, kGroup), e, acc);
        // The epilogues' group's token scales at their block be (QuantActs' d16: 16 floats a block).
        const int64_t gstride = job.xq.nb * kGroup;
        const float *xd = job.xq.d16 + (tb / kGroup * job.xq.nb + b0) * kGroup;
        int64_t te = tb;  // the epilogues' group's first token
        EMBER_AMX_BLOCK_PRODUCT(0, 2, 4, a_of(0), as, b_of(0));
        EMBER_AMX_BLOCK_PRODUCT(1, 3, 5, a_of(1), as, b_of(1));
        EMBER_AMX_BLOCK_PRODUCT(0, 2, 6, a_of(2), as, b_of(2));
        EMBER_AMX_BLOCK_PRODUCT(1, 3, 7, a_of(3), as, b_of(3));
        _tile_stored(4, c[0][0], 4 * kRows);
        _tile_stored(5, c[0][1], 4 * kRows);
        _tile_stored(6, c[0][2], 4 * kRows);
        _tile_stored(7, c[0][3], 4 * kRows);
        int h = 0;
        int64_t be = 0;  // the epilogues' first block (round i - 1)
        for (int64_t i = 1; i <= total; ++i, h ^= 1) {
            bp += 4;
            if (bp == n) bp = 0, xa += kGroup * job.n_in;
            const int32_t (*cu)[kGroup][kRows] = c[h];
            if (i < total) {
                int32_t (*cn)[kGroup][kRows] = c[h ^ 1];
                EMBER_AMX_BLOCK_PRODUCT(0, 2, 4, a_of(0), as, b_of(0));
                apply<kGroup>(cu[0], pb[be], xd + kGroup * be, acc);
                EMBER_AMX_BLOCK_PRODUCT(1, 3, 5, a_of(1), as, b_of(1));
                apply<kGroup>(cu[1], pb[be + 1], xd + kGroup * (be + 1), acc);
                _tile_stored(4, cn[0], 4 * kRows);
                EMBER_AMX_BLOCK_PRODUCT(0, 2, 6, a_of(2), as, b_of(2));
                apply<kGroup>(cu[2], pb[be + 2], xd + kGroup * (be + 2), acc);
                _tile_stored(5, cn[1], 4 * kRows);
                EMBER_AMX_BLOCK_PRODUCT(1, 3, 7, a_of(3), as, b_of(3));
                apply<kGroup>(cu[3], pb[be + 3], xd + kGroup * (be + 3), acc);
                _tile_stored(6, cn[2], 4 * kRows);
                _tile_stored(7, cn[3], 4 * kRows);
            } else {
#pragma GCC unroll 4
                for (int j = 0; j < 4; ++j) apply<kGroup>(cu[j], pb[be + j], xd + kGroup * (be + j), acc);
            }
            be += 4;
            if (be == n) {  // round i - 1 was its group's last
                be = 0;
                store_acc<kGroup>(job, r, GroupTokens<kGroup>(job, b0, r, te, kGroup), e, acc);
                te += kGroup;
                xd += gstride;
                if (i < total) load_acc<kGroup>(GroupTokens<kGroup>(job, b0, r, te, kGroup), e, acc);
            }
        }
    }
};

struct PackQ4_0 : Q4Amx {
    static constexpr int64_t kUnit = 1;
    static void pack(const uint8_t *const (&rows)[kRows], int64_t b0, int64_t n, Block *out) {
        pack_q4_0_16(rows, b0, n, out, 8);
    }
};

// Q8_0: the weights as they are (signed, TDPBSSD's operand), so the tile's integer is the row tiles'
// exact integer (vec_dot_q8_0_x86.hpp) and Q4_0's epilogue (one multiply, one FMA) is theirs.
struct PackQ8_0 : Q4Amx {
    static constexpr int64_t kUnit = 1;
    static void pack(const uint8_t *const (&rows)[kRows], int64_t b0, int64_t n, Block *out) {
        pack_q8_0_16(rows, b0, n, out, 0);
    }
};

// Q4_0 and Q8_0 interleaved at load (rows16.hpp): the same blocks from a group's records (rows[0] the
// first; panel_pack_x86.hpp), the code units already B's rows.
struct PackQ4_0_Rows16 : PackQ4_0 {
    static void pack(const uint8_t *const (&rows)[kRows], int64_t b0, int64_t n, Block *out) {
        pack_q4_0_16_rows16(rows[0], b0, n, out, 8);
    }
};
struct PackQ8_0_Rows16 : PackQ8_0 {
    static void pack(const uint8_t *const (&rows)[kRows], int64_t b0, int64_t n, Block *out) {
        pack_q8_0_16_rows16(rows[0], b0, n, out, 0);
    }
};

// ---- Q4_K (q4k-spec.md: one activation scale per super-block of 256) ------------------------------------
// A panel's super-block, packed. Per K-step k (inputs 64 k .. 64 k + 63: sub-blocks 2k and 2k + 1) two B
// tiles: the low and the high byte of sc_j * code (at most 63 * 15 = 945: the low byte unsigned, TDPBSUD's
// operand; the high one 0..3), B row u holding inputs 4u .. 4u + 3 of the 16 weight rows (dword i = row i;
// rows 0..7 sub-block 2k, rows 8..15 sub-block 2k + 1). The rows' d and dmin as floats, and their mins as
// VPDPWSSD's word pairs for the epilogue's msum.
struct alignas(64) Q4KAmxBlock {
    uint8_t b[4][2][kGroup * 64];  // [K-step][low, high byte][B tile]
    float d[kRows], dmin[kRows];
    int32_t m[4][kRows];           // dword i of m[p]: m_2p | m_(2p + 1) << 16 of row i
};

// Packs super-block `out` from its 16 rows' fields, whichever layout they come from: unit(u) the rows' qs
// bytes 4u .. 4u + 3 (dword i = row i; units 8g .. 8g + 7 hold sub-block 2g in their low nibbles and
// 2g + 1 in their high ones), sc / mn the 6-bit scales / mins (sub-block j of row i at [j / 4][16 (j % 4) +
// i], as q4k_rows16_scales leaves them), d and dmin as floats.
template <class Unit>
inline void q4k_amx_pack(Unit unit, const uint8_t (&sc)[2][64], const uint8_t (&mn)[2][64], __m512 d, __m512 dmin,
                         Q4KAmxBlock &out) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    constexpr __mmask64 kOdd = 0xaaaaaaaaaaaaaaaaull;  // the odd bytes
    auto rows_of = [](const uint8_t (&v)[2][64], int j) {  // sub-block j's 16 values, widened to dwords
        return _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i *>(&v[j / 4][16 * (j % 4)])));
    };
    for (int g = 0; g < 4; ++g) {
        // sc of row i in bytes 0 and 2 (se) or 1 and 3 (so) of dword i: VPMADDUBSW's factors for the codes
        // in the even or the odd bytes, giving each product whole in a word (no saturation: <= 945).
        __m512i se[2], so[2];
        for (int h = 0; h < 2; ++h) {
            const __m512i s = rows_of(sc, 2 * g + h);
            se[h] = _mm512_or_si512(s, _mm512_slli_epi32(s, 16));
            so[h] = _mm512_slli_epi32(se[h], 8);
        }
        for (int u = 0; u < 8; ++u) {
            const __m512i v = unit(8 * g + u);
            const __m512i code[2] = {_mm512_and_si512(v, low4), _mm512_and_si512(_mm512_srli_epi16(v, 4), low4)};
            for (int h = 0; h < 2; ++h) {
                const __m512i pe = _mm512_maddubs_epi16(code[h], se[h]);  // word w: sc * code of byte 2w
                const __m512i po = _mm512_maddubs_epi16(code[h], so[h]);  // sc * code of byte 2w + 1
                const int row = 64 * (8 * h + u);
                _mm512_store_si512(out.b[g][0] + row, _mm512_mask_blend_epi8(kOdd, pe, _mm512_slli_epi16(po, 8)));
                _mm512_store_si512(out.b[g][1] + row, _mm512_mask_blend_epi8(kOdd, _mm512_srli_epi16(pe, 8), po));
            }
        }
    }
    _mm512_store_ps(out.d, d);
    _mm512_store_ps(out.dmin, dmin);
    __m512i mp[4];
    q4k_rows16_min_pairs(mn, mp);
    for (int p = 0; p < 4; ++p) _mm512_store_si512(out.m[p], mp[p]);
}

// Q4_K in the file's layout: super-blocks [s0, s0 + ns) of 16 rows. The code units are gathered (one
// VPGATHERDD of the 16 rows' dword each, as pack_q4_0_16 does), the scales unpacked per row (k_scale_min)
// and turned to sub-block-major order 8 rows at a time (VPMOVQB).
struct PackQ4K {
    static void pack(const uint8_t *const (&rows)[kRows], int64_t s0, int64_t ns, Q4KAmxBlock *out) {
        const __m512i offsets = row_offsets16(rows);
        for (int64_t sb = 0; sb < ns; ++sb) {
            const int64_t s = s0 + sb;
            alignas(64) uint64_t sm[2][kRows];  // k_scale_min's scales [0] and mins [1], byte j = sub-block j
            for (int i = 0; i < kRows; ++i) {
                const KScaleMin k = k_scale_min(reinterpret_cast<const BlockQ4_K *>(rows[i])[s].scales);
                sm[0][i] = k.sc, sm[1][i] = k.m;
            }
            alignas(64) uint8_t v[2][2][64];  // [scales, mins]: q4k_amx_pack's order
            for (int f = 0; f < 2; ++f) {
                const __m512i lo = _mm512_load_si512(sm[f]), hi = _mm512_load_si512(sm[f] + 8);
                for (int j = 0; j < 8; ++j) {
                    const __m128i a = _mm512_cvtepi64_epi8(_mm512_srli_epi64(lo, 8 * j));
                    const __m128i b = _mm512_cvtepi64_epi8(_mm512_srli_epi64(hi, 8 * j));
                    _mm_store_si128(reinterpret_cast<__m128i *>(&v[f][j / 4][16 * (j % 4)]), _mm_unpacklo_epi64(a, b));
                }
            }
            const uint8_t *blk0 = rows[0] + static_cast<size_t>(s) * sizeof(BlockQ4_K);
            q4k_amx_pack([&](int u) { return _mm512_i32gather_epi32(offsets, blk0 + offsetof(BlockQ4_K, qs) + 4 * u, 1); }, v[0],
                         v[1], gather_d16<BlockQ4_K>(rows[0], offsets, s),
                         gather_d16<BlockQ4_K>(rows[0] + offsetof(BlockQ4_K, dmin), offsets, s), out[sb]);
        }
    }
};

// Q4_K interleaved at load (rows16.hpp): a panel is a group, rows[0] its first record, whose code units
// are already B's (one load each) and whose scales unpack for the 16 rows at once.
struct PackQ4KRows16 {
    static void pack(const uint8_t *const (&rows)[kRows], int64_t s0, int64_t ns, Q4KAmxBlock *out) {
        for (int64_t sb = 0; sb < ns; ++sb) {
            const uint8_t *rec = rows[0] + static_cast<size_t>(s0 + sb) * kQ4KRecord;
            alignas(64) uint8_t sc[2][64], mn[2][64];
            q4k_rows16_scales(rec, sc, mn);
            q4k_amx_pack([rec](int u) { return _mm512_loadu_si512(rec + kQ4KRecQs + 64 * u); }, sc, mn,
                         halves16(rec + kQ4KRecD), halves16(rec + kQ4KRecDmin), out[sb]);
        }
    }
};

// K-step K's A into tmm0 (K even) or tmm1 (K odd), rows `as` apart. Templates with literal branches: the
// tile intrinsics take their register numbers as literals.
template <int K>
inline void q4k_load_a(const int8_t *a, int64_t as) {
    if constexpr (K % 2 == 0) {
        _tile_loadd(0, a, as);
    } else {
        _tile_loadd(1, a, as);
    }
}
// K-step K's two products of one panel (A x low bytes, A x high bytes) into C pair P (0: tmm4 / tmm5, 1:
// tmm6 / tmm7): A in tmm0 (K even) or tmm1 (K odd), B in tmm2 / tmm3. Two panels sharing A take both
// pairs, their B one after the other in tmm2 / tmm3.
template <int P, int K>
inline void q4k_products(const Q4KAmxBlock &blk) {
    _tile_loadd(2, blk.b[K][0], 64);
    _tile_loadd(3, blk.b[K][1], 64);
    if constexpr (P == 0 && K % 2 == 0) {
        _tile_dpbsud(4, 0, 2);
        _tile_dpbsud(5, 0, 3);
    } else if constexpr (P == 0) {
        _tile_dpbsud(4, 1, 2);
        _tile_dpbsud(5, 1, 3);
    } else if constexpr (K % 2 == 0) {
        _tile_dpbsud(6, 0, 2);
        _tile_dpbsud(7, 0, 3);
    } else {
        _tile_dpbsud(6, 1, 2);
        _tile_dpbsud(7, 1, 3);
    }
}
template <int P>
inline void q4k_zero() {
    if constexpr (P == 0) {
        _tile_zero(4);
        _tile_zero(5);
    } else {
        _tile_zero(6);
        _tile_zero(7);
    }
}
template <int P>
inline void q4k_store(int32_t (*c)[kGroup][kRows]) {
    if constexpr (P == 0) {
        _tile_stored(4, c[0], 4 * kRows);
        _tile_stored(5, c[1], 4 * kRows);
    } else {
        _tile_stored(6, c[0], 4 * kRows);
        _tile_stored(7, c[1], 4 * kRows);
    }
}

struct Q4KAmx {
    // Where one epilogue's tokens take their accumulators from and leave them: token t's at part + 16 t
    // (the slab's partial sums of this panel), zero at a row's first super-block; to y (+ bias, the real
    // rows and tokens only) after its last.
    struct Acc {
        float *part;
        bool zero;
        float *y;  // token t's 16 outputs at y + t * y_stride, or null: not the row's last super-block
        int64_t y_stride;
        __mmask16 mask;
        int nt;
        __m512 bias;
    };

    // Quarter Q of a super-block's epilogue for a group of T tokens (tokens Q T / 4 ..), vec_dot.hpp's
    // float steps per output: c[0] / c[1] the products with B's low / high bytes (isum = low + 256 high,
    // exact: |isum| < 2^25), xd[t] the token's d, xs + 8 t its 8 block sums (msum = sum_j m_j sum_j by
    // VPDPWSSD on word pairs, exact: < 2^24).
    template <int T, int Q, bool kZero, bool kY>
    static void apply_as(const int32_t (*c)[kGroup][kRows], const Q4KAmxBlock &blk, const float *xd, const int16_t *xs,
                         const Acc &a) {
        const __m512 d = _mm512_load_ps(blk.d), dmin = _mm512_load_ps(blk.dmin);
        const __m512i m0 = _mm512_load_si512(blk.m[0]), m1 = _mm512_load_si512(blk.m[1]);
        const __m512i m2 = _mm512_load_si512(blk.m[2]), m3 = _mm512_load_si512(blk.m[3]);
        auto pair = [xs](int t, int p) {  // token t's sums of sub-blocks 2p, 2p + 1 as one dword, broadcast
            int32_t w;
            __builtin_memcpy(&w, xs + 8 * t + 2 * p, 4);
            return _mm512_set1_epi32(w);
        };
#pragma GCC unroll 16
        for (int t = Q * T / 4; t < (Q + 1) * T / 4; ++t) {
            const __m512i isum = _mm512_add_epi32(_mm512_load_si512(c[0][t]), _mm512_slli_epi32(_mm512_load_si512(c[1][t]), 8));
            __m512i msum = _mm512_dpwssd_epi32(_mm512_setzero_si512(), m0, pair(t, 0));
            msum = _mm512_dpwssd_epi32(msum, m1, pair(t, 1));
            msum = _mm512_dpwssd_epi32(msum, m2, pair(t, 2));
            msum = _mm512_dpwssd_epi32(msum, m3, pair(t, 3));
            const __m512 x = _mm512_set1_ps(xd[t]);
            __m512 acc = kZero ? _mm512_setzero_ps() : _mm512_load_ps(a.part + kRows * t);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, x), acc);
            acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dmin, x), acc);
            if constexpr (!kY) _mm512_store_ps(a.part + kRows * t, acc);
            else if (t < a.nt) _mm512_mask_storeu_ps(a.y + t * a.y_stride, a.mask, _mm512_add_ps(acc, a.bias));
        }
    }

    // apply_as for the accumulators' source and destination at hand (one test per quarter, not per token).
    template <int T, int Q>
    static void apply(const int32_t (*c)[kGroup][kRows], const Q4KAmxBlock &blk, const float *xd, const int16_t *xs,
                      const Acc &a) {
        if (a.zero) {
            if (a.y) apply_as<T, Q, true, true>(c, blk, xd, xs, a);
            else apply_as<T, Q, true, false>(c, blk, xd, xs, a);
        } else {
            if (a.y) apply_as<T, Q, false, true>(c, blk, xd, xs, a);
            else apply_as<T, Q, false, false>(c, blk, xd, xs, a);
        }
    }

    // Groups tb, tb + 16, .. (ng of them, nt tokens each: 16, or one short group with kPad) against a
    // chunk of super-blocks [s0, s0 + ns) of NP panels (1, or 2 sharing each A tile: half the activation
    // traffic, which bounds the tiles: A comes from L2), as one pipeline of items (group, super-block),
    // super-block by super-block: a super-block's B (8 KiB a panel) serves every group while it is in L1
    // (group by group, a chunk's B and the activations streaming past between its uses outgrew L1), and
    // the groups' sums wait in part[n] (token 16 g + t at part[n] + 16 (16 g + t)). Item i's products
    // (its four K-steps accumulating in C) are issued with item i - 1's epilogue in quarters between
    // them, and stored after it, so the tile unit and the vector ports work side by side; one panel
    // alternates between two C pairs, two take all four C tiles.
    template <int NP, int T, bool kPad>
    static void run(const MatmulJob &job, const Q4KAmxBlock *const (&pb)[NP], int64_t s0, int64_t ns, int64_t r, int64_t tb,
                    int64_t ng, int nt, const ChunkEdges (&e)[NP], float *const (&part)[NP]) {
        const QuantActsK &xk = job.xk;
        const int64_t total = ng * ns, n_in = job.n_in;
        // A of item (g, s)'s K-step k: group g's 16 token rows (n_in apart) at inputs 256 (s0 + s) + 64 k,
        // in place, or (kPad) copied with zero rows below into pad[k].
        alignas(64) int8_t pad[kPad ? 4 : 1][kGroup * 64];
        if constexpr (kPad) __builtin_memset(pad, 0, sizeof pad);
        const int64_t as = kPad ? 64 : n_in;
        auto a_of = [&](int64_t g, int64_t s, int k) -> const int8_t * {
            const int8_t *x = xk.qs + (tb + kGroup * g) * n_in + (s0 + s) * QK_K + 64 * k;
            if constexpr (!kPad) return x;
            for (int t = 0; t < nt; ++t)
                _mm512_store_si512(pad[k] + 64 * t, _mm512_loadu_si512(x + t * n_in));
            return pad[k];
        };
        Acc acc[NP];
        for (int n = 0; n < NP; ++n)
            acc[n] = Acc{part[n], e[n].first, nullptr, job.y_stride, e[n].mask, nt,
                         e[n].last && job.bias ? _mm512_maskz_loadu_ps(e[n].mask, job.bias + r + kRows * n) : _mm512_setzero_ps()};
        // Points acc at item (g, s)'s tokens; returns where its d16 / sum16 start.
        auto epilogue_of = [&](int64_t g, int64_t s) {
            for (int n = 0; n < NP; ++n) {
                acc[n].part = part[n] + kRows * kGroup * g;
                acc[n].zero = e[n].first && s == 0;
                acc[n].y = e[n].last && s == ns - 1 ? job.y + (tb + kGroup * g) * job.y_stride + r + kRows * n : nullptr;
            }
            return ((tb / kGroup + g) * xk.nsb + s0 + s) * kGroup;
        };
        alignas(64) int32_t c[2][2 * NP][kGroup][kRows];  // [item % 2][panel n's low, high at 2n, 2n + 1][token][row]
        int64_t pg = 0, ps = 0;  // the products' item: group, super-block
        int64_t eg = 0, es = 0;  // the epilogues' item (one behind)
        auto item = [&]<int P>() {
            const bool ep = pg > 0 || ps > 0;
            const int64_t at = epilogue_of(eg, es);
            const float *xd = xk.d16 + at;
            const int16_t *xs = xk.sum16 + at * 8;
            auto quarter = [&]<int Q>() {
                if (!ep) return;
                for (int n = 0; n < NP; ++n) apply<T, Q>(c[P ^ 1] + 2 * n, pb[n][es], xd, xs, acc[n]);
            };
            auto step = [&]<int K>() {
                q4k_load_a<K>(a_of(pg, ps, K), as);
                if constexpr (NP == 1) {
                    q4k_products<P, K>(pb[0][ps]);
                } else {
                    q4k_products<0, K>(pb[0][ps]);
                    q4k_products<1, K>(pb[NP - 1][ps]);
                }
            };
            if constexpr (NP == 1) q4k_zero<P>();
            else q4k_zero<0>(), q4k_zero<1>();
            step.template operator()<0>();
            quarter.template operator()<0>();
            step.template operator()<1>();
            quarter.template operator()<1>();
            step.template operator()<2>();
            quarter.template operator()<2>();
            step.template operator()<3>();
            quarter.template operator()<3>();
            if constexpr (NP == 1) q4k_store<P>(c[P]);
            else q4k_store<0>(c[P]), q4k_store<1>(c[P] + 2);
            if (ep && ++eg == ng) eg = 0, ++es;
            if (++pg == ng) pg = 0, ++ps;
        };
        for (int64_t i = 0; i < total; i += 2) {
            item.template operator()<0>();
            if (i + 1 < total) item.template operator()<1>();
        }
        // The last item's epilogue.
        const int64_t at = epilogue_of(eg, es);
        for (int n = 0; n < NP; ++n) {
            const int32_t (*cl)[kGroup][kRows] = c[(total - 1) % 2] + 2 * n;
            apply<T, 0>(cl, pb[n][es], xk.d16 + at, xk.sum16 + at * 8, acc[n]);
            apply<T, 1>(cl, pb[n][es], xk.d16 + at, xk.sum16 + at * 8, acc[n]);
            apply<T, 2>(cl, pb[n][es], xk.d16 + at, xk.sum16 + at * 8, acc[n]);
            apply<T, 3>(cl, pb[n][es], xk.d16 + at, xk.sum16 + at * 8, acc[n]);
        }
    }
};

// ---- Q6_K --------------------------------------------------------------------------------------------
// w = code - 32 of the 16 rows as [half 0 | zeros | half 1]: bytes 0..511 are B for half 0 (elements
// 16..31 zero), bytes 256..767 B for half 1 (elements 0..15 zero), so both TDPBSSDs take the block's
// whole A tile. Scales as floats (exact), d per row.
struct alignas(64) Q6AmxBlock {
    int8_t w[3][4 * 64];
    float sc[2][kRows];
    float d[kRows];
};

struct PackQ6_K {
    using Block = Q6AmxBlock;
    static constexpr int64_t kUnit = QK_K / 32;
    static void pack(const uint8_t *const (&rows)[kRows], int64_t b0, int64_t n, Block *out) {
        for (int64_t sb = 0; sb < n / kUnit; ++sb) {
            const int64_t s = b0 / kUnit + sb;
            for (int kb = 0; kb < kUnit; ++kb) {
                Block &pb = out[sb * kUnit + kb];
                __m128i lo[kRows], hi[kRows];
                for (int i = 0; i < kRows; ++i) {
                    const Q6Piece q = q6k_piece(reinterpret_cast<const BlockQ6_K *>(rows[i]) + s, kb);
                    lo[i] = q.lo, hi[i] = q.hi;
                    pb.sc[0][i] = static_cast<float>(q.sc_lo);
                    pb.sc[1][i] = static_cast<float>(q.sc_hi);
                    pb.d[i] = q.d;
                }
                transpose16(lo, reinterpret_cast<uint8_t *>(pb.w[0]));
                for (int k = 0; k < 4; ++k) _mm512_store_si512(pb.w[1] + 64 * k, _mm512_setzero_si512());
                transpose16(hi, reinterpret_cast<uint8_t *>(pb.w[2]));
            }
        }
    }

    template <int T>
    static void apply(const int32_t (*c0)[kRows], const int32_t (*c1)[kRows], const Block &blk, const GroupTokens<T> &op,
                      int64_t b, __m512 (&acc)[T]) {
        const __m512 sc0 = _mm512_load_ps(blk.sc[0]), sc1 = _mm512_load_ps(blk.sc[1]), d = _mm512_load_ps(blk.d);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
            const __m512 h0 = _mm512_cvtepi32_ps(_mm512_load_si512(c0[t])), h1 = _mm512_cvtepi32_ps(_mm512_load_si512(c1[t]));
            const __m512 f = _mm512_fmadd_ps(h1, sc1, _mm512_mul_ps(h0, sc0));  // the exact integer, as a float
            acc[t] = _mm512_fmadd_ps(f, _mm512_mul_ps(d, _mm512_set1_ps(op.xd[kGroup * b + t])), acc[t]);
        }
    }

    // Blocks in pairs: block b's halves into tmm4/tmm5, b + 1's into tmm6/tmm7, interleaved with the
    // previous pair's epilogues as Q4Amx::tile does.
    template <int T, bool kPad>
    static void tile(const MatmulJob &job, const Block *pb, int64_t n, int64_t r, const GroupTokens<T> &op, int nt,
                     const ChunkEdges &e) {
        __m512 acc[T];
        load_acc<T>(op, e, acc);
        ASource<kPad> src(op.x, op.stride, nt);
        const int64_t as = src.a_stride();
        alignas(64) int32_t c[2][4][kGroup][kRows];
        // Block b's halves into tmm4 / tmm5, b + 1's into tmm6 / tmm7.
#define EMBER_AMX_Q6_PRODUCT(A, C0, C1, b, j)      \
    do {                                          \
        _tile_loadd(A, src.block(b, j), as);      \
        _tile_loadd(2, pb[b].w[0], 64);           \
        _tile_loadd(3, pb[b].w[1], 64);           \
        _tile_zero(C0);                           \
        _tile_zero(C1);                           \
        _tile_dpbssd(C0, A, 2);                   \
        _tile_dpbssd(C1, A, 3);                   \
    } while (0)
        // n is whole super-blocks (8 blocks), so pairs cover it. The first pair's products, then each
        // pair's interleaved with the previous pair's epilogues (as in Q4Amx::tile).
        EMBER_AMX_Q6_PRODUCT(0, 4, 5, 0, 0);
        EMBER_AMX_Q6_PRODUCT(1, 6, 7, 1, 1);
        _tile_stored(4, c[0][0], 4 * kRows);
        _tile_stored(5, c[0][1], 4 * kRows);
        _tile_stored(6, c[0][2], 4 * kRows);
        _tile_stored(7, c[0][3], 4 * kRows);
        int h = 0;
        for (int64_t b = 2; b < n; b += 2, h ^= 1) {
            int32_t (*cn)[kGroup][kRows] = c[h ^ 1];
            const int32_t (*cu)[kGroup][kRows] = c[h];
            EMBER_AMX_Q6_PRODUCT(0, 4, 5, b, 0);
            apply<T>(cu[0], cu[1], pb[b - 2], op, b - 2, acc);
            EMBER_AMX_Q6_PRODUCT(1, 6, 7, b + 1, 1);
            _tile_stored(4, cn[0], 4 * kRows);
            _tile_stored(5, cn[1], 4 * kRows);
            apply<T>(cu[2], cu[3], pb[b - 1], op, b - 1, acc);
            _tile_stored(6, cn[2], 4 * kRows);
            _tile_stored(7, cn[3], 4 * kRows);
        }
#undef EMBER_AMX_Q6_PRODUCT
        apply<T>(c[h][0], c[h][1], pb[n - 2], op, n - 2, acc);
        apply<T>(c[h][2], c[h][3], pb[n - 1], op, n - 1, acc);
        store_acc<T>(job, r, op, e, acc);
    }
};

// Q6_K interleaved at load (rows16.hpp): PackQ6_K's blocks from a group's records (rows[0] the first),
// through q6k_rows16_w.
struct PackQ6_K_Rows16 : PackQ6_K {
    static void pack(const uint8_t *const (&rows)[kRows], int64_t b0, int64_t n, Block *out) {
        q6k_rows16_blocks(rows[0], b0, n, [out](int64_t i, const uint8_t *rec, int kb, __m512 d, const __m512i (&w)[8]) {
            Block &pb = out[i];
            for (int half = 0; half < 2; ++half) _mm512_store_ps(pb.sc[half], _mm512_cvtepi32_ps(q6k_rows16_scale(rec, 2 * kb + half)));
            _mm512_store_ps(pb.d, d);
            for (int v = 0; v < 4; ++v) {
                _mm512_store_si512(pb.w[0] + 64 * v, w[v]);
                _mm512_store_si512(pb.w[1] + 64 * v, _mm512_setzero_si512());
                _mm512_store_si512(pb.w[2] + 64 * v, w[4 + v]);
            }
        });
    }
};

// ---- the driver ----------------------------------------------------------------------------------------

// Token group t0 .. t0 + nt - 1 (nt <= 16) of a panel's chunk: a full group in place, a short one padded,
// with its epilogue over nt rounded up to 4 tokens.
template <class Pack>
void group(const MatmulJob &job, const typename Pack::Block *pb, int64_t b0, int64_t n, int64_t r, int64_t t0, int nt,
           const ChunkEdges &e) {
    switch ((nt + 3) / 4) {
    case 1: Pack::template tile<4, true>(job, pb, n, r, GroupTokens<4>(job, b0, r, t0, nt), nt, e); break;
    case 2: Pack::template tile<8, true>(job, pb, n, r, GroupTokens<8>(job, b0, r, t0, nt), nt, e); break;
    case 3: Pack::template tile<12, true>(job, pb, n, r, GroupTokens<12>(job, b0, r, t0, nt), nt, e); break;
    default:
        if (nt == kGroup) Pack::template tile<16, false>(job, pb, n, r, GroupTokens<16>(job, b0, r, t0, nt), nt, e);
        else Pack::template tile<16, true>(job, pb, n, r, GroupTokens<16>(job, b0, r, t0, nt), nt, e);
        break;
    }
}

// Rows [r0, r1) for all tokens: panel_pack_x86.hpp's loop nest (token slabs, k-chunks in whole fours of
// blocks, as the tiles take them, 16-row panels each packed once per slab and chunk), token groups of 16.
template <class Pack>
void drive_amx(const MatmulJob &job, int64_t r0, int64_t r1) {
    constexpr int64_t kStep = 4;
    constexpr size_t kBytes = std::is_same_v<typename Pack::Block, Q6AmxBlock> ? kAmxQ6PackBytes : kAmxPackBytes;
    configure_tiles(kConfig);
    panel_loop<Pack, kRows, kSlab, kStep, kBytes>(
        job, r0, r1,
        [](int64_t nr, bool first, bool last) { return ChunkEdges{static_cast<__mmask16>((1u << nr) - 1), first, last}; },
        [&job](const typename Pack::Block *buf, int64_t b0, int64_t n, int64_t r, int64_t tb, int64_t te, const ChunkEdges &e) {
            int64_t t = tb;
            if constexpr (requires { Pack::kGroupsPipelined; }) {
                const int64_t ng = (te - tb) / kGroup;
                if (n % 4 == 0 && ng > 0) {
                    Pack::tiles_full(job, buf, b0, n, r, tb, ng, e);
                    t += ng * kGroup;
                }
            }
            for (; t < te; t += kGroup)
                group<Pack>(job, buf, b0, n, r, t, static_cast<int>(te - t < kGroup ? te - t : kGroup), e);
        });
}


// Q4_K (Pack: PackQ4K or PackQ4KRows16), rows [r0, r1) for all tokens: token slabs, then pairs of 16-row
// panels (a last odd one alone), then k-chunks of super-blocks, each packed once per slab and panel.
// Panels before chunks (the other formats' panel_loop has them after): a panel's partial sums then stay
// in a small buffer of the slab's tokens (part) between chunks, where y's rows (n_out apart, all panels'
// sums live at once) went to L3 and back per chunk; the slab's activations stay in L2 either way.
template <class Pack>
void drive_q4k(const MatmulJob &job, int64_t r0, int64_t r1) {
    constexpr int64_t kChunk = kAmxQ4KPackBytes / sizeof(Q4KAmxBlock);
    configure_tiles(kConfigK);
    const int64_t nsb = job.xk.nsb;
    Q4KAmxBlock buf[2][kChunk];
    alignas(64) float part[2][kSlab * kRows];
    // Every panel pair reads the slab's activations again: at most kAmxQ4KSlabBytes of them, so that they
    // stay in L2 (2048 inputs: 256 tokens; 5632: 128).
    int64_t slab = static_cast<int64_t>(kAmxQ4KSlabBytes) / job.n_in / kGroup * kGroup;
    slab = slab < kGroup ? kGroup : slab > kSlab ? kSlab : slab;
    for (int64_t tb = 0; tb < job.n_tokens; tb += slab) {
        const int64_t te = tb + slab < job.n_tokens ? tb + slab : job.n_tokens;
        const int64_t ng = (te - tb) / kGroup, tail = (te - tb) % kGroup, tt = tb + ng * kGroup;
        for (int64_t r = r0; r < r1; r += 2 * kRows) {
            const bool two = r + kRows < r1;
            int64_t nr[2];
            const uint8_t *rows[2][kRows];  // past r1: the last row again (read, never stored)
            for (int n = 0; n < (two ? 2 : 1); ++n) {
                const int64_t rn = r + kRows * n;
                nr[n] = r1 - rn < kRows ? r1 - rn : kRows;
                for (int i = 0; i < kRows; ++i) rows[n][i] = job.w + static_cast<size_t>(rn + (i < nr[n] ? i : nr[n] - 1)) * job.row_bytes;
            }
            for (int64_t s0 = 0; s0 < nsb; s0 += kChunk) {
                const int64_t ns = nsb - s0 < kChunk ? nsb - s0 : kChunk;
                auto go = [&]<int NP>() {
                    const Q4KAmxBlock *pb[NP];
                    ChunkEdges e[NP];
                    float *pp[NP], *tp[NP];
                    for (int n = 0; n < NP; ++n) {
                        Pack::pack(rows[n], s0, ns, buf[n]);
                        pb[n] = buf[n];
                        e[n] = ChunkEdges{static_cast<__mmask16>((1u << nr[n]) - 1), s0 == 0, s0 + ns == nsb};
                        pp[n] = part[n];
                        tp[n] = part[n] + kRows * (tt - tb);
                    }
                    const int nt = static_cast<int>(tail);
                    if (ng > 0) Q4KAmx::run<NP, kGroup, false>(job, pb, s0, ns, r, tb, ng, kGroup, e, pp);
                    switch ((tail + 3) / 4) {
                    case 0: break;
                    case 1: Q4KAmx::run<NP, 4, true>(job, pb, s0, ns, r, tt, 1, nt, e, tp); break;
                    case 2: Q4KAmx::run<NP, 8, true>(job, pb, s0, ns, r, tt, 1, nt, e, tp); break;
                    case 3: Q4KAmx::run<NP, 12, true>(job, pb, s0, ns, r, tt, 1, nt, e, tp); break;
                    default: Q4KAmx::run<NP, 16, true>(job, pb, s0, ns, r, tt, 1, nt, e, tp); break;
                    }
                };
                if (two) go.template operator()<2>();
                else go.template operator()<1>();
            }
        }
    }
}

#undef EMBER_AMX_BLOCK_PRODUCT

} // namespace

// The AMX level's kernels for these formats: the tiles from kAmxMinTokens tokens on, the AVX-512 level's
// kernels (the same bits) below, where a tile's 16 token rows would be mostly padding.
void matmul_rows_q8_0_amx(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens >= kAmxMinTokens) return drive_amx<PackQ8_0>(job, r0, r1);
    matmul_rows_q8_0_avx512(job, r0, r1);
}
void matmul_rows_q4_0_amx(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens >= kAmxMinTokens) return drive_amx<PackQ4_0>(job, r0, r1);
    matmul_rows_q4_0_avx512(job, r0, r1);
}
void matmul_rows_q4_k_amx(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens >= kAmxMinTokens) return drive_q4k<PackQ4K>(job, r0, r1);
    matmul_rows_q4_k_avx512(job, r0, r1);
}
void matmul_rows_q6_k_amx(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens >= kAmxMinTokens) return drive_amx<PackQ6_K>(job, r0, r1);
    matmul_rows_q6_k_avx512(job, r0, r1);
}

// Interleaved Q4_K, Q6_K, Q4_0 and Q8_0 (rows16.hpp), whole groups, at least kAmxMinTokens tokens (rows16_rows sends
// only longer products here).
void matmul_rows_q4_k_rows16_amx(const MatmulJob &job, int64_t r0, int64_t r1) { drive_q4k<PackQ4KRows16>(job, r0, r1); }
void matmul_rows_q6_k_rows16_amx(const MatmulJob &job, int64_t r0, int64_t r1) { drive_amx<PackQ6_K_Rows16>(job, r0, r1); }
void matmul_rows_q4_0_rows16_amx(const MatmulJob &job, int64_t r0, int64_t r1) { drive_amx<PackQ4_0_Rows16>(job, r0, r1); }
void matmul_rows_q8_0_rows16_amx(const MatmulJob &job, int64_t r0, int64_t r1) { drive_amx<PackQ8_0_Rows16>(job, r0, r1); }

} // namespace ember::cpu::detail

#endif // AMX-TILE and AMX-INT8
