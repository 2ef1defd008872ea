// ember-amx-probe: what the AMX tile GEMM's (src/cpu/matmul_panel_amx.cpp) pieces cost here, alone and
// together, in TSC cycles per block product (16 tokens x 16 rows x one 32-byte block), all data in L1/L2.
//
//   ember-amx-probe          (x86-64 Linux with AMX-TILE/AMX-INT8 only; run it pinned, on a quiet core)
//
// The kernel's block is a tile product (A 16 x 32 bytes at the activations' row stride, B 8 x 64, TDPBSSD,
// TILESTORED of the 16 x 16 int32) and a float epilogue per token (convert, multiply by a broadcast scale,
// FMA). The question it answers: how much of the tile instructions' time can the epilogue hide, and in
// which order. On a Sapphire Rapids VM (2026-11-26): the epilogue alone 16.6, the products alone 16.1,
// both on unrelated data 29.3 (it hides almost nothing), the stores 11.4; the kernel's plain order (4
// products, 4 stores, 4 epilogues) 47.4 and the pipelined one it now uses (each product of the next four
// before one epilogue of these four, its store one epilogue later) 40.8. One A tile shared by two panels
// gave 39.1 (4 %, less than the accumulator swaps cost) and TDPBF16PS 42 for the tile instructions alone,
// so neither is used (docs/benchmarks.md, "Below target, and why"). The loops are the
// kernel's instruction mix on synthetic data (the values are not checked): compare them with each other.
// As in matmul_panel_avx512.cpp: avx512fintrin.h's _mm512_undefined_* initialise themselves on purpose
// (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
};

constexpr int kStride = 2048;                  // an activation row (TinyLlama's n_in), as the kernel reads A
alignas(64) int8_t g_a[16 * kStride];          // 16 tokens x 64 blocks
alignas(64) int8_t g_b[64][512];               // 64 packed B blocks
alignas(64) int32_t g_c[2][4][16][16];         // the kernel's double-buffered C stores
alignas(64) int32_t g_c_other[4][16][16];      // C data no tile writes (epilogue without a dependency)
alignas(64) float g_xd[64 * 16];               // token scales by block
__m512 g_acc[16];

double cycles_per_block(void (*f)(int), int blocks_per_call) {
    constexpr int kIters = 500000;
    f(kIters / 10);
    const uint64_t t0 = __rdtsc();
    f(kIters);
    return static_cast<double>(__rdtsc() - t0) / kIters / blocks_per_call;
}

// One block's epilogue, the kernel's operations for 16 tokens.
inline void epilogue(const int32_t (*c)[16], const float *xd, __m512 s, __m512 (&acc)[16]) {
#pragma GCC unroll 16
    for (int t = 0; t < 16; ++t)
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[t])), _mm512_mul_ps(s, _mm512_set1_ps(xd[t])), acc[t]);
}

#define PRODUCT(A, B, C, blk)                                        \
    do {                                                             \
        _tile_loadd(A, g_a + (blk) * 32, kStride);                   \
        _tile_loadd(B, g_b[blk], 64);                                \
        _tile_zero(C);                                               \
        _tile_dpbssd(C, A, B);                                       \
    } while (0)

// Each probe runs 4 blocks per call (blocks 4 i & 63 ..), its accumulators in registers for the call.
#define PROBE(name, body)                                                              \
    __attribute__((noinline)) void name(int n) {                                       \
        const __m512 s = _mm512_set1_ps(1.0001f);                                      \
        __m512 acc[16];                                                                \
        for (int t = 0; t < 16; ++t) acc[t] = g_acc[t];                                \
        for (int i = 0; i < n; ++i) {                                                  \
            const int b = i * 4 & 63;                                                  \
            int32_t (*cn)[16][16] = g_c[(i + 1) & 1];                                  \
            int32_t (*cu)[16][16] = g_c[i & 1];                                        \
            (void)b, (void)cn, (void)cu, (void)s;                                      \
            body                                                                       \
        }                                                                              \
        for (int t = 0; t < 16; ++t) g_acc[t] = acc[t];                                \
    }
#define EPI(c, j) epilogue(c, g_xd + 16 * (b + (j)), s, acc)
#define PRODUCTS4 PRODUCT(0, 2, 4, b); PRODUCT(1, 3, 5, b + 1); PRODUCT(0, 2, 6, b + 2); PRODUCT(1, 3, 7, b + 3);
#define STORES4(c) _tile_stored(4, c[0], 64); _tile_stored(5, c[1], 64); _tile_stored(6, c[2], 64); _tile_stored(7, c[3], 64);

PROBE(epi_alone, EPI(g_c_other[0], 0); EPI(g_c_other[1], 1); EPI(g_c_other[2], 2); EPI(g_c_other[3], 3);)
PROBE(products_alone, PRODUCTS4)
PROBE(stores_alone, STORES4(g_c[0]))
PROBE(products_stores, PRODUCTS4 STORES4(g_c[0]))
// The epilogue on data no tile writes, beside one kind of tile instruction: what it hides of them.
PROBE(epi_stores, EPI(g_c_other[0], 0); _tile_stored(4, g_c[0][0], 64); EPI(g_c_other[1], 1); _tile_stored(5, g_c[0][1], 64);
                  EPI(g_c_other[2], 2); _tile_stored(6, g_c[0][2], 64); EPI(g_c_other[3], 3); _tile_stored(7, g_c[0][3], 64);)
PROBE(epi_products, PRODUCT(0, 2, 4, b); EPI(g_c_other[0], 0); PRODUCT(1, 3, 5, b + 1); EPI(g_c_other[1], 1);
                    PRODUCT(0, 2, 6, b + 2); EPI(g_c_other[2], 2); PRODUCT(1, 3, 7, b + 3); EPI(g_c_other[3], 3);)
PROBE(epi_products_stores, PRODUCTS4 STORES4(g_c[0]) EPI(g_c_other[0], 0); EPI(g_c_other[1], 1); EPI(g_c_other[2], 2);
                           EPI(g_c_other[3], 3);)
// The kernel's orders: the epilogues read what the stores wrote.
PROBE(plain, PRODUCTS4 STORES4(cu) EPI(cu[0], 0); EPI(cu[1], 1); EPI(cu[2], 2); EPI(cu[3], 3);)
PROBE(pipelined, PRODUCT(0, 2, 4, b); EPI(cu[0], 0); PRODUCT(1, 3, 5, b + 1); EPI(cu[1], 1); _tile_stored(4, cn[0], 64);
                 PRODUCT(0, 2, 6, b + 2); EPI(cu[2], 2); _tile_stored(5, cn[1], 64); PRODUCT(1, 3, 7, b + 3); EPI(cu[3], 3);
                 _tile_stored(6, cn[2], 64); _tile_stored(7, cn[3], 64);)
PROBE(pipelined_store_early, PRODUCT(0, 2, 4, b); _tile_stored(4, cn[0], 64); EPI(cu[0], 0); PRODUCT(1, 3, 5, b + 1);
                             _tile_stored(5, cn[1], 64); EPI(cu[1], 1); PRODUCT(0, 2, 6, b + 2); _tile_stored(6, cn[2], 64);
                             EPI(cu[2], 2); PRODUCT(1, 3, 7, b + 3); _tile_stored(7, cn[3], 64); EPI(cu[3], 3);)
// One A tile for two panels' B (32 weight rows): 2 A loads per 4 products instead of 4 (the epilogues all
// feed one accumulator set here; the kernel would need a second).
PROBE(pipelined_shared_a,
      _tile_loadd(0, g_a + b / 2 * 32, kStride); _tile_loadd(2, g_b[b], 64); _tile_zero(4); _tile_dpbssd(4, 0, 2);
      EPI(cu[0], 0); _tile_loadd(3, g_b[b + 1], 64); _tile_zero(5); _tile_dpbssd(5, 0, 3); EPI(cu[1], 1);
      _tile_stored(4, cn[0], 64); _tile_loadd(1, g_a + (b / 2 + 1) * 32, kStride); _tile_loadd(2, g_b[b + 2], 64); _tile_zero(6);
      _tile_dpbssd(6, 1, 2); EPI(cu[2], 2); _tile_stored(5, cn[1], 64); _tile_loadd(3, g_b[b + 3], 64); _tile_zero(7);
      _tile_dpbssd(7, 1, 3); EPI(cu[3], 3); _tile_stored(6, cn[2], 64); _tile_stored(7, cn[3], 64);)

void probes() {
    const struct { const char *what; void (*f)(int); } all[] = {
        {"epilogue alone", epi_alone},
        {"products alone (tile loads, TDPBSSD)", products_alone},
        {"tile stores alone", stores_alone},
        {"products + stores", products_stores},
        {"epilogue + tile stores (unrelated data)", epi_stores},
        {"epilogue + products (unrelated data)", epi_products},
        {"epilogue + products + stores (unrelated)", epi_products_stores},
        {"plain order: 4 products, 4 stores, 4 epilogues", plain},
        {"pipelined (the kernel's order)", pipelined},
        {"pipelined, each store right after its product", pipelined_store_early},
        {"pipelined, A shared by two panels", pipelined_shared_a},
    };
    for (const auto &p : all) std::printf("%-48s %5.1f\n", p.what, cycles_per_block(p.f, 4));
}

} // namespace

int main() {
    // Linux hands out the tile state only on request (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA).
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
        std::fprintf(stderr, "ember-amx-probe: the kernel refused the AMX tile state\n");
        return 1;
    }
    std::memset(g_a, 1, sizeof g_a);
    std::memset(g_b, 1, sizeof g_b);
    std::memset(g_c_other, 0, sizeof g_c_other);
    for (float &x : g_xd) x = 1e-3f;
    TileConfig cfg;  // the kernel's: A 16 x 32 bytes, B 8 x 64, C 16 x 64
    for (int i = 0; i < 2; ++i) cfg.rows[i] = 16, cfg.colsb[i] = 32;
    for (int i = 2; i < 4; ++i) cfg.rows[i] = 8, cfg.colsb[i] = 64;
    for (int i = 4; i < 8; ++i) cfg.rows[i] = 16, cfg.colsb[i] = 64;
    _tile_loadconfig(&cfg);
    std::printf("TSC cycles per block product (16 tokens x 16 rows x 32 bytes):\n");
    probes();
    _tile_release();
    return 0;
}
