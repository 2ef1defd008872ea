// test_cpu_kernels.cpp — the CPU kernels against plain double-precision references, at every ISA level
// the CPU has (scalar, AVX2, AVX-512 with VNNI, AMX; the others skipped with the reason), and the thread
// pool.
//
// Every bound below is derived in the comment next to it from what the kernel is allowed to lose
// (u = 2^-24 is the unit roundoff of float). Set EMBER_KERNEL_BENCH=1 to print matmul timings instead
// (EMBER_KERNEL_BENCH=formats: every quantized format at a TinyLlama shape; formats:Q4_K,Q6_K: those;
// gemm[:THREADS[:TOKENS]]: a TinyLlama prefill's products; attention: one layer's attention).
#include "test_util.h"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "cpu/recurrent.hpp"
#include "cpu/rows16.hpp"
#include "cpu/row_steal.hpp"
#include "cpu/threadpool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <dirent.h>
#include <sched.h>
#endif

using namespace ember;
using namespace ember::cpu;

namespace {

constexpr double kU = 1.0 / 16777216.0;  // 2^-24

// Pools live on the heap: a failed cmocka assertion longjmps out of the test without running
// destructors, and a leaked pool's workers must not be left waiting inside memory (the stack) that the
// next test reuses for its own pool.
std::unique_ptr<ThreadPool> make_pool(int n) { return std::make_unique<ThreadPool>(n); }

// Runs f(level) at every ISA level this CPU supports (0 scalar, 1 AVX2, 2 AVX-512 with VNNI, 3 AMX),
// each forced in turn, and skips the others, saying once why (the CPU lacks the level, the OS refuses
// it, or EMBER_CPU_ISA caps it): CI machines differ (AMD EPYC with AVX2 only, Intel Xeon with AVX-512,
// some with AMX), so each runs what it has.
constexpr int kLevels = 4;
bool g_said_skip[kLevels] = {};  // one note per level and process (each caller instantiates the template)
template <class F>
void for_each_variant(F &&f) {
    bool (&said)[kLevels] = g_said_skip;
    for (int v = 0; v < kLevels; ++v) {
        const Isa level = static_cast<Isa>(v);
        if (!force_isa(level)) {
            if (!said[v]) std::printf("cpu kernels: level %d skipped: %s\n", v, isa_unavailable(level));
            said[v] = true;
            continue;
        }
        f(v);
    }
    force_scalar(false);
}

std::vector<float> rand_vec(uint64_t *st, size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (auto &x : v) x = test_randf(st, lo, hi);
    return v;
}

// Exact value of a half, decoded independently of core/fp16.hpp. 0x7c00 (inf) is given the value
// 65536, the next step of the grid, which is what round-to-nearest compares against at the top.
double half_value(uint16_t h) {
    const int e = (h >> 10) & 31;
    const int m = h & 1023;
    const double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0) return s * std::ldexp(m, -24);
    if (e == 31) return m ? NAN : s * 65536.0;
    return s * std::ldexp(1024 + m, e - 25);
}

// Nearest half to v (ties to even) by search over the monotone grid of non-negative halves.
uint16_t ref_fp16(float f) {
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double v = std::fabs(static_cast<double>(f));
    uint32_t lo = 0, hi = 0x7c00;  // invariant: value(lo) <= v
    if (v >= 65536.0) return sign | 0x7c00;
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;
        if (half_value(static_cast<uint16_t>(mid)) <= v) lo = mid; else hi = mid;
    }
    const double d0 = v - half_value(static_cast<uint16_t>(lo)), d1 = half_value(static_cast<uint16_t>(hi)) - v;
    const uint32_t r = d0 < d1 ? lo : (d1 < d0 ? hi : ((lo & 1) ? hi : lo));
    return static_cast<uint16_t>(sign | r);
}

uint16_t ref_bf16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    const uint32_t lo = bits >> 16;  // truncation toward zero; lo + 1 is the next value away from zero
    auto val = [](uint32_t b) {
        if ((b & 0x7fff) == 0x7f80) return std::copysign(std::ldexp(1.0, 128), (b & 0x8000) ? -1.0 : 1.0);
        uint32_t w = b << 16;
        float x;
        std::memcpy(&x, &w, 4);
        return static_cast<double>(x);
    };
    const double v = std::fabs(static_cast<double>(f));
    const double d0 = v - std::fabs(val(lo)), d1 = std::fabs(val(lo + 1)) - v;
    return static_cast<uint16_t>(d0 < d1 ? lo : (d1 < d0 ? lo + 1 : ((lo & 1) ? lo + 1 : lo)));
}

// Floats spread over many binades (sign, exponent and mantissa random), within [2^emin, 2^emax).
float rand_float_binades(uint64_t *st, int emin, int emax) {
    const int e = emin + static_cast<int>(test_randf(st, 0, static_cast<float>(emax - emin)));
    const float m = test_randf(st, 1.0f, 2.0f);
    const float s = test_randf(st, 0, 1) < 0.5f ? -1.0f : 1.0f;
    return s * std::ldexp(m, e);
}

} // namespace

// ---- fp16 / bf16 --------------------------------------------------------------------------------------

// All 65536 halves: fp16_to_fp32 is exact (compared with an independent decoding), and float -> half
// gives the half back (NaN stays NaN), in fp32_to_fp16 and in both variants of store_f16.
static void test_fp16_exhaustive(void **) {
    std::vector<float> f(65536);
    for (uint32_t h = 0; h < 65536; ++h) {
        f[h] = fp16_to_fp32(static_cast<uint16_t>(h));
        const double ref = half_value(static_cast<uint16_t>(h));
        const bool nan = ((h >> 10) & 31) == 31 && (h & 1023);
        if (nan) {
            assert_true(std::isnan(f[h]));
        } else if (((h >> 10) & 31) == 31) {
            assert_true(std::isinf(f[h]) && (f[h] < 0) == ((h & 0x8000) != 0));
            assert_int_equal(fp32_to_fp16(f[h]), h);
        } else {
            if (static_cast<double>(f[h]) != ref) fail_msg("fp16_to_fp32(0x%04x) = %g, want %g", h, f[h], ref);
            assert_int_equal(fp32_to_fp16(f[h]), h);
        }
    }
    for_each_variant([&](int) {
        std::vector<uint16_t> back(65536);
        store_f16(f.data(), back.data(), 256, 256);
        for (uint32_t h = 0; h < 65536; ++h) {
            const bool nan = ((h >> 10) & 31) == 31 && (h & 1023);
            if (nan) {
                assert_true(((back[h] >> 10) & 31) == 31 && (back[h] & 1023));
            } else if (back[h] != h) {
                fail_msg("%s store_f16(half 0x%04x) = 0x%04x", isa_name(), h, back[h]);
            }
        }
    });
}

// Random floats, rounding ties included, against the nearest-even half found by search in double: the
// result must be exactly that half (bound 0 ulp). Overflow (>= 65520) must give inf.
static void test_fp16_rounding(void **) {
    uint64_t st = 0x1234;
    std::vector<float> x;
    for (int i = 0; i < 100000; ++i) x.push_back(rand_float_binades(&st, -27, 17));
    // Exact midpoints between neighbouring halves (representable in float), both signs.
    for (int i = 0; i < 20000; ++i) {
        const uint16_t h = static_cast<uint16_t>(test_randf(&st, 0, 31743));
        const double mid = (half_value(h) + half_value(static_cast<uint16_t>(h + 1))) / 2;
        x.push_back(static_cast<float>((i & 1) ? -mid : mid));
    }
    x.push_back(65519.0f);
    x.push_back(65520.0f);
    x.push_back(-70000.0f);
    x.push_back(1e-9f);
    x.push_back(0.0f);
    x.push_back(-0.0f);
    for (float v : x) {
        const uint16_t want = ref_fp16(v);
        if (fp32_to_fp16(v) != want) fail_msg("fp32_to_fp16(%.9g) = 0x%04x, want 0x%04x", v, fp32_to_fp16(v), want);
    }
    for_each_variant([&](int) {
        std::vector<uint16_t> h(x.size());
        store_f16(x.data(), h.data(), 1, static_cast<int64_t>(x.size()));
        for (size_t i = 0; i < x.size(); ++i)
            if (h[i] != ref_fp16(x[i])) fail_msg("%s store_f16(%.9g) = 0x%04x, want 0x%04x", isa_name(), x[i], h[i], ref_fp16(x[i]));
    });
}

// Largest (up = false) or smallest (up = true) half value on the grid of non-negative halves <= or >= v
// (0 <= v <= 65504), by search.
static double half_grid(double v, bool up) {
    uint32_t lo = 0, hi = 0x7bff;  // invariant: value(lo) <= v
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;
        if (half_value(static_cast<uint16_t>(mid)) <= v) lo = mid; else hi = mid;
    }
    if (half_value(static_cast<uint16_t>(hi)) <= v) lo = hi;
    const double f = half_value(static_cast<uint16_t>(lo));
    return !up || f == v ? f : half_value(static_cast<uint16_t>(lo + 1));
}

// fp32_to_fp16_floor / _ceil (the quantizers' directed roundings): the largest half <= f and the
// smallest half >= f, found by search, for random floats of both signs over the half range (subnormal
// halves included), exact halves and zeros.
static void test_fp16_directed(void **) {
    uint64_t st = 0x4242;
    std::vector<float> x = {0.0f, -0.0f, 1e-9f, -1e-9f, 65504.0f, -65504.0f, 1.0f, -1.0f};
    for (int i = 0; i < 100000; ++i) x.push_back(rand_float_binades(&st, -30, 15));
    for (float f : x) {
        const double v = f;
        const double want_lo = v >= 0 ? half_grid(v, false) : -half_grid(-v, true);
        const double want_hi = v >= 0 ? half_grid(v, true) : -half_grid(-v, false);
        const double lo = half_value(fp32_to_fp16_floor(f)), hi = half_value(fp32_to_fp16_ceil(f));
        if (lo != want_lo || hi != want_hi)
            fail_msg("fp16 floor/ceil of %.9g: %.9g / %.9g, want %.9g / %.9g", f, lo, hi, want_lo, want_hi);
    }
}

// bf16: all 65536 values convert exactly to f32 and back; random floats round to the nearest-even
// bf16 (exact match; NaN stays NaN).
static void test_bf16(void **) {
    for (uint32_t b = 0; b < 65536; ++b) {
        const float f = bf16_to_fp32(static_cast<uint16_t>(b));
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        assert_int_equal(bits, b << 16);
        if (std::isnan(f)) assert_true(std::isnan(bf16_to_fp32(fp32_to_bf16(f))));
        else assert_int_equal(fp32_to_bf16(f), b);
    }
    uint64_t st = 0x777;
    for (int i = 0; i < 200000; ++i) {
        float v = rand_float_binades(&st, -126, 127);
        if (i % 4 == 0) {  // exact midpoint between two bf16 values
            uint32_t bits;
            std::memcpy(&bits, &v, 4);
            bits = (bits & 0xffff0000u) | 0x8000u;
            std::memcpy(&v, &bits, 4);
        }
        if (fp32_to_bf16(v) != ref_bf16(v)) fail_msg("fp32_to_bf16(%.9g) = 0x%04x, want 0x%04x", v, fp32_to_bf16(v), ref_bf16(v));
    }
}

// ---- quantization -------------------------------------------------------------------------------------

// Rows with block scales spread over 4 decades, an all-zero block and a lone outlier.
static std::vector<float> quant_test_row(uint64_t *st, int64_t n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t b = 0; b < n / 32; ++b) {
        const float scale = std::pow(10.0f, test_randf(st, -2, 2));
        for (int j = 0; j < 32; ++j) x[b * 32 + j] = b == 1 ? 0.0f : test_randf(st, -1, 1) * scale;
        if (b == 2) x[b * 32 + 5] = 40.0f;
    }
    return x;
}

// Q8_0: q = round(x / d) with d the stored fp16 scale, so |x - d q| <= d/2; the slack d * 1e-4 covers
// the float rounding of x * (1/d) before it is rounded to an integer (|x/d| <= 127, so that product
// is off by at most ~127 * 2u = 1.5e-5). The stored scale must be max|x| / 127 to fp16 precision.
static void test_quant_q8_0(void **) {
    uint64_t st = 42;
    const int64_t n = 4096;
    const std::vector<float> x = quant_test_row(&st, n);
    std::vector<BlockQ8_0> q(n / 32);
    quantize_row_q8_0(x.data(), q.data(), n);
    std::vector<float> y(n);
    dequantize_row(DType::Q8_0, q.data(), y.data(), n);
    for (int64_t b = 0; b < n / 32; ++b) {
        const double d = fp16_to_fp32(q[b].d);
        double amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
        assert_true(std::fabs(d - amax / 127) <= amax / 127 * (1.0 / 2048));
        for (int j = 0; j < 32; ++j) {
            const double err = std::fabs(static_cast<double>(y[b * 32 + j]) - x[b * 32 + j]);
            if (err > d * (0.5 + 1e-4)) fail_msg("Q8_0 block %lld elem %d: err %g > d/2 = %g", (long long)b, j, err, d / 2);
            assert_true(q[b].qs[j] >= -127);
        }
    }
    // Layout: value = d * qs[j].
    BlockQ8_0 blk;
    blk.d = fp32_to_fp16(0.5f);
    for (int j = 0; j < 32; ++j) blk.qs[j] = static_cast<int8_t>(j - 16);
    float v[32];
    dequantize_row(DType::Q8_0, &blk, v, 32);
    for (int j = 0; j < 32; ++j) assert_true(v[j] == 0.5f * static_cast<float>(j - 16));
}

// Q4_0: codes 0..15 stand for -8..7 times d, with d = max / -8 for the element `max` of largest
// magnitude. Elements round to the nearest code (error <= d/2, + the same 1e-4 d slack as Q8_0), except
// on the side opposite to `max`, where x/d can reach +8 but the largest code is 7: there the clamp can
// cost a whole step, so the bound for the block is |d|, and d/2 for elements not at code 15.
// Activations quantized for the integer kernels (QuantActs): every level gives the scalar kernel's bytes,
// scales and sums, for rows of 1 to 33 blocks (the AVX-512 kernel takes 16 blocks at a time and the rest
// through zero blocks), with blocks of zeros, of -0, of one large value among small ones, of tiny values,
// and of exact rounding ties.
static void test_quantize_acts(void **) {
    uint64_t st = 77;
    for (int64_t nb : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{17}, int64_t{33}}) {
        const int64_t n = nb * 32;
        std::vector<float> x = rand_vec(&st, static_cast<size_t>(n), -3, 3);
        for (int j = 0; j < 32 && nb >= 5; ++j) {
            x[static_cast<size_t>(j)] = 0.0f;
            x[static_cast<size_t>(32 + j)] = -0.0f;
            x[static_cast<size_t>(64 + j)] = j == 7 ? 1e3f : 1e-3f * test_randf(&st, -1, 1);
            x[static_cast<size_t>(96 + j)] = 1e-30f * test_randf(&st, -1, 1);  // tiny (127 / max stays finite)
            x[static_cast<size_t>(128 + j)] = j == 0 ? 127.0f : static_cast<float>(j) + 0.5f;  // id = 1: exact ties
        }
        std::vector<int8_t> want_q(static_cast<size_t>(n)), got_q(want_q.size());
        std::vector<float> want_d(static_cast<size_t>(nb)), want_s(want_d.size()), got_d(want_d.size()), got_s(want_d.size());
        detail::quantize_acts_scalar(x.data(), n, want_q.data(), want_d.data(), want_s.data());
        for_each_variant([&](int level) {
            std::fill(got_q.begin(), got_q.end(), int8_t{99});
            detail::kernels().quantize_acts(x.data(), n, got_q.data(), got_d.data(), got_s.data());
            if (got_q != want_q || std::memcmp(got_d.data(), want_d.data(), want_d.size() * sizeof(float)) != 0 ||
                std::memcmp(got_s.data(), want_s.data(), want_s.size() * sizeof(float)) != 0)
                fail_msg("quantize_acts level %d, %lld blocks: not the scalar kernel's bits", level, (long long)nb);
        });
    }
}

// QuantActsK (Q4_K's activations, one scale per 256): every level gives the scalar kernel's bytes,
// scales and block sums, for rows of 1 to 9 super-blocks, with a super-block of zeros, one whose maximum
// sits in its last block among small values, one of tiny values, and exact rounding ties.
static void test_quantize_acts_k(void **) {
    uint64_t st = 78;
    for (int64_t nsb : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{9}}) {
        const int64_t n = nsb * 256;
        std::vector<float> x = rand_vec(&st, static_cast<size_t>(n), -3, 3);
        for (int j = 0; j < 256 && nsb >= 5; ++j) {
            x[static_cast<size_t>(j)] = j % 2 ? 0.0f : -0.0f;
            x[static_cast<size_t>(256 + j)] = j == 250 ? -1e3f : 1e-3f * test_randf(&st, -1, 1);
            x[static_cast<size_t>(512 + j)] = 1e-30f * test_randf(&st, -1, 1);
            x[static_cast<size_t>(768 + j)] = j == 0 ? 127.0f : static_cast<float>(j % 127) + 0.5f;  // id = 1: ties
        }
        std::vector<int8_t> want_q(static_cast<size_t>(n)), got_q(want_q.size());
        std::vector<float> want_d(static_cast<size_t>(nsb)), got_d(want_d.size());
        std::vector<int16_t> want_s(static_cast<size_t>(nsb * 8)), got_s(want_s.size());
        detail::quantize_acts_k_scalar(x.data(), n, want_q.data(), want_d.data(), want_s.data());
        for (int64_t i = 0; i < n; ++i) {  // the scalar kernel against the definition
            const double q = want_q[static_cast<size_t>(i)], d = want_d[static_cast<size_t>(i / 256)];
            if (!(std::fabs(x[static_cast<size_t>(i)] - d * q) <= (0.5 + 1e-4) * d))
                fail_msg("quantize_acts_k element %lld: %g vs %g * %g", (long long)i, x[static_cast<size_t>(i)], d, q);
        }
        for (int64_t b = 0; b < nsb * 8; ++b) {
            int s = 0;
            for (int j = 0; j < 32; ++j) s += want_q[static_cast<size_t>(b * 32 + j)];
            if (s != want_s[static_cast<size_t>(b)]) fail_msg("quantize_acts_k block %lld: sum %d, stored %d", (long long)b, s, want_s[static_cast<size_t>(b)]);
        }
        for_each_variant([&](int level) {
            std::fill(got_q.begin(), got_q.end(), int8_t{99});
            detail::kernels().quantize_acts_k(x.data(), n, got_q.data(), got_d.data(), got_s.data());
            if (got_q != want_q || got_s != want_s || std::memcmp(got_d.data(), want_d.data(), want_d.size() * sizeof(float)) != 0)
                fail_msg("quantize_acts_k level %d, %lld super-blocks: not the scalar kernel's bits", level, (long long)nsb);
        });
    }
}

static void test_quant_q4_0(void **) {
    uint64_t st = 43;
    const int64_t n = 4096;
    const std::vector<float> x = quant_test_row(&st, n);
    std::vector<BlockQ4_0> q(n / 32);
    quantize_row_q4_0(x.data(), q.data(), n);
    std::vector<float> y(n);
    dequantize_row(DType::Q4_0, q.data(), y.data(), n);
    int clamped = 0;
    for (int64_t b = 0; b < n / 32; ++b) {
        const double d = std::fabs(fp16_to_fp32(q[b].d));
        for (int j = 0; j < 32; ++j) {
            const int code = j < 16 ? (q[b].qs[j] & 15) : (q[b].qs[j - 16] >> 4);
            const double err = std::fabs(static_cast<double>(y[b * 32 + j]) - x[b * 32 + j]);
            const double bound = (code == 15 ? 1.0 : 0.5 + 1e-4) * d + d * 1e-4;
            if (err > bound) fail_msg("Q4_0 block %lld elem %d (code %d): err %g > %g (d %g)", (long long)b, j, code, err, bound, d);
            clamped += code == 15 && err > d * 0.5001;
        }
    }
    assert_true(clamped > 0);  // the clamp case did occur, so the wider bound was needed
    // Layout: element j < 16 in the low nibble of qs[j], element j + 16 in the high nibble.
    BlockQ4_0 blk;
    blk.d = fp32_to_fp16(1.0f);
    for (int j = 0; j < 16; ++j) blk.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    float v[32];
    dequantize_row(DType::Q4_0, &blk, v, 32);
    for (int j = 0; j < 16; ++j) {
        assert_true(v[j] == static_cast<float>(j - 8));
        assert_true(v[j + 16] == static_cast<float>(7 - j));
    }
}

// ---- the GGUF block layouts, decoded independently ---------------------------------------------------------
//
// Written from the GGUF/ggml block definitions, not from core/dtype.hpp or the conversions under test:
// these decide what every quantized test expects.

// Elements and bytes per block.
static int ref_block_size(DType t) {
    switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return 1;
    case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K: case DType::IQ4_XS: return 256;
    default: return 32;
    }
}
static size_t ref_block_bytes(DType t) {
    switch (t) {
    case DType::F32: return 4;
    case DType::F16: case DType::BF16: return 2;
    case DType::Q8_0: return 34;  // f16 d, 32 x int8
    case DType::Q4_0: return 18;  // f16 d, 16 bytes of nibbles
    case DType::Q4_1: return 20;  // f16 d, f16 m, 16 bytes of nibbles
    case DType::Q5_0: return 22;  // f16 d, 4 bytes of fifth bits, 16 bytes of nibbles
    case DType::Q5_1: return 24;  // f16 d, f16 m, 4 bytes of fifth bits, 16 bytes of nibbles
    case DType::Q4_K: return 144; // f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
    case DType::Q5_K: return 176; // as Q4_K with 32 bytes of fifth bits before the nibbles
    case DType::Q6_K: return 210; // 128 bytes low nibbles, 64 bytes top 2 bits, 16 int8 scales, f16 d
    case DType::Q2_K: return 84;  // 16 bytes of 4-bit scale/min pairs, 64 bytes of 2-bit codes, f16 d, f16 dmin
    case DType::Q3_K: return 110; // 32 bytes of high bits, 64 bytes of 2-bit codes, 12 bytes of 6-bit scales, f16 d
    case DType::IQ4_NL: return 18; // f16 d, 16 bytes of 4-bit table indices
    case DType::IQ4_XS: return 136; // f16 d, 16 bits of scale tops, 4 bytes of scale nibbles, 128 bytes of indices
    case DType::MXFP4: return 17; // E8M0 exponent, 16 bytes of E2M1 nibbles
    default: return 0;
    }
}

static bool is_quant(DType t) { return ref_block_size(t) > 1; }

// One row of n elements: v, the exact value of each element; step, the value of one code step where
// the element is (the block's or sub-block's scale); off, the magnitude of the offset the format adds
// to or subtracts from the scaled code (Q4_0's 8 d, Q5_0's 16 d, Q4_1/Q5_1's m, the K-quants' dmin m,
// Q6_K's 32 d scale; 0 for the others) — the kernels' float sums carry it beside the value.
struct Decoded {
    std::vector<double> v, step, off;
};

static Decoded ref_decode(DType type, const uint8_t *row, int64_t n) {
    const size_t un = static_cast<size_t>(n);
    Decoded out{std::vector<double>(un), std::vector<double>(un, 0.0), std::vector<double>(un, 0.0)};
    const int bs = ref_block_size(type);
    const size_t bb = ref_block_bytes(type);
    auto u16 = [](const uint8_t *p) { return static_cast<uint16_t>(p[0] | p[1] << 8); };
    for (int64_t b0 = 0; b0 < n; b0 += bs) {
        const uint8_t *p = row + static_cast<size_t>(b0 / bs) * bb;
        double *v = out.v.data() + b0, *step = out.step.data() + b0, *off = out.off.data() + b0;
        switch (type) {
        case DType::F32: {
            float f;
            std::memcpy(&f, p, 4);
            v[0] = f;
            break;
        }
        case DType::F16: v[0] = half_value(u16(p)); break;
        case DType::BF16: {
            const uint32_t bits = static_cast<uint32_t>(u16(p)) << 16;
            float f;
            std::memcpy(&f, &bits, 4);
            v[0] = f;
            break;
        }
        case DType::Q8_0: {
            const double d = half_value(u16(p));
            for (int j = 0; j < 32; ++j) {
                v[j] = d * static_cast<int8_t>(p[2 + j]);
                step[j] = std::fabs(d);
            }
            break;
        }
        case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: {
            // Element j < 16 is the low nibble of byte j of the nibbles, element j + 16 its high nibble;
            // the fifth bit of element j is bit j of the 4 bytes before them (little-endian).
            const bool has_m = type == DType::Q4_1 || type == DType::Q5_1;
            const bool has_h = type == DType::Q5_0 || type == DType::Q5_1;
            const double d = half_value(u16(p)), m = has_m ? half_value(u16(p + 2)) : 0.0;
            const uint8_t *qh = p + (has_m ? 4 : 2), *qs = qh + (has_h ? 4 : 0);
            for (int j = 0; j < 32; ++j) {
                int code = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
                if (has_h) code += 16 * ((qh[j / 8] >> (j % 8)) & 1);
                step[j] = std::fabs(d);
                if (has_m) {
                    v[j] = d * code + m;
                    off[j] = std::fabs(m);
                } else {
                    const int zero = has_h ? 16 : 8;
                    v[j] = d * (code - zero);
                    off[j] = zero * std::fabs(d);
                }
            }
            break;
        }
        case DType::Q4_K: case DType::Q5_K: {
            // The 12 scale bytes as three rows of four: A holds sc_0..3 in bits 0..5 and bits 4..5 of
            // sc_4..7 in bits 6..7; B the same for the mins; C sc_4..7's bits 0..3 in its low nibbles and
            // m_4..7's in its high nibbles. Sub-block j's codes: the low (j even) or high (j odd) nibbles
            // of bytes 32 (j / 2) .. + 31; Q5_K's fifth bit of element l of sub-block j is bit j of qh[l].
            const double d = half_value(u16(p)), dmin = half_value(u16(p + 2));
            const uint8_t *A = p + 4, *B = p + 8, *C = p + 12;
            const uint8_t *qh = p + 16, *qs = p + (type == DType::Q5_K ? 48 : 16);
            for (int i = 0; i < 256; ++i) {
                const int j = i / 32, l = i % 32;
                const int sc = j < 4 ? A[j] & 63 : (C[j - 4] & 15) | (A[j - 4] >> 6) << 4;
                const int m = j < 4 ? B[j] & 63 : (C[j - 4] >> 4) | (B[j - 4] >> 6) << 4;
                int code = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
                if (type == DType::Q5_K) code += 16 * ((qh[l] >> j) & 1);
                v[i] = d * sc * code - dmin * m;
                step[i] = std::fabs(d * sc);
                off[i] = std::fabs(dmin * m);
            }
            break;
        }
        case DType::Q6_K: {
            // Element 128 h + 32 k + l: low 4 bits in the low (k < 2) or high nibble of
            // ql[64 h + 32 (k % 2) + l], top 2 bits at bit 2k of qh[32 h + l]; scale i / 16.
            const uint8_t *ql = p, *qh = p + 128;
            const auto *scales = reinterpret_cast<const int8_t *>(p + 192);
            const double d = half_value(u16(p + 208));
            for (int i = 0; i < 256; ++i) {
                const int h = i / 128, k = i % 128 / 32, l = i % 32;
                const int low = (ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 15;
                const int high = (qh[32 * h + l] >> (2 * k)) & 3;
                v[i] = d * scales[i / 16] * (low + 16 * high - 32);
                step[i] = std::fabs(d * scales[i / 16]);
                off[i] = 32 * step[i];
            }
            break;
        }
        case DType::Q2_K: case DType::Q3_K: {
            // Element 128 h + 32 k + l: 2-bit code at bits 2k, 2k + 1 of the code byte 32 h + l, scale
            // i / 16. Q2_K (scales, codes, d, dmin): value d * (scale & 15) * code - dmin * (scale >> 4).
            // Q3_K (hmask, codes, scales, d): code - 4 where bit 4h + k of hmask[l] is clear; the scale
            // is 6 bits - 32, its low 4 bits the low (j < 8) or high nibble of byte j % 8, its top 2 at
            // bits 2 (j / 4) of byte 8 + j % 4.
            const bool q2 = type == DType::Q2_K;
            const uint8_t *qs = p + (q2 ? 16 : 32);
            const double d = half_value(u16(p + (q2 ? 80 : 108))), dmin = q2 ? half_value(u16(p + 82)) : 0.0;
            for (int i = 0; i < 256; ++i) {
                const int h = i / 128, k = i % 128 / 32, l = i % 32, j = i / 16;
                int code = (qs[32 * h + l] >> (2 * k)) & 3;
                if (q2) {
                    const int sc = p[j] & 15, m = p[j] >> 4;
                    v[i] = d * sc * code - dmin * m;
                    step[i] = std::fabs(d * sc);
                    off[i] = std::fabs(dmin * m);
                } else {
                    if (!((p[l] >> (4 * h + k)) & 1)) code -= 4;
                    const uint8_t *sb = p + 96;
                    const int sc = (((sb[j % 8] >> (j < 8 ? 0 : 4)) & 15) | ((sb[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
                    v[i] = d * sc * code;
                    step[i] = std::fabs(d * sc);
                }
            }
            break;
        }
        case DType::IQ4_NL: case DType::IQ4_XS: case DType::MXFP4: {
            // 4-bit indices into a table, element j < 16 the low nibble of byte j of its 32's indices,
            // j + 16 the high one. IQ4: the table below times d (IQ4_XS: times 6-bit scale - 32 of each
            // 32, low 4 bits nibble j % 2 of byte 4 + j / 2, top 2 bits at bit 2j of bytes 2..3).
            // MXFP4: E2M1 values (0, .5, 1, 1.5, 2, 3, 4, 6 and negatives) times 2^(e - 127). step: the
            // table's widest gap times the scale (no element is further than half of it from the grid).
            static const int kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
            static const double kE2m1[16] = {0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6};
            for (int j = 0; j < bs / 32; ++j) {
                double scale;
                const uint8_t *idx;
                if (type == DType::MXFP4) {
                    scale = std::ldexp(1.0, p[0] - 127);
                    idx = p + 1;
                } else if (type == DType::IQ4_NL) {
                    scale = half_value(u16(p));
                    idx = p + 2;
                } else {
                    const int ls = ((p[4 + j / 2] >> (4 * (j % 2))) & 15) | ((u16(p + 2) >> (2 * j)) & 3) << 4;
                    scale = half_value(u16(p)) * (ls - 32);
                    idx = p + 8 + 16 * j;
                }
                for (int l = 0; l < 32; ++l) {
                    const int n4 = l < 16 ? idx[l] & 15 : idx[l - 16] >> 4;
                    const double t = type == DType::MXFP4 ? kE2m1[n4] : kIq4[n4];
                    v[32 * j + l] = scale * t;
                    step[32 * j + l] = std::fabs(scale) * (type == DType::MXFP4 ? 2.0 : 24.0);
                }
            }
            break;
        }
        default: fail_msg("ref_decode: type %s", dtype_name(type));
        }
    }
    return out;
}

static const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,   DType::Q4_0,   DType::Q4_1,
                                  DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,   DType::Q4_K,   DType::Q5_K,
                                  DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};
static const DType kNewQuantTypes[] = {DType::Q4_1, DType::Q5_0,   DType::Q5_1,   DType::Q2_K, DType::Q3_K, DType::Q4_K,
                                       DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};
// The table formats: no element is further than half a table gap from the grid, and step (the widest gap)
// bounds every gap, so "half a step" holds; the range checks below use their own rules.
static const DType kQuantTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1,   DType::Q5_0,   DType::Q5_1,  DType::Q2_K,
                                    DType::Q3_K, DType::Q4_K, DType::Q5_K,   DType::Q6_K,   DType::IQ4_NL, DType::IQ4_XS,
                                    DType::MXFP4};
static bool is_table(DType t) { return t == DType::IQ4_NL || t == DType::IQ4_XS || t == DType::MXFP4; }

// dtype_info agrees with the layouts above, and every type the kernels take is marked supported.
static void test_block_layouts(void **) {
    for (DType t : kAllTypes) {
        const DTypeInfo &i = dtype_info(t);
        if (static_cast<int>(i.block_size) != ref_block_size(t) || i.block_bytes != ref_block_bytes(t) || !i.supported)
            fail_msg("%s: block %u x %u bytes, supported %d", dtype_name(t), i.block_size, i.block_bytes, i.supported);
    }
    assert_false(dtype_info(DType::Q8_K).supported);  // no kernel needs Q8_K
}

// The reference quantizers of the other formats, on quant_test_row (4096 elements: whole super-blocks),
// decoded by ref_decode. Every element must be within half a step of its value, the step being the one
// stored for its block or sub-block: those quantizers pick offsets and steps that cover the range (see
// quant.cpp, quant_k.cpp), so no code is clamped, except with Q5_0, which follows Q4_0's recipe and can
// lose a whole step on the side opposite its largest element (code 31), as in test_quant_q4_0.
// Slack: a code is rounded from fl(fl(x + offset) / step), which is off by at most
// 2.01 u (|x| + offset) / step, hence + 4 u (|x| + offset); and 1e-4 step for a code pushed a few ulps
// past the top and clamped. The steps must also not be wasteful: at most the block's range over the
// number of steps (times 1 + 2^-9 for the fp16 rounding of d, which is upward), and for the K-quants
// at most one unit of the super-block scale above the sub-block's ideal step (6- or 8-bit scales are
// rounded up), where the range includes the (sub-block's) offset rounded up to a whole step of dmin.
static void test_quant_formats(void **) {
    uint64_t st = 44;
    const int64_t n = 4096;
    const std::vector<float> x = quant_test_row(&st, n);
    auto u16 = [](const uint8_t *p) { return half_value(static_cast<uint16_t>(p[0] | p[1] << 8)); };
    for (DType type : kNewQuantTypes) {
        std::vector<uint8_t> q(dtype_row_bytes(type, static_cast<uint64_t>(n)));
        quantize_row(type, x.data(), q.data(), n);
        const Decoded dec = ref_decode(type, q.data(), n);
        const int k_max = type == DType::Q2_K ? 3 : type == DType::Q4_1 || type == DType::Q4_K ? 15 : 31;  // affine formats
        double worst = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double e = dec.step[i], err = std::fabs(dec.v[i] - x[i]);
            double bound = (0.5 + 1e-4) * e + 4 * kU * (std::fabs(x[i]) + dec.off[i]);
            if (is_table(type)) bound += 24 * kU * std::fabs(x[i]);  // the nearest entry of x / d, rounded
            if (type == DType::Q5_0) {
                const double d = u16(q.data() + static_cast<size_t>(i / 32) * 22);
                const long code = d != 0 ? std::lround(dec.v[i] / d) + 16 : 16;
                if (code == 31) bound = (1.0 + 1e-4) * e;
            }
            if (!(err <= bound)) fail_msg("%s elem %lld: %.9g -> %.9g, err %g > %g (step %g)", dtype_name(type), (long long)i, x[i], dec.v[i], err, bound, e);
            if (e > 0) worst = std::fmax(worst, err / e);
        }
        // Steps against ranges, per (sub-)block of `sub` elements.
        const int sub = type == DType::Q6_K || type == DType::Q2_K || type == DType::Q3_K ? 16 : 32;
        for (int64_t b0 = 0; b0 < n; b0 += sub) {
            double lo = x[b0], hi = x[b0], amax = 0;
            for (int64_t i = b0; i < b0 + sub; ++i) {
                lo = std::fmin(lo, x[i]);
                hi = std::fmax(hi, x[i]);
                amax = std::fmax(amax, std::fabs(x[i]));
            }
            const double e = dec.step[b0];
            const size_t sb = static_cast<size_t>(b0 / 256) * ref_block_bytes(type);  // super-block
            double ideal = 0, slack = 0;
            switch (type) {
            case DType::Q4_1: case DType::Q5_1:
                // m is the minimum rounded down to a half: hi - m <= hi - lo + 2^-10 |lo| + 2^-24 (the
                // spacing of halves near lo); d is rounded up, by at most 2^-10 relative or 2^-24.
                ideal = (hi - lo + std::fabs(lo) / 1024 + std::ldexp(1.0, -24)) / k_max * (1 + 1.0 / 512);
                slack = std::ldexp(1.0, -24);
                break;
            case DType::Q5_0:  // d = max / -16 rounded to the nearest half
                ideal = amax / 16 * (1 + 1.0 / 1024), slack = std::ldexp(1.0, -24);
                break;
            case DType::Q4_K: case DType::Q5_K: {
                const double d = u16(q.data() + sb), dmin = u16(q.data() + sb + 2);
                ideal = (hi - std::fmin(lo, 0.0) + dmin) / k_max * (1 + 1e-5);
                slack = d;
                break;
            }
            case DType::Q6_K: ideal = amax / 31 * (1 + 1e-5), slack = u16(q.data() + sb + 208); break;
            case DType::Q2_K: {  // as Q4_K with 16-element sub-blocks and 4-bit scales and mins
                const double d = u16(q.data() + sb + 80), dmin = u16(q.data() + sb + 82);
                ideal = (hi - std::fmin(lo, 0.0) + dmin) / k_max * (1 + 1e-5);
                slack = d;
                break;
            }
            case DType::Q3_K: ideal = amax / 3 * (1 + 1e-5), slack = u16(q.data() + sb + 108); break;
            // The table scales: IQ4's d >= amax / 113 rounded up to a half (IQ4_XS: to a whole multiple of
            // its super-block d), step 24 d; MXFP4's 2^(e - 128) is under 2 amax / 12 (a power of two
            // rounded up), and step = 2 E2M1 units = 4 of those.
            case DType::IQ4_NL: ideal = amax / 113 * (1 + 1.0 / 512) * 24, slack = std::ldexp(1.0, -24); break;
            case DType::IQ4_XS: ideal = amax / 113 * 24 * (1 + 1e-5), slack = 24 * u16(q.data() + sb); break;
            case DType::MXFP4: ideal = amax / 12 * 8 * (1 + 1e-6), slack = std::ldexp(1.0, -120); break;
            default: break;
            }
            if (!(e <= ideal + slack)) fail_msg("%s block at %lld: step %g > %g + %g", dtype_name(type), (long long)b0, e, ideal, slack);
        }
        print_message("quantize %-5s ok; worst |err| / step %.4f\n", dtype_name(type), worst);
    }
}

// ---- weights for the matmul tests ----------------------------------------------------------------------

struct TestWeight {
    DType type;
    int64_t n_in, n_out;
    std::vector<uint8_t> data;
    std::vector<float> deq;      // dequantize_row's output: what get_rows must return
    std::vector<double> exact;   // the values the weight stands for (ref_decode)
    std::vector<double> off;     // ref_decode's offset magnitudes
    WeightView view() const {
        WeightView w;
        w.type = type;
        w.n_in = n_in;
        w.n_out = n_out;
        w.data = data.data();
        w.row_bytes = dtype_row_bytes(type, static_cast<uint64_t>(n_in));
        return w;
    }
};

// Arbitrary bytes for a row's codes, scales and mins, with its fp16 fields set to sizes that keep the
// values O(1): blocks our quantizers never write (negative and -128 Q6_K scales, codes at both ends,
// every bit pattern of the packed 6-bit scales, negative d and dmin) but a valid file may hold.
static void scramble_row(DType type, uint8_t *row, size_t bytes, uint64_t *st) {
    for (size_t i = 0; i < bytes; ++i) row[i] = static_cast<uint8_t>(test_randf(st, 0, 256));
    auto put = [&](uint8_t *p, float lo, float hi) {  // a half of magnitude in [lo, hi), either sign
        const float v = test_randf(st, lo, hi) * (test_randf(st, 0, 1) < 0.5f ? -1.0f : 1.0f);
        const uint16_t h = fp32_to_fp16(v);
        std::memcpy(p, &h, 2);
    };
    const size_t bb = ref_block_bytes(type);
    for (uint8_t *p = row; p < row + bytes; p += bb) {
        switch (type) {
        case DType::Q4_1: put(p, 0.01f, 0.1f), put(p + 2, 0.0f, 1.0f); break;
        case DType::Q5_0: put(p, 0.01f, 0.06f); break;
        case DType::Q5_1: put(p, 0.005f, 0.05f), put(p + 2, 0.0f, 1.0f); break;
        case DType::Q4_K: put(p, 5e-4f, 2e-3f), put(p + 2, 0.0f, 0.03f); break;
        case DType::Q5_K: put(p, 2.5e-4f, 1e-3f), put(p + 2, 0.0f, 0.03f); break;
        case DType::Q6_K: put(p + 208, 5e-5f, 2.5e-4f); break;
        case DType::Q2_K: put(p + 80, 2e-3f, 1e-2f), put(p + 82, 0.0f, 0.01f); break;
        case DType::Q3_K: put(p + 108, 2e-3f, 1e-2f); break;
        case DType::IQ4_NL: put(p, 2e-3f, 1e-2f); break;
        case DType::IQ4_XS: put(p, 5e-5f, 2.5e-4f); break;
        case DType::MXFP4: p[0] = static_cast<uint8_t>(120 + test_randf(st, 0, 8)); break;  // scales 2^-7 .. 2^0
        default: fail_msg("scramble_row: %s", dtype_name(type));
        }
    }
}

static TestWeight make_weight(DType type, int64_t n_out, int64_t n_in, uint64_t *st) {
    TestWeight w{type, n_in, n_out, {}, {}, {}, {}};
    const size_t rb = dtype_row_bytes(type, static_cast<uint64_t>(n_in));
    w.data.resize(rb * static_cast<size_t>(n_out));
    w.deq.resize(static_cast<size_t>(n_in * n_out));
    w.exact.reserve(w.deq.size());
    w.off.reserve(w.deq.size());
    for (int64_t r = 0; r < n_out; ++r) {
        const std::vector<float> src = rand_vec(st, static_cast<size_t>(n_in), -1, 1);
        uint8_t *row = w.data.data() + rb * static_cast<size_t>(r);
        switch (type) {
        case DType::F32: std::memcpy(row, src.data(), rb); break;
        case DType::F16:
            for (int64_t i = 0; i < n_in; ++i) reinterpret_cast<uint16_t *>(row)[i] = fp32_to_fp16(src[i]);
            break;
        case DType::BF16:
            for (int64_t i = 0; i < n_in; ++i) reinterpret_cast<uint16_t *>(row)[i] = fp32_to_bf16(src[i]);
            break;
        case DType::Q8_0: {
            auto *b = reinterpret_cast<BlockQ8_0 *>(row);
            quantize_row_q8_0(src.data(), b, n_in);
            // A valid Q8_0 file may hold -128, which the sign trick must survive (|-128| = 128 unsigned).
            if (r % 3 == 0) b[0].qs[r % 32] = -128;
            break;
        }
        case DType::Q4_0: quantize_row_q4_0(src.data(), reinterpret_cast<BlockQ4_0 *>(row), n_in); break;
        default:
            quantize_row(type, src.data(), row, n_in);
            if (r % 3 == 0) scramble_row(type, row, rb, st);  // every third row: arbitrary content
            break;
        }
        dequantize_row(type, row, w.deq.data() + r * n_in, n_in);
        const Decoded dec = ref_decode(type, row, n_in);
        w.exact.insert(w.exact.end(), dec.v.begin(), dec.v.end());
        w.off.insert(w.off.end(), dec.off.begin(), dec.off.end());
    }
    return w;
}

// dequantize_row (and so get_rows) gives each element's exact value rounded once to float: exactly the
// float nearest to ref_decode's value (which is exact in double: at most 50 significant bits). The
// conversions are written so that every product in them is exact and only the final operation rounds.
static void test_dequantize(void **) {
    uint64_t st = 45;
    for (DType type : kAllTypes) {
        const TestWeight w = make_weight(type, 12, 512, &st);
        for (size_t i = 0; i < w.deq.size(); ++i)
            if (!(w.deq[i] == static_cast<float>(w.exact[i])))
                fail_msg("%s elem %zu: dequantized %.9g, exact %.17g", dtype_name(type), i, w.deq[i], w.exact[i]);
    }
}

// Reference y[t][o] in double and the error bound for each output.
//
// Float weights (F32/F16/BF16): the weights are exact floats and so are the activations, so the only
// error is rounding in the sum. Both variants sum in 8 interleaved lanes (n_in / 8 FMAs or multiply-adds
// per lane) and then add the lanes and the bias: the classic bound gives
// |err| <= gamma_k * (sum |w x| + |bias|) with k = n_in/8 + 8 (a few spare for the lane sums), ~1e-6
// at n_in = 288 and 3e-5 at 4096.
//
// Quantized weights: activations are quantized to 8 bits per block of 32 (Q4_K: of 256, QuantActsK, and
// d_b below is then the block's super-block's) with d_b = max_b|x| / 127, so
// each x_i is off by at most d_b/2 (+1e-4 d_b for the float product before rounding, as in
// test_quant_q8_0); the weights are exact. So |err| <= qerr = sum_b (0.5 + 1e-4) d_b sum_{i in b} |w_i|,
// plus float rounding. For random data qerr is ~1/127 of sum |w_i x_i| (mean |x| ≈ max/2), the "1e-2
// relative" rule. The float sums add exact integer dot products of codes times scale products and, for
// formats with an offset (ref_decode's off: Q4_0's 8 d, the mins, ...), the offset times the activations'
// block sums: terms of magnitude at most sum (|w_i| + 2 off_i) (|x_i| + (0.5 + 1e-4) d_b) =: mag
// (|d code| <= |w| + off). With at most k roundings on the way to an output (scale products, the running
// sum, the lanes' sum, the offset term, the bias), |rounding| <= gamma_k (mag + |bias|): k = nb + 8 for
// Q8_0/Q4_0 (one float term per block), 2 nb + 8 for the others (their scalar kernels add a block's
// offset term separately; the AVX2 ones add at most nb + nb / 8 terms per lane).
struct Reference {
    std::vector<double> y, bound;
    std::vector<double> rounding;  // the float-rounding part of bound
    std::vector<double> sum_abs;   // sum |w x|
};

static Reference reference(const TestWeight &w, const std::vector<float> &x, int64_t nt, const float *bias) {
    const int64_t n = w.n_in, nb = n / 32;
    const bool quant = is_quant(w.type);
    Reference ref;
    ref.y.resize(static_cast<size_t>(nt * w.n_out));
    ref.bound.resize(ref.y.size());
    ref.rounding.resize(ref.y.size());
    ref.sum_abs.resize(ref.y.size());
    // Q4_K's activations have one scale per 256 (QuantActsK): each block of 32 gets its super-block's.
    const int span = w.type == DType::Q4_K ? 256 : 32;
    std::vector<double> dx(static_cast<size_t>(nt * nb));
    for (int64_t t = 0; t < nt; ++t)
        for (int64_t b = 0; b < nb; ++b) {
            double amax = 0;
            const int64_t b0 = b * 32 / span * span;
            for (int j = 0; j < span; ++j) amax = std::fmax(amax, std::fabs(x[t * n + b0 + j]));
            dx[t * nb + b] = amax / 127;
        }
    for (int64_t t = 0; t < nt; ++t)
        for (int64_t o = 0; o < w.n_out; ++o) {
            const double *wr = w.exact.data() + o * n;
            const double *wo = w.off.data() + o * n;
            const float *xr = x.data() + t * n;
            double s = 0, sa = 0, qerr = 0, mag = 0;
            // Quantized types: n_in is whole blocks. Float types may have a partial last "block" (the
            // n_in = 172 shapes), which only the plain sums below see.
            for (int64_t b = 0; b * 32 < n; ++b) {
                const double xe = quant ? (0.5 + 1e-4) * dx[t * nb + b] : 0.0;
                double wa = 0;
                for (int64_t i = b * 32; i < (b + 1) * 32 && i < n; ++i) {
                    s += wr[i] * xr[i];
                    sa += std::fabs(wr[i] * xr[i]);
                    mag += (std::fabs(wr[i]) + 2 * wo[i]) * (std::fabs(xr[i]) + xe);
                    wa += std::fabs(wr[i]);
                }
                qerr += xe * wa;
            }
            const double bb = bias ? bias[o] : 0.0;
            const size_t k = static_cast<size_t>(t * w.n_out + o);
            ref.y[k] = s + bb;
            ref.sum_abs[k] = sa;
            if (quant) {
                // Q4_K: per super-block the float conversion of its integer and two FMAs.
                const double depth = w.type == DType::Q8_0 || w.type == DType::Q4_0 ? nb + 8
                                     : w.type == DType::Q4_K                      ? 3 * (nb / 8) + 8
                                                                                  : 2 * nb + 8;
                ref.rounding[k] = depth * kU * (mag + std::fabs(bb)) * 1.01;
                ref.bound[k] = qerr + ref.rounding[k];
            } else {
                ref.rounding[k] = (n / 8 + 8) * kU * (sa + std::fabs(bb)) * 1.01;
                ref.bound[k] = ref.rounding[k];
            }
        }
    return ref;
}

// Every weight type x n_in {32, 64, (172), 256, 288, 768, 4096} (those that are whole blocks of the type)
// x n_out {1, 7, 288, 513} x n_tokens {1, 3, 17}, bias on every other shape. Each output is held to its
// bound from reference(); the two variants must also agree within twice the rounding part of it (they
// compute the same exact block sums from the same quantized activations and differ only in the order
// of float additions).
static void test_matmul(void **) {
    auto pool_owner = make_pool(2);
    ThreadPool &pool = *pool_owner;
    Scratch scratch;
    uint64_t st = 7;
    // 172 (not whole blocks, nor a multiple of 8: the scalar tails) only for the float types, which
    // allow any row length (stories260K's FFN has 172).
    const int64_t n_ins[] = {32, 64, 172, 256, 288, 768, 4096};
    const int64_t n_outs[] = {1, 7, 288, 513};
    const int64_t n_toks[] = {1, 3, 17};
    for (DType type : kAllTypes) {
        double worst_rel = 0;  // max |err| / sum|w x|, for the record
        int shape = 0;
        for (int64_t n_in : n_ins)
            for (int64_t n_out : n_outs) {
                if (n_in % ref_block_size(type) != 0 || (is_quant(type) && n_in % 32 != 0)) continue;
                const TestWeight w = make_weight(type, n_out, n_in, &st);
                for (int64_t nt : n_toks) {
                    std::vector<float> x = rand_vec(&st, static_cast<size_t>(nt * n_in), -1, 1);
                    for (int64_t t = 0; t < nt; ++t)  // vary the magnitude per token and per block
                        for (int64_t i = 0; i < n_in; ++i) x[t * n_in + i] *= (t % 2 ? 30.0f : 1.0f) * (i / 32 % 3 ? 1.0f : 0.01f);
                    const bool with_bias = (shape++ % 2) == 1;
                    const std::vector<float> bias = rand_vec(&st, static_cast<size_t>(n_out), -2, 2);
                    const float *bp = with_bias ? bias.data() : nullptr;
                    const Reference ref = reference(w, x, nt, bp);
                    std::vector<float> y[kLevels];
                    for_each_variant([&](int v) {
                        y[v].assign(static_cast<size_t>(nt * n_out), NAN);
                        matmul(pool, scratch, w.view(), x.data(), nt, y[v].data(), bp);
                        for (size_t i = 0; i < y[v].size(); ++i) {
                            const double err = std::fabs(y[v][i] - ref.y[i]);
                            if (!(err <= ref.bound[i]))
                                fail_msg("%s %s n_in %lld n_out %lld nt %lld out %zu: %.9g vs %.9g, err %g > bound %g",
                                         isa_name(), dtype_name(type), (long long)n_in, (long long)n_out, (long long)nt, i,
                                         y[v][i], ref.y[i], err, ref.bound[i]);
                        }
                    });
                    // Every level within rounding of the scalar one.
                    for (int v = 1; v < kLevels; ++v)
                        for (size_t i = 0; i < y[v].size(); ++i) {
                            const double agree = 2 * ref.rounding[i];
                            if (!(std::fabs(y[0][i] - y[v][i]) <= agree))
                                fail_msg("%s level %d disagrees with scalar: %.9g vs %.9g (allowed %g)", dtype_name(type), v,
                                         y[v][i], y[0][i], agree);
                            if (n_in == 768) worst_rel = std::fmax(worst_rel, std::fabs(y[v][i] - ref.y[i]) / ref.sum_abs[i]);
                        }
                    // AVX-512 and AMX give AVX2's bits exactly (their kernels form the same exact integers and
                    // apply the scales alike, vec_dot.hpp).
                    for (int v = 2; v < kLevels; ++v)
                        if (!y[1].empty() && !y[v].empty() && std::memcmp(y[1].data(), y[v].data(), y[1].size() * sizeof(float)) != 0)
                            fail_msg("%s n_in %lld n_out %lld nt %lld: level %d differs from avx2", dtype_name(type),
                                     (long long)n_in, (long long)n_out, (long long)nt, v);
                }
            }
        print_message("matmul %-5s ok; worst |err| / sum|w x| at n_in 768: %.2e\n", dtype_name(type), worst_rel);
    }
}

// matmul_multi over several weights (mixed types, with and without bias) gives exactly what separate
// matmuls give: the per-output summation order does not depend on how rows are grouped or split, so
// equality is exact. Likewise the thread count (1, 2, 3) does not change any result. Five groups
// cover every quantized type (the K-quants need n_in in whole super-blocks).
static void test_matmul_multi(void **) {
    Scratch scratch;
    uint64_t st = 99;
    struct Group {
        int64_t n_in;
        DType type[4];
        int64_t n_out[4];
    };
    const Group groups[] = {
        {288, {DType::Q8_0, DType::Q8_0, DType::Q4_0, DType::F16}, {288, 97, 130, 7}},
        {512, {DType::Q4_K, DType::Q6_K, DType::Q5_K, DType::Q4_1}, {130, 97, 64, 33}},
        {256, {DType::Q5_0, DType::Q5_1, DType::Q6_K, DType::Q4_K}, {41, 100, 256, 7}},
        {512, {DType::Q2_K, DType::Q3_K, DType::IQ4_XS, DType::Q4_K}, {130, 97, 64, 33}},
        {288, {DType::IQ4_NL, DType::MXFP4, DType::Q8_0, DType::F32}, {41, 100, 288, 7}},
    };
    for (const Group &g : groups) {
    const int64_t n_in = g.n_in;
    const TestWeight w[4] = {make_weight(g.type[0], g.n_out[0], n_in, &st), make_weight(g.type[1], g.n_out[1], n_in, &st),
                             make_weight(g.type[2], g.n_out[2], n_in, &st), make_weight(g.type[3], g.n_out[3], n_in, &st)};
    for (int64_t nt : {1, 5, 17}) {
        const std::vector<float> x = rand_vec(&st, static_cast<size_t>(nt * n_in), -1, 1);
        std::vector<float> bias[4], sep[4], multi[4];
        for (int i = 0; i < 4; ++i) bias[i] = rand_vec(&st, static_cast<size_t>(w[i].n_out), -1, 1);
        for_each_variant([&](int) {
            for (int threads : {1, 2, 3}) {
                auto pool_owner = make_pool(threads);
                ThreadPool &pool = *pool_owner;
                const WeightView views[4] = {w[0].view(), w[1].view(), w[2].view(), w[3].view()};
                const WeightView *wp[4] = {&views[0], &views[1], &views[2], &views[3]};
                float *yp[4];
                const float *bp[4] = {bias[0].data(), nullptr, bias[2].data(), bias[3].data()};
                for (int i = 0; i < 4; ++i) {
                    multi[i].assign(static_cast<size_t>(nt * w[i].n_out), NAN);
                    yp[i] = multi[i].data();
                }
                matmul_multi(pool, scratch, wp, 4, x.data(), nt, yp, bp);
                for (int i = 0; i < 4; ++i) {
                    if (threads == 1) {
                        sep[i].assign(multi[i].size(), NAN);
                        matmul(pool, scratch, views[i], x.data(), nt, sep[i].data(), bp[i]);
                    }
                    if (std::memcmp(sep[i].data(), multi[i].data(), sep[i].size() * sizeof(float)) != 0)
                        fail_msg("%s: matmul_multi weight %d (%s, %d threads, %lld tokens) differs from matmul", isa_name(), i,
                                 dtype_name(w[i].type), threads, (long long)nt);
                }
            }
        });
    }
    }
}

// The prefill GEMMs (matmul_panel_avx2.cpp, matmul_panel_avx512.cpp, matmul_panel_amx.cpp: more tokens
// than one tile pass) walk token slabs of 128 (AMX: 256), k-chunks of their packing buffer (24 to 76
// blocks of 32), panels of 8 or 16 rows and token groups of 4, 8 or 16: these shapes cross every one of
// those edges (n_in of 3, 4 or 9 chunks; row counts not a multiple of 8;
// slabs with a remainder; 5 tokens, just past a tile pass). Each output is held to the reference's
// bound, 1, 2 and 3 threads (row chunks split differently) give the same bits, and so do the levels.
static void test_matmul_panels(void **) {
    Scratch scratch;
    uint64_t st = 123;
    struct Shape {
        DType type;
        int64_t n_in, n_out, nt;
    };
    const Shape shapes[] = {
        {DType::Q4_0, 8192, 19, 133}, {DType::Q4_K, 8192, 13, 131}, {DType::Q6_K, 5632, 21, 130},
        {DType::Q4_0, 2048, 9, 5},    {DType::Q4_K, 4096, 27, 6},   {DType::Q6_K, 256, 3, 5},
        // The formats that reach Q6_K's panel through their own packing (AVX-512 level): chunk edges
        // (a block count that is no multiple of a chunk, IQ4_NL/MXFP4's odd block counts), partial panels.
        {DType::Q3_K, 8192, 19, 133}, {DType::IQ4_XS, 5632, 21, 130}, {DType::IQ4_NL, 8224, 13, 131},
        {DType::MXFP4, 2080, 9, 5},   {DType::Q3_K, 256, 3, 5},      {DType::IQ4_NL, 96, 17, 6},
        {DType::Q2_K, 8192, 19, 133}, {DType::Q2_K, 512, 17, 5},
        // The AMX level's 256-token slabs, 16-token groups (a padded last one) and 16-row panels.
        {DType::Q4_0, 2048, 35, 300}, {DType::Q4_K, 1024, 19, 270}, {DType::Q6_K, 512, 17, 261},
        // Q8_0's panels at every level: k-chunks (76 blocks of 32 at AVX2, 38 at AVX-512, 36 at AMX) with a
        // remainder, an odd block count, partial 8- and 16-row panels, full and padded AMX token groups.
        {DType::Q8_0, 8192, 19, 133}, {DType::Q8_0, 2080, 9, 5}, {DType::Q8_0, 1056, 35, 300},
        {DType::Q8_0, 96, 17, 16},
        // Float weights on two rows per AVX-512 register: 8-token tiles with a remainder, 4-row tiles with
        // 2 or 1 rows left, an input count with a tail past the last 8.
        {DType::F16, 1003, 13, 21}, {DType::BF16, 264, 7, 9}, {DType::F32, 520, 6, 8}, {DType::F16, 64, 5, 131},
    };
    for (const Shape &sh : shapes) {
        const TestWeight w = make_weight(sh.type, sh.n_out, sh.n_in, &st);
        std::vector<float> x = rand_vec(&st, static_cast<size_t>(sh.nt * sh.n_in), -1, 1);
        for (int64_t t = 0; t < sh.nt; ++t)
            for (int64_t i = 0; i < sh.n_in; ++i) x[t * sh.n_in + i] *= (t % 3 ? 1.0f : 20.0f) * (i / 32 % 5 ? 1.0f : 0.02f);
        const std::vector<float> bias = rand_vec(&st, static_cast<size_t>(sh.n_out), -2, 2);
        const Reference ref = reference(w, x, sh.nt, bias.data());
        std::vector<float> by_level[kLevels];
        for_each_variant([&](int v) {
            std::vector<float> &first = by_level[v];
            for (int threads : {1, 2, 3}) {
                auto pool_owner = make_pool(threads);
                std::vector<float> y(static_cast<size_t>(sh.nt * sh.n_out), NAN);
                matmul(*pool_owner, scratch, w.view(), x.data(), sh.nt, y.data(), bias.data());
                for (size_t i = 0; i < y.size(); ++i)
                    if (!(std::fabs(y[i] - ref.y[i]) <= ref.bound[i]))
                        fail_msg("%s %s n_in %lld n_out %lld nt %lld out %zu: %.9g vs %.9g, bound %g", isa_name(),
                                 dtype_name(sh.type), (long long)sh.n_in, (long long)sh.n_out, (long long)sh.nt, i, y[i],
                                 ref.y[i], ref.bound[i]);
                if (threads == 1) first = y;
                else if (std::memcmp(first.data(), y.data(), y.size() * sizeof(float)) != 0)
                    fail_msg("%s %s: %d threads differ from 1", isa_name(), dtype_name(sh.type), threads);
            }
        });
        // The SIMD levels' panels (8 rows, 16 rows with VPDPBUSD, 16 rows with tiles) give the same bits.
        for (int v = 2; v < kLevels; ++v)
            if (!by_level[1].empty() && !by_level[v].empty() &&
                std::memcmp(by_level[1].data(), by_level[v].data(), by_level[1].size() * sizeof(float)) != 0)
                fail_msg("%s n_in %lld nt %lld: level %d differs from avx2", dtype_name(sh.type), (long long)sh.n_in,
                         (long long)sh.nt, v);
    }
}

// A token's result does not depend on how many tokens its matmul had: 19 tokens at once (the panel GEMM
// for Q4_0/Q4_K/Q6_K; at the AMX level a full 16-token tile and a padded one), in groups of 17 (AMX, then
// the AVX-512 panel for the 2 left), 9 (panels), 3 and 4 (row tiles of several tokens) and one at a time
// (decode) give the same bits, for every weight type and every level. Batched decoding, speculative
// verification and saved states rely on it (batched == alone, bit-identical to recomputation).
static void test_matmul_batch_invariant(void **) {
    auto pool_owner = make_pool(2);
    ThreadPool &pool = *pool_owner;
    Scratch scratch;
    uint64_t st = 77;
    const int64_t n_in = 512, n_out = 13, nt = 19;
    for (DType type : kAllTypes) {
        const TestWeight w = make_weight(type, n_out, n_in, &st);
        const std::vector<float> x = rand_vec(&st, static_cast<size_t>(nt * n_in), -1, 1);
        const std::vector<float> bias = rand_vec(&st, static_cast<size_t>(n_out), -1, 1);
        for_each_variant([&](int) {
            std::vector<float> all(static_cast<size_t>(nt * n_out), NAN);
            matmul(pool, scratch, w.view(), x.data(), nt, all.data(), bias.data());
            for (int64_t group : {1, 3, 4, 9, 17}) {
                std::vector<float> part(all.size(), NAN);
                for (int64_t t = 0; t < nt; t += group) {
                    const int64_t g = nt - t < group ? nt - t : group;
                    matmul(pool, scratch, w.view(), x.data() + t * n_in, g, part.data() + t * n_out, bias.data());
                }
                if (std::memcmp(all.data(), part.data(), all.size() * sizeof(float)) != 0)
                    fail_msg("%s %s: %lld tokens at once differ from groups of %lld", isa_name(), dtype_name(type),
                             (long long)nt, (long long)group);
            }
        });
    }
}

// Q4_K, Q6_K, Q4_0 and Q8_0 interleaved 16 rows at a time (cpu/rows16.hpp), as the loader leaves them for
// the AVX-512 tiles: at every level, for every token count (the tiles' 1..4, the panels beyond), thread count
// (row ranges that split a group: rows copied back) and a fused product of two such weights, the bits
// of the file's layout. Rows: 3 groups and 5 left in the file's layout. Two weights of each type: the
// quantizer's, and random bytes (every scale, min and code pattern) with finite fp16 scales of both signs.
static void test_matmul_rows16(void **) {
    auto rand_bits = [](uint64_t *st) { return static_cast<uint32_t>(test_randf(st, 0, 65536)); };  // 16 random bits
    auto rand_half = [&](uint64_t *st) {  // |h| in [2^-11, 2^-3): products stay far from overflow
        return static_cast<uint16_t>((0x1000 + rand_bits(st) % 0x2000) | (rand_bits(st) & 0x8000));
    };
    Scratch scratch;
    uint64_t st = 1616;
    // Token counts on both sides of rows16.cpp's thresholds: the tiles below 16 tokens, the panels packed from the
    // records from 16 on (and nt over 64).
    const int64_t n_out = 3 * kRows16 + 5, nt = 67;
    for (DType type : {DType::Q4_K, DType::Q6_K, DType::Q4_0, DType::Q8_0}) {
        // Q4_0, Q8_0: an odd number of blocks of 32.
        const int64_t n_in = type == DType::Q4_K || type == DType::Q6_K ? 768 : 800;
        const size_t rb = dtype_row_bytes(type, static_cast<uint64_t>(n_in));
        const size_t block = dtype_info(type).block_bytes;
        TestWeight q = make_weight(type, n_out, n_in, &st);
        TestWeight r = q;
        for (size_t i = 0; i < r.data.size(); ++i) r.data[i] = static_cast<uint8_t>(rand_bits(&st));
        for (int64_t row = 0; row < n_out; ++row)
            for (size_t b = 0; b < rb / block; ++b) {
                uint8_t *blk = r.data.data() + static_cast<size_t>(row) * rb + b * block;
                if (type == DType::Q4_K) {
                    reinterpret_cast<BlockQ4_K *>(blk)->d = rand_half(&st);
                    reinterpret_cast<BlockQ4_K *>(blk)->dmin = rand_half(&st);
                } else if (type == DType::Q6_K) {
                    reinterpret_cast<BlockQ6_K *>(blk)->d = rand_half(&st);
                } else if (type == DType::Q4_0) {
                    reinterpret_cast<BlockQ4_0 *>(blk)->d = rand_half(&st);
                } else {
                    reinterpret_cast<BlockQ8_0 *>(blk)->d = rand_half(&st);
                }
            }
        const std::vector<float> x = rand_vec(&st, static_cast<size_t>(nt * n_in), -1, 1);
        const std::vector<float> bias = rand_vec(&st, static_cast<size_t>(n_out), -1, 1);
        for (TestWeight *w : {&q, &r}) {
            std::vector<uint8_t> packed = w->data;
            rows16_pack(type, packed.data(), n_out, rb);
            std::vector<uint8_t> back(w->data.size());
            const size_t grouped = static_cast<size_t>(n_out / kRows16 * kRows16) * rb;
            rows16_unpack(type, packed.data(), rb, 0, n_out / kRows16, back.data());
            std::memcpy(back.data() + grouped, packed.data() + grouped, back.size() - grouped);
            if (back != w->data) fail_msg("%s rows16: unpack(pack(w)) != w", dtype_name(type));
            if (std::memcmp(packed.data(), w->data.data(), grouped) == 0) fail_msg("%s rows16: pack changed nothing", dtype_name(type));
            WeightView plain = w->view(), inter = plain;
            inter.data = packed.data();
            inter.rows16 = true;
            for_each_variant([&](int) {
                for (int threads : {1, 2, 3}) {
                    auto pool = make_pool(threads);
                    for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{9}, int64_t{19}, nt}) {
                        std::vector<float> want(static_cast<size_t>(n * n_out), NAN), got(want.size(), NAN);
                        matmul(*pool, scratch, plain, x.data(), n, want.data(), bias.data());
                        matmul(*pool, scratch, inter, x.data(), n, got.data(), bias.data());
                        if (std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) != 0)
                            fail_msg("%s rows16 %s: %lld tokens, %d threads differ from the file's layout", dtype_name(type),
                                     isa_name(), (long long)n, threads);
                        // Fused with a second interleaved weight (one index space of 2 n_out rows).
                        std::vector<float> got2(want.size() * 2, NAN);
                        const WeightView *ws[2] = {&inter, &inter};
                        float *ys[2] = {got2.data(), got2.data() + want.size()};
                        const float *bs[2] = {bias.data(), nullptr};
                        matmul_multi(*pool, scratch, ws, 2, x.data(), n, ys, bs);
                        if (std::memcmp(want.data(), got2.data(), want.size() * sizeof(float)) != 0)
                            fail_msg("%s rows16 %s: fused, %lld tokens, %d threads differ", dtype_name(type), isa_name(),
                                     (long long)n, threads);
                    }
                }
            });
        }
    }
}

// A product of interleaved rows at a level without the tiles copies its groups back to the file's layout;
// when that memory is not there (rows16_fail_copies_for_testing), the product fails with
// EMBER_ERR_OUT_OF_MEMORY on the calling thread, whichever thread's copy failed (it used to abort the
// process). Levels with the tiles copy nothing here (whole groups, the last rows in place) and succeed.
static void test_matmul_rows16_no_memory(void **) {
    Scratch scratch;
    uint64_t st = 1717;
    const int64_t n_in = 512, n_out = 4 * kRows16 + 3;
    for (DType type : {DType::Q4_K, DType::Q6_K, DType::Q4_0, DType::Q8_0}) {
        const size_t rb = dtype_row_bytes(type, static_cast<uint64_t>(n_in));
        TestWeight w = make_weight(type, n_out, n_in, &st);
        std::vector<uint8_t> packed = w.data;
        rows16_pack(type, packed.data(), n_out, rb);
        WeightView inter = w.view();
        inter.data = packed.data();
        inter.rows16 = true;
        const std::vector<float> x = rand_vec(&st, static_cast<size_t>(19 * n_in), -1, 1);
        int n_refused = 0;
        for_each_variant([&](int) {
            for (int threads : {1, 2}) {
                auto pool = make_pool(threads);
                for (int64_t n : {int64_t{1}, int64_t{19}}) {
                    std::vector<float> y(static_cast<size_t>(n * n_out));
                    rows16_fail_copies_for_testing(true);
                    ember_status st_got = EMBER_OK;
                    try {
                        matmul(*pool, scratch, inter, x.data(), n, y.data(), nullptr);
                    } catch (const Error &e) {
                        st_got = e.status();
                    }
                    rows16_fail_copies_for_testing(false);
                    if (rows16_native(type)) {
                        assert_int_equal(st_got, EMBER_OK);
                    } else {
                        assert_int_equal(st_got, EMBER_ERR_OUT_OF_MEMORY);
                        ++n_refused;
                    }
                    matmul(*pool, scratch, inter, x.data(), n, y.data(), nullptr);   // and it works again
                }
            }
        });
        assert_true(n_refused > 0);   // the scalar level, at least, copies
    }
}

// Q8_0 at its integer limits: blocks of -128 and 127 (and random codes) against activations of +-1, which
// quantize to +-127, so the row tiles' sign trick meets |w| = 128 with its largest maddubs pairs (2 * 128 *
// 127 = 32512, just under the 16-bit limit) and the panels' offsets (w + 128 at AVX-512) their largest
// sums. Every block's integer is exact, so each output must lie within float rounding of the double
// sum (an integer wrong by one would be off by d_x = 1/127), and the tokens at once (the panels, AMX's
// padded group) must give the bits of one token at a time (the row tiles) and of the other levels.
static void test_matmul_q8_0_extremes(void **) {
    auto pool_owner = make_pool(2);
    ThreadPool &pool = *pool_owner;
    Scratch scratch;
    uint64_t st = 31;
    const int64_t n_in = 1024, nb = n_in / 32, n_out = 35, nt = 37;
    std::vector<BlockQ8_0> blocks(static_cast<size_t>(n_out * nb));
    for (int64_t r = 0; r < n_out; ++r)
        for (int64_t b = 0; b < nb; ++b) {
            BlockQ8_0 &blk = blocks[static_cast<size_t>(r * nb + b)];
            blk.d = fp32_to_fp16(r % 2 ? 0.5f : 1.0f);
            for (int j = 0; j < 32; ++j) {
                const int kind = static_cast<int>((r + b) % 4);
                const int v = kind == 0 ? -128 : kind == 1 ? 127 : kind == 2 ? (j % 2 ? 127 : -128)
                                                                              : static_cast<int>(test_randf(&st, -128, 128));
                blk.qs[j] = static_cast<int8_t>(v < -128 ? -128 : v > 127 ? 127 : v);
            }
        }
    WeightView w;
    w.type = DType::Q8_0;
    w.n_in = n_in;
    w.n_out = n_out;
    w.data = blocks.data();
    w.row_bytes = sizeof(BlockQ8_0) * static_cast<size_t>(nb);
    std::vector<float> x(static_cast<size_t>(nt * n_in));
    for (int64_t t = 0; t < nt; ++t)
        for (int64_t i = 0; i < n_in; ++i) {
            const int64_t kind = (t + i / 32) % 3;  // all +1, all -1, or mixed signs per block
            x[t * n_in + i] = kind == 0 ? 1.0f : kind == 1 ? -1.0f : (test_randf(&st, 0, 1) < 0.5f ? -1.0f : 1.0f);
        }
    std::vector<float> by_level[kLevels];
    for_each_variant([&](int v) {
        std::vector<float> &all = by_level[v];
        all.assign(static_cast<size_t>(nt * n_out), NAN);
        matmul(pool, scratch, w, x.data(), nt, all.data(), nullptr);
        std::vector<float> one(all.size(), NAN);
        for (int64_t t = 0; t < nt; ++t) matmul(pool, scratch, w, x.data() + t * n_in, 1, one.data() + t * n_out, nullptr);
        if (std::memcmp(all.data(), one.data(), all.size() * sizeof(float)) != 0)
            fail_msg("%s Q8_0 extremes: %lld tokens at once differ from one at a time", isa_name(), (long long)nt);
        for (int64_t t = 0; t < nt; ++t)
            for (int64_t r = 0; r < n_out; ++r) {
                double s = 0, mag = 0;
                for (int64_t b = 0; b < nb; ++b) {
                    const BlockQ8_0 &blk = blocks[static_cast<size_t>(r * nb + b)];
                    int64_t dot = 0;
                    for (int j = 0; j < 32; ++j) dot += int64_t{blk.qs[j]} * (x[t * n_in + b * 32 + j] > 0 ? 127 : -127);
                    const double term = half_value(blk.d) / 127.0 * static_cast<double>(dot);
                    s += term;
                    mag += std::fabs(term);
                }
                const double got = all[static_cast<size_t>(t * n_out + r)], bound = (nb + 8) * kU * mag * 1.01;
                if (!(std::fabs(got - s) <= bound))
                    fail_msg("%s Q8_0 extremes token %lld row %lld: %.9g vs %.9g (bound %g)", isa_name(), (long long)t,
                             (long long)r, got, s, bound);
            }
    });
    for (int v = 2; v < kLevels; ++v)
        if (!by_level[1].empty() && !by_level[v].empty() &&
            std::memcmp(by_level[1].data(), by_level[v].data(), by_level[1].size() * sizeof(float)) != 0)
            fail_msg("Q8_0 extremes: level %d differs from avx2", v);
}

// ---- elementwise -----------------------------------------------------------------------------------------

// rms_norm: |err| <= 1e-5 |ref| (it needs a few float roundings, ~1e-7; the sum of squares is in double).
// Also in place.
static void test_rms_norm(void **) {
    uint64_t st = 5;
    for (int64_t dim : {8, 13, 288, 4096, 4099}) {  // 13, 4099: the sum of squares' tail after its 8 lanes
        const int64_t rows = 3;
        std::vector<float> x = rand_vec(&st, static_cast<size_t>(rows * dim), -3, 3);
        const std::vector<float> w = rand_vec(&st, static_cast<size_t>(dim), -2, 2);
        std::vector<float> out(x.size());
        rms_norm(x.data(), w.data(), out.data(), rows, dim, 1e-5f);
        for (int64_t r = 0; r < rows; ++r) {
            double ss = 0;
            for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
            const double sc = 1.0 / std::sqrt(ss / dim + 1e-5);
            for (int64_t i = 0; i < dim; ++i) {
                const double ref = x[r * dim + i] * sc * w[i];
                assert_true(std::fabs(out[r * dim + i] - ref) <= 1e-5 * std::fabs(ref));
            }
        }
        rms_norm(x.data(), w.data(), x.data(), rows, dim, 1e-5f);
        assert_memory_equal(x.data(), out.data(), x.size() * sizeof(float));
    }
}

// swiglu: |err| <= 1e-5 |ref| for |g| <= 30 (e^x is accurate to ~2e-7 relative, the rest is a few float
// roundings); for very negative g the result only has to be ~0 (|out| <= 1e-30: the true value is
// below 1e-35 and the AVX2 exp clamps its argument at 88.3). n = 1003 exercises the vector tail; the
// second call aliases out with gate. The AVX-512 kernel runs the AVX2 one's operations on 16 lanes: the
// levels above AVX2 must give its bits.
static void test_swiglu(void **) {
    uint64_t st = 6;
    const int64_t n = 1003;
    std::vector<float> g = rand_vec(&st, n, -30, 30);
    const std::vector<float> u = rand_vec(&st, n, -2, 2);
    g[0] = -100;
    g[1] = 100;
    g[2] = -88.5f;
    g[3] = 0;
    std::vector<float> by_level[kLevels];
    for_each_variant([&](int v) {
        std::vector<float> out(n);
        swiglu(g.data(), u.data(), out.data(), n);
        by_level[v] = out;
        for (int64_t i = 0; i < n; ++i) {
            const double ref = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
            if (g[i] < -80) {
                assert_true(std::fabs(out[i]) <= 1e-30);
            } else if (!(std::fabs(out[i] - ref) <= 1e-5 * std::fabs(ref))) {
                fail_msg("%s swiglu(%g, %g) = %.9g, want %.9g", isa_name(), g[i], u[i], out[i], ref);
            }
        }
        std::vector<float> g2 = g;
        swiglu(g2.data(), u.data(), g2.data(), n);
        assert_memory_equal(g2.data(), out.data(), n * sizeof(float));
    });
    for (int v = 2; v < kLevels; ++v)
        if (!by_level[1].empty() && !by_level[v].empty() && std::memcmp(by_level[1].data(), by_level[v].data(), n * sizeof(float)) != 0)
            fail_msg("swiglu: level %d differs from avx2", v);
}

// add_inplace: each element is one float addition, exactly what the reference float sum gives.
static void test_add(void **) {
    uint64_t st = 8;
    std::vector<float> x = rand_vec(&st, 1001, -10, 10);
    const std::vector<float> y = rand_vec(&st, 1001, -10, 10);
    std::vector<float> ref(x.size());
    for (size_t i = 0; i < x.size(); ++i) ref[i] = x[i] + y[i];
    add_inplace(x.data(), y.data(), static_cast<int64_t>(x.size()));
    assert_memory_equal(x.data(), ref.data(), x.size() * sizeof(float));
}

// rope, both pairings, with and without freq_factors and freq_scale, n_rot < head_dim, positions up
// to 5000: each rotated value within 1e-5 * (|x0| + |x1|) of the double reference (cos and sin are taken
// in double and rounded, then two products and a sum: ~3u in theory; relative to |x0| + |x1| because
// the output itself may be near 0 by cancellation). Dims past n_rot are untouched.
static void test_rope(void **) {
    uint64_t st = 9;
    const int n_heads = 3, hd = 64;
    const int64_t nt = 5;
    const int32_t pos[nt] = {0, 1, 17, 1000, 5000};
    std::vector<float> ff(32);
    for (auto &f : ff) f = test_randf(&st, 1, 8);
    struct Case { int n_rot; bool neox; float base, fscale; bool factors; };
    const Case cases[] = {{64, false, 10000, 1, false}, {32, false, 10000, 1, false}, {64, true, 1e6f, 1, false},
                          {48, true, 10000, 0.25f, true}, {32, false, 500000, 1, true}};
    for (const Case &c : cases) {
        RopeParams p;
        p.n_rot = c.n_rot;
        p.neox = c.neox;
        p.theta_base = c.base;
        p.freq_scale = c.fscale;
        p.freq_factors = c.factors ? ff.data() : nullptr;
        const std::vector<float> x0 = rand_vec(&st, static_cast<size_t>(nt * n_heads * hd), -2, 2);
        std::vector<float> x = x0;
        rope(x.data(), nt, n_heads, hd, pos, p);
        const int half = c.n_rot / 2;
        for (int64_t t = 0; t < nt; ++t)
            for (int h = 0; h < n_heads; ++h) {
                const float *a = x0.data() + (t * n_heads + h) * hd;
                const float *b = x.data() + (t * n_heads + h) * hd;
                for (int i = 0; i < half; ++i) {
                    const int i0 = c.neox ? i : 2 * i, i1 = c.neox ? i + half : 2 * i + 1;
                    double ang = pos[t] * static_cast<double>(c.fscale) * std::pow(static_cast<double>(c.base), -2.0 * i / c.n_rot);
                    if (c.factors) ang /= ff[i];
                    const double r0 = a[i0] * std::cos(ang) - a[i1] * std::sin(ang);
                    const double r1 = a[i0] * std::sin(ang) + a[i1] * std::cos(ang);
                    const double bound = 1e-5 * (std::fabs(a[i0]) + std::fabs(a[i1]));
                    if (!(std::fabs(b[i0] - r0) <= bound && std::fabs(b[i1] - r1) <= bound))
                        fail_msg("rope n_rot %d neox %d pos %d pair %d: (%g, %g) vs (%g, %g)", c.n_rot, c.neox, pos[t], i, b[i0],
                                 b[i1], r0, r1);
                }
                for (int i = c.n_rot; i < hd; ++i) assert_true(b[i] == a[i]);
            }
    }
}

// ---- attention --------------------------------------------------------------------------------------

namespace {

// One sequence's cache as written: n_pos rows of n_head_kv * head_dim values, position-major (random
// values in [-1, 1], stored by store_kv_row as the cache type: rounded to f16, or quantized to Q8_0 or
// Q4_0),
// and the block table that places it in a pool.
struct AttnSeq {
    int64_t n_pos = 0;
    DType type = DType::F16;
    size_t row_bytes = 0;
    std::vector<uint8_t> k, v;
    std::vector<int32_t> table;
    // The values as the cache holds them, dequantized (the reference works from these, so the bound
    // below covers the kernel's arithmetic, not the cache type's rounding).
    std::vector<float> kd, vd;
};

AttnSeq make_attn_seq(uint64_t *st, int64_t n_pos, int64_t kv_row, DType type = DType::F16) {
    AttnSeq s;
    s.n_pos = n_pos;
    s.type = type;
    s.row_bytes = dtype_row_bytes(type, static_cast<uint64_t>(kv_row));
    const std::vector<float> kf = rand_vec(st, static_cast<size_t>(n_pos * kv_row), -1, 1);
    const std::vector<float> vf = rand_vec(st, static_cast<size_t>(n_pos * kv_row), -1, 1);
    s.k.resize(static_cast<size_t>(n_pos) * s.row_bytes);
    s.v.resize(s.k.size());
    for (int64_t j = 0; j < n_pos; ++j) {
        store_kv_row(type, kf.data() + j * kv_row, s.k.data() + j * s.row_bytes, kv_row);
        store_kv_row(type, vf.data() + j * kv_row, s.v.data() + j * s.row_bytes, kv_row);
    }
    s.kd.resize(kf.size());
    s.vd.resize(vf.size());
    dequantize_row(type, s.k.data(), s.kd.data(), n_pos * kv_row);
    dequantize_row(type, s.v.data(), s.vd.data(), n_pos * kv_row);
    return s;
}

// The cache types attention reads, and whether a shape suits one (Q8_0, Q4_0: rows of whole blocks,
// heads read eight values at a time).
constexpr DType kKvTypes[] = {DType::F16, DType::Q8_0, DType::Q4_0};
bool kv_shape_ok(DType type, int64_t kv_row, int hd) { return type == DType::F16 || (kv_row % 32 == 0 && hd % 8 == 0); }

// Random 0..n-1 (Fisher-Yates).
std::vector<int32_t> rand_perm(uint64_t *st, int64_t n) {
    std::vector<int32_t> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(i);
    for (int64_t i = n - 1; i > 0; --i) {
        const int64_t j = std::min<int64_t>(i, static_cast<int64_t>(test_randf(st, 0, static_cast<float>(i + 1))));
        std::swap(p[i], p[j]);
    }
    return p;
}

// A pool of K/V blocks for one layer.
struct AttnPool {
    uint32_t bs = 0;
    DType type = DType::F16;
    size_t row_bytes = 0;
    std::vector<uint8_t> k, v;
    PagedKv view() const {
        PagedKv kv;
        kv.k = k.data();
        kv.v = v.data();
        kv.type = type;
        kv.row_bytes = row_bytes;
        kv.block_size = bs;
        return kv;
    }
};

// Gives each sequence ceil(n_pos / bs) blocks, in the order of `blocks` (a permutation of the pool's
// blocks, which number the sequences' total plus `spare`), sets its table (exactly that long, so a
// read past it is an ASan error) and copies its rows in. Rows that belong to no position hold NaN (the
// bytes 00 7e repeated: an f16 NaN, and a NaN scale at the start of every Q8_0 or Q4_0 block), so
// reading one shows in the output.
AttnPool place_seqs(const std::vector<AttnSeq *> &seqs, uint32_t bs, int64_t, const std::vector<int32_t> &blocks) {
    AttnPool pool;
    pool.bs = bs;
    pool.type = seqs.at(0)->type;
    pool.row_bytes = seqs.at(0)->row_bytes;
    pool.k.resize(blocks.size() * bs * pool.row_bytes);
    for (size_t i = 0; i < pool.k.size(); ++i) pool.k[i] = i % 2 ? 0x7e : 0x00;
    pool.v = pool.k;
    size_t next = 0;
    for (AttnSeq *s : seqs) {
        s->table.resize(static_cast<size_t>((s->n_pos + bs - 1) / bs));
        for (int32_t &b : s->table) b = blocks.at(next++);
        for (int64_t j = 0; j < s->n_pos; ++j) {
            const size_t dst = (static_cast<size_t>(s->table[j / bs]) * bs + static_cast<size_t>(j % bs)) * pool.row_bytes;
            std::memcpy(&pool.k[dst], &s->k[j * pool.row_bytes], pool.row_bytes);
            std::memcpy(&pool.v[dst], &s->v[j * pool.row_bytes], pool.row_bytes);
        }
    }
    return pool;
}

int64_t blocks_needed(const std::vector<AttnSeq *> &seqs, uint32_t bs) {
    int64_t n = 0;
    for (const AttnSeq *s : seqs) n += (s->n_pos + bs - 1) / bs;
    return n;
}

// Checks out (n_tokens rows) against full softmax attention in double, computed from each token's
// sequence as written (position-major, not through the pool), so a row read from the wrong place in
// the pool shows up. Bound: 1e-4 absolute. The output is a convex combination of v rows (|v| <= 1), so
// absolute error is the natural measure; float rounding in the scores (~hd * u * |q||k| * scale, ~1e-6)
// and the e^x approximation (~2e-7 relative) move the weights by ~1e-6 relative, far inside 1e-4.
void check_attention(const std::vector<float> &q, const std::vector<int32_t> &qpos, const std::vector<const AttnSeq *> &qseq,
                     const AttnParams &p, const std::vector<float> &out, const char *what) {
    const int64_t kv_row = static_cast<int64_t>(p.n_head_kv) * p.head_dim;
    const int hd = p.head_dim, group = p.n_head / p.n_head_kv;
    std::vector<double> s;
    for (size_t t = 0; t < qpos.size(); ++t) {
        const AttnSeq &sq = *qseq[t];
        s.resize(static_cast<size_t>(qpos[t]) + 1);
        for (int h = 0; h < p.n_head; ++h) {
            const float *qh = q.data() + (t * p.n_head + h) * hd;
            const int64_t kvo = static_cast<int64_t>(h / group) * hd;
            double m = -INFINITY;
            for (int64_t j = 0; j <= qpos[t]; ++j) {
                double d = 0;
                for (int i = 0; i < hd; ++i) d += static_cast<double>(qh[i]) * sq.kd[j * kv_row + kvo + i];
                s[j] = d * p.scale;
                m = std::fmax(m, s[j]);
            }
            double l = 0;
            for (int64_t j = 0; j <= qpos[t]; ++j) l += (s[j] = std::exp(s[j] - m));
            for (int i = 0; i < hd; ++i) {
                double o = 0;
                for (int64_t j = 0; j <= qpos[t]; ++j) o += s[j] * sq.vd[j * kv_row + kvo + i];
                o /= l;
                const double got = out[(t * p.n_head + h) * hd + i];
                if (!(std::fabs(got - o) <= 1e-4))
                    fail_msg("%s attention %s (%s cache) heads %d/%d hd %d: t %zu (pos %d) h %d i %d: %.7g vs %.7g", isa_name(),
                             what, dtype_name(sq.type), p.n_head, p.n_head_kv, hd, t, qpos[t], h, i, got, o);
            }
        }
    }
}

AttnParams attn_params(int n_head, int n_head_kv, int hd, float sharpness) {
    AttnParams p;
    p.n_head = n_head;
    p.n_head_kv = n_head_kv;
    p.head_dim = hd;
    p.scale = sharpness / std::sqrt(static_cast<float>(hd));
    return p;
}

// What the batched attention tests hold one call's output `out` (at ISA `level`) to, bit for bit: at the
// SIMD levels the AVX2 level's output (first_simd keeps it, from the first SIMD level run), and each
// token's rows as that token gets them alone in a call of its own (no batch, no block of tokens).
void check_attention_bits(int level, std::vector<float> &first_simd, const std::vector<float> &out, ThreadPool &pool,
                          const std::vector<float> &q, const std::vector<int32_t> &qpos, const std::vector<const int32_t *> &tables,
                          const PagedKv &kv, const AttnParams &p, const char *what) {
    if (level >= 1 && first_simd.empty()) first_simd = out;
    else if (level >= 1 && std::memcmp(first_simd.data(), out.data(), out.size() * sizeof(float)) != 0)
        fail_msg("attention %s, level %d: not the AVX2 level's bits (%d heads on %d, head_dim %d)", what, level, p.n_head,
                 p.n_head_kv, p.head_dim);
    const int64_t q_row = static_cast<int64_t>(p.n_head) * p.head_dim;
    for (size_t t = 0; t < qpos.size(); ++t) {
        std::vector<float> alone(static_cast<size_t>(q_row), NAN);
        attention(pool, q.data() + t * q_row, &qpos[t], &tables[t], 1, kv, alone.data(), p);
        if (std::memcmp(alone.data(), out.data() + t * q_row, alone.size() * sizeof(float)) != 0)
            fail_msg("attention %s, level %d: token %zu (pos %d) alone differs (%d heads on %d, head_dim %d)", what, level, t, qpos[t],
                     p.n_head, p.n_head_kv, p.head_dim);
    }
}

} // namespace

// One sequence whose blocks are scattered over the pool in random order, for block sizes 1, 7 (not a
// divisor of the 32-position tile), 16 and 32, in decode and causal prefill. The "sharp" mode scales
// the scores by 8 so the softmax is peaked and the running maximum changes between tiles.
static void test_attention(void **) {
    auto pool_owner = make_pool(2);
    ThreadPool &pool = *pool_owner;
    uint64_t st = 11;
    struct Heads { int n_head, n_head_kv; };
    for (DType type : kKvTypes)
    for (uint32_t bs : {1u, 7u, 16u, 32u})
        for (Heads hh : {Heads{6, 6}, Heads{8, 4}})
            for (int hd : {8, 20, 48, 64, 128, 256})  // 20: the non-multiple-of-8 tails; 256: the largest
                for (int mode = 0; mode < 3; ++mode) {  // 0 decode, 1 prefill, 2 decode with sharp scores
                    const int64_t kv_row = static_cast<int64_t>(hh.n_head_kv) * hd;
                    if (!kv_shape_ok(type, kv_row, hd)) continue;
                    const int64_t nt = mode == 1 ? 37 : 1;
                    std::vector<int32_t> qpos(static_cast<size_t>(nt));
                    for (int64_t t = 0; t < nt; ++t) qpos[t] = mode == 1 ? static_cast<int32_t>(5 + t) : 100;
                    AttnSeq seq = make_attn_seq(&st, qpos[nt - 1] + 1, kv_row, type);
                    const AttnPool kv = place_seqs({&seq}, bs, kv_row, rand_perm(&st, blocks_needed({&seq}, bs) + 3));
                    const std::vector<const int32_t *> tables(static_cast<size_t>(nt), seq.table.data());
                    const std::vector<const AttnSeq *> qseq(static_cast<size_t>(nt), &seq);
                    const std::vector<float> q = rand_vec(&st, static_cast<size_t>(nt * hh.n_head * hd), -2, 2);
                    const AttnParams p = attn_params(hh.n_head, hh.n_head_kv, hd, mode == 2 ? 8.0f : 1.0f);
                    char what[64];
                    std::snprintf(what, sizeof what, "block %u mode %d", bs, mode);
                    for_each_variant([&](int) {
                        std::vector<float> out(q.size(), NAN);
                        attention(pool, q.data(), qpos.data(), tables.data(), nt, kv.view(), out.data(), p);
                        check_attention(q, qpos, qseq, p, out, what);
                    });
                }
}

// Tokens of several sequences in one call, as continuous batching makes them: each has its own table
// and length, the tokens come interleaved, and one sequence contributes a causal prefill run. Each
// token's output must also be bit-identical to what it gets alone (batching must not change results)
// and for 1, 2 and 3 threads. The query heads of a KV head are served together where there are
// enough items (attend_heads: 8 per call for 16 heads on 2 KV heads with 1 or 2 threads, 4 with 3, 2
// for 8 on 4, 3 for 12 on 4: a pair and a single) and one by one alone (decode), so this also holds the
// grouped kernel to the bits of the per-head one.
static void test_attention_batch(void **) {
    auto pool1 = make_pool(1), pool2 = make_pool(2), pool3 = make_pool(3);
    ThreadPool *pools[] = {pool1.get(), pool2.get(), pool3.get()};
    uint64_t st = 13;
    struct Heads { int n_head, n_head_kv; };
    for (DType type : kKvTypes)
    for (uint32_t bs : {16u, 7u})
        for (Heads hh : {Heads{8, 4}, Heads{6, 6}, Heads{16, 2}, Heads{12, 4}})
            for (int hd : {8, 48, 64, 128}) {
                const int64_t kv_row = static_cast<int64_t>(hh.n_head_kv) * hd;
                if (!kv_shape_ok(type, kv_row, hd)) continue;
                AttnSeq a = make_attn_seq(&st, 43, kv_row, type), b = make_attn_seq(&st, 101, kv_row, type),
                        c = make_attn_seq(&st, 6, kv_row, type);
                std::vector<AttnSeq *> seqs = {&a, &b, &c};
                const AttnPool kv = place_seqs(seqs, bs, kv_row, rand_perm(&st, blocks_needed(seqs, bs) + 5));
                // a's prefill run 40..42, interleaved with b decoding at 100 and c at 5.
                const std::vector<int32_t> qpos = {40, 100, 41, 5, 42};
                const std::vector<const AttnSeq *> qseq = {&a, &b, &a, &c, &a};
                std::vector<const int32_t *> tables;
                for (const AttnSeq *s : qseq) tables.push_back(s->table.data());
                const int64_t nt = static_cast<int64_t>(qpos.size());
                const int64_t q_row = static_cast<int64_t>(hh.n_head) * hd;
                const std::vector<float> q = rand_vec(&st, static_cast<size_t>(nt * q_row), -2, 2);
                const AttnParams p = attn_params(hh.n_head, hh.n_head_kv, hd, 4.0f);
                char what[64];
                std::snprintf(what, sizeof what, "batch block %u (%s cache)", bs, dtype_name(type));
                std::vector<float> first_simd;  // the AVX2 level's output: the AVX-512 and AMX levels must give its bits
                for_each_variant([&](int level) {
                    std::vector<float> out(q.size(), NAN);
                    attention(*pool2, q.data(), qpos.data(), tables.data(), nt, kv.view(), out.data(), p);
                    check_attention(q, qpos, qseq, p, out, what);
                    for (ThreadPool *tp : pools) {
                        std::vector<float> again(q.size(), NAN);
                        attention(*tp, q.data(), qpos.data(), tables.data(), nt, kv.view(), again.data(), p);
                        assert_memory_equal(again.data(), out.data(), out.size() * sizeof(float));
                    }
                    check_attention_bits(level, first_simd, out, *pool2, q, qpos, tables, kv.view(), p, what);
                });
            }
}

// A long causal prefill run in one call, where attention serves blocks of neighbouring tokens together
// (attend_heads widens each tile once for a block; the tokens' keys end at different places in the
// last tile, some before it), against each token alone (blocks of one) to the bit, at every level, and
// every SIMD level against the AVX2 level's bits. Also under a sliding window (tokens past it start
// their tiles elsewhere, so they must not share a block with the others), with capped scores and sink
// logits, and at TinyLlama's shape (32 heads on 4, head_dim 64).
static void test_attention_blocks(void **) {
    auto pool1 = make_pool(1), pool2 = make_pool(2);
    uint64_t st = 16;
    struct Shape { int n_head, n_head_kv, hd; };
    for (DType type : kKvTypes)
        for (Shape sh : {Shape{32, 4, 64}, Shape{8, 4, 48}, Shape{6, 6, 64}, Shape{12, 4, 128}})
            for (int variant = 0; variant < 3; ++variant) {  // 0 plain, 1 window 40, 2 softcap and sinks
                const int64_t kv_row = static_cast<int64_t>(sh.n_head_kv) * sh.hd;
                if (!kv_shape_ok(type, kv_row, sh.hd)) continue;
                AttnSeq seq = make_attn_seq(&st, 100, kv_row, type);
                const uint32_t bs = variant == 1 ? 7u : 16u;
                const AttnPool kv = place_seqs({&seq}, bs, kv_row, rand_perm(&st, blocks_needed({&seq}, bs) + 2));
                const int64_t nt = 70;  // positions 30 .. 99
                std::vector<int32_t> qpos;
                for (int64_t t = 0; t < nt; ++t) qpos.push_back(static_cast<int32_t>(30 + t));
                const std::vector<const int32_t *> tables(static_cast<size_t>(nt), seq.table.data());
                const int64_t q_row = static_cast<int64_t>(sh.n_head) * sh.hd;
                const std::vector<float> q = rand_vec(&st, static_cast<size_t>(nt * q_row), -2, 2);
                const std::vector<float> sinks = rand_vec(&st, static_cast<size_t>(sh.n_head), -1, 3);
                AttnParams p = attn_params(sh.n_head, sh.n_head_kv, sh.hd, 4.0f);
                if (variant == 1) p.window = 40;
                if (variant == 2) p.softcap = 3.0f, p.sinks = sinks.data();
                char what[64];
                std::snprintf(what, sizeof what, "blocks variant %d (%s cache)", variant, dtype_name(type));
                std::vector<float> first_simd;
                for_each_variant([&](int level) {
                    std::vector<float> out(q.size(), NAN);
                    attention(*pool1, q.data(), qpos.data(), tables.data(), nt, kv.view(), out.data(), p);
                    if (variant == 0)
                        check_attention(q, qpos, std::vector<const AttnSeq *>(static_cast<size_t>(nt), &seq), p, out, what);
                    std::vector<float> again(q.size(), NAN);
                    attention(*pool2, q.data(), qpos.data(), tables.data(), nt, kv.view(), again.data(), p);
                    assert_memory_equal(again.data(), out.data(), out.size() * sizeof(float));
                    check_attention_bits(level, first_simd, out, *pool2, q, qpos, tables, kv.view(), p, what);
                });
            }
}

// An uneven batch, one sequence far along (position 1000) beside 15 short ones (position 10), in the
// order that makes the kernel sort its work items (the long one is neither first nor last): against
// the reference, and the same bits on 1 and 3 threads.
static void test_attention_uneven(void **) {
    auto pool1 = make_pool(1), pool3 = make_pool(3);
    uint64_t st = 14;
    const int n_head = 8, n_head_kv = 4, hd = 64;
    const int64_t kv_row = static_cast<int64_t>(n_head_kv) * hd;
    for (DType type : kKvTypes) {
    std::vector<AttnSeq> store;
    store.reserve(16);
    std::vector<AttnSeq *> seqs;
    for (int i = 0; i < 16; ++i) {
        store.push_back(make_attn_seq(&st, i == 3 ? 1001 : 11, kv_row, type));
        seqs.push_back(&store.back());
    }
    const AttnPool kv = place_seqs(seqs, 16, kv_row, rand_perm(&st, blocks_needed(seqs, 16)));
    std::vector<int32_t> qpos;
    std::vector<const AttnSeq *> qseq;
    std::vector<const int32_t *> tables;
    for (AttnSeq *s : seqs) {
        qpos.push_back(static_cast<int32_t>(s->n_pos - 1));
        qseq.push_back(s);
        tables.push_back(s->table.data());
    }
    const int64_t nt = static_cast<int64_t>(qpos.size());
    const std::vector<float> q = rand_vec(&st, static_cast<size_t>(nt * n_head * hd), -2, 2);
    const AttnParams p = attn_params(n_head, n_head_kv, hd, 1.0f);
    for_each_variant([&](int) {
        std::vector<float> out(q.size(), NAN), again(q.size(), NAN);
        attention(*pool3, q.data(), qpos.data(), tables.data(), nt, kv.view(), out.data(), p);
        check_attention(q, qpos, qseq, p, out, "uneven");
        attention(*pool1, q.data(), qpos.data(), tables.data(), nt, kv.view(), again.data(), p);
        assert_memory_equal(again.data(), out.data(), out.size() * sizeof(float));
    });
    }
}

// Where the blocks lie does not matter, to the bit: the same sequence in an identity layout (block i
// at pool block i, i.e. a contiguous cache), in permuted pool blocks with the table permuted to match,
// and with other block sizes. Tiles are cut by position, not by block (see attention.cpp), so even
// the block size leaves every rounding unchanged.
static void test_attention_layout(void **) {
    auto pool_owner = make_pool(2);
    ThreadPool &pool = *pool_owner;
    uint64_t st = 15;
    for (DType type : kKvTypes)
    for (int hd : {48, 20}) {
        const int n_head = 8, n_head_kv = 4;
        const int64_t kv_row = static_cast<int64_t>(n_head_kv) * hd;
        if (!kv_shape_ok(type, kv_row, hd)) continue;
        AttnSeq seq = make_attn_seq(&st, 150, kv_row, type);
        const int64_t nt = 9;  // a prefill run ending at the last position
        std::vector<int32_t> qpos;
        for (int64_t t = 0; t < nt; ++t) qpos.push_back(static_cast<int32_t>(seq.n_pos - nt + t));
        const std::vector<float> q = rand_vec(&st, static_cast<size_t>(nt * n_head * hd), -2, 2);
        const AttnParams p = attn_params(n_head, n_head_kv, hd, 4.0f);
        for_each_variant([&](int) {
            std::vector<float> ref;
            for (uint32_t bs : {16u, 16u, 1u, 7u, 32u, 150u, 256u}) {
                const int64_t nb = blocks_needed({&seq}, bs);
                std::vector<int32_t> blocks(static_cast<size_t>(nb));
                for (int64_t i = 0; i < nb; ++i) blocks[i] = static_cast<int32_t>(i);
                if (!ref.empty()) blocks = rand_perm(&st, nb);  // the first layout is the identity
                const AttnPool kv = place_seqs({&seq}, bs, kv_row, blocks);
                const std::vector<const int32_t *> tables(static_cast<size_t>(nt), seq.table.data());
                std::vector<float> out(q.size(), NAN);
                attention(pool, q.data(), qpos.data(), tables.data(), nt, kv.view(), out.data(), p);
                if (ref.empty()) {
                    check_attention(q, qpos, std::vector<const AttnSeq *>(static_cast<size_t>(nt), &seq), p, out, "identity");
                    ref = out;
                } else if (std::memcmp(out.data(), ref.data(), ref.size() * sizeof(float)) != 0) {
                    fail_msg("%s attention hd %d: block size %u, permuted blocks, differs from the identity layout", isa_name(), hd, bs);
                }
            }
        });
    }
}

// get_rows returns exactly the dequantized rows asked for (ids repeat and come in any order); those are
// checked against the layouts by test_dequantize.
static void test_get_rows(void **) {
    uint64_t st = 12;
    for (DType type : kAllTypes) {
        const TestWeight w = make_weight(type, 10, 256, &st);
        const int32_t ids[] = {3, 0, 9, 3};
        std::vector<float> out(4 * 256, NAN);
        get_rows(w.view(), ids, 4, out.data());
        for (int t = 0; t < 4; ++t)
            assert_memory_equal(out.data() + t * 256, w.deq.data() + ids[t] * 256, 256 * sizeof(float));
    }
}

// ---- thread pool ---------------------------------------------------------------------------------------

// run() calls fn exactly once per thread index with the right nth (also for a named, lvalue callable).
static void test_pool_run(void **) {
    for (int n = 1; n <= 4; ++n) {
        auto pool_owner = make_pool(n);
        ThreadPool &pool = *pool_owner;
        assert_int_equal(pool.size(), n);
        std::atomic<int> hits[4] = {};
        std::atomic<int> bad_nth{0};
        auto fn = [&](int ith, int nth) {
            if (nth != n || ith < 0 || ith >= n) bad_nth.fetch_add(1);
            else hits[ith].fetch_add(1);
        };
        for (int rep = 0; rep < 100; ++rep) pool.run(fn);
        for (int i = 0; i < n; ++i) assert_int_equal(hits[i].load(), 100);
        assert_int_equal(bad_nth.load(), 0);
    }
}

// parallel_for covers [0, n) exactly once, including n smaller than the thread count and n = 0.
static void test_pool_parallel_for(void **) {
    for (int threads = 1; threads <= 4; ++threads) {
        auto pool_owner = make_pool(threads);
        ThreadPool &pool = *pool_owner;
        for (int64_t n : {0, 1, 3, 7, 1000, 12345}) {
            std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
            for (auto &s : seen) s.store(0);
            std::atomic<int> empty{0};  // counted, not asserted: cmocka must not fail on a worker thread
            pool.parallel_for(n, [&](int64_t b, int64_t e) {
                if (b >= e) empty.fetch_add(1);
                for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
            });
            for (int64_t i = 0; i < n; ++i) assert_int_equal(seen[static_cast<size_t>(i)].load(), 1);
            assert_int_equal(empty.load(), 0);
        }
    }
}

// Decode's split (cpu/row_steal.hpp): every row exactly once, ranges aligned but for the matrix's end,
// whatever the width; and a thread that stalls inside its range (a descheduled one, here sleeping on
// its first granule) has the rest of its range taken by the others.
static void test_rows_stealing(void **) {
    for (int threads = 1; threads <= 4; ++threads) {
        auto pool_owner = make_pool(threads);
        for (int64_t n : {1, 4, 7, 100, 2048, 5635}) {
            for (size_t row_bytes : {size_t{64}, size_t{1152}, size_t{100000}}) {
                std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
                for (auto &x : seen) x.store(0);
                // Counted, not asserted inside: cmocka must not fail on a worker thread.
                std::atomic<int> misaligned{0}, stalls{0};
                std::atomic<std::thread::id> staller{};
                std::atomic<int64_t> stolen{0};  // rows of the first half of range 0 run by another thread
                const bool stall = threads > 1 && n == 5635 && row_bytes == 1152 && pool_owner->width() == threads;
                const bool done = detail::run_rows_stealing(*pool_owner, n, row_bytes, 4, [&](int64_t r0, int64_t r1) {
                    if (r0 % 4 != 0 || (r1 % 4 != 0 && r1 != n) || r0 >= r1) misaligned.fetch_add(1);
                    if (stall && r0 == 0 && stalls.fetch_add(1) == 0) {
                        staller.store(std::this_thread::get_id());
                        std::this_thread::sleep_for(std::chrono::milliseconds(20));
                    } else if (stall && r1 <= n / threads / 2 && staller.load() != std::this_thread::get_id()) {
                        stolen.fetch_add(r1 - r0);
                    }
                    for (int64_t i = r0; i < r1; ++i) seen[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
                });
                assert_true(done);
                for (int64_t i = 0; i < n; ++i) assert_int_equal(seen[static_cast<size_t>(i)].load(), 1);
                assert_int_equal(misaligned.load(), 0);
                // Range 0 starts at row 0 and spans about n / threads rows; its owner sleeps in its first
                // granule (16 KiB / 1152 bytes: 12 rows), so the others ran the rest of its first half.
                if (stall) assert_true(stolen.load() >= n / threads / 2 - 12 - 12);
            }
        }
    }
}

// Many back-to-back runs (the spinning hand-off), then runs separated by pauses long enough that the
// workers fall asleep (the condition-variable hand-off): a lost wake-up would hang here. The job's
// plain (non-atomic) writes must be visible to the caller after run() returns.
static void test_pool_stress(void **) {
    for (int threads : {2, 3, 4}) {
        auto pool_owner = make_pool(threads);
        ThreadPool &pool = *pool_owner;
        std::vector<int64_t> slot(static_cast<size_t>(threads), 0);
        const int reps = threads == 2 ? 10000 : 2000;
        for (int rep = 0; rep < reps; ++rep) {
            pool.run([&](int ith, int) { slot[static_cast<size_t>(ith)] += 1; });
            for (int i = 0; i < threads; ++i)
                if (slot[static_cast<size_t>(i)] != rep + 1) fail_msg("%d threads: slot %d = %lld after %d runs", threads, i, (long long)slot[i], rep + 1);
        }
        for (int rep = 0; rep < 20; ++rep) {
            std::this_thread::sleep_for(std::chrono::microseconds(rep % 2 ? 1000 : 150));
            pool.run([&](int ith, int) { slot[static_cast<size_t>(ith)] += 1; });
        }
        for (int i = 0; i < threads; ++i) assert_int_equal(slot[static_cast<size_t>(i)], reps + 20);
    }
}

// Destruction with workers never used, spinning, or asleep.
// GELU (tanh form) and GEGLU at every level: within the parity harness's bound of the double-precision
// formula, and the same bits at every level (8 lanes below AVX-512, 16 there), tails included.
static void test_gelu_levels(void **) {
    uint64_t st = 4242;
    const int64_t n = 1000 + 13;
    const std::vector<float> g = rand_vec(&st, static_cast<size_t>(n), -12, 12), u = rand_vec(&st, static_cast<size_t>(n), -3, 3);
    std::vector<float> first_gelu, first_geglu;
    for_each_variant([&](int) {
        std::vector<float> y(static_cast<size_t>(n)), z(static_cast<size_t>(n));
        gelu(g.data(), y.data(), n);
        geglu(g.data(), u.data(), z.data(), n);
        const double u_round = std::ldexp(1.0, -24);
        for (int64_t i = 0; i < n; ++i) {
            const double gd = g[static_cast<size_t>(i)];
            const double want = 0.5 * gd * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (gd + 0.044715 * gd * gd * gd)));
            const double bound = 32 * u_round * std::fabs(gd) * (2 + std::fabs(gd));
            if (!(std::fabs(y[static_cast<size_t>(i)] - want) <= bound) ||
                !(std::fabs(z[static_cast<size_t>(i)] - want * u[static_cast<size_t>(i)]) <= bound * (1 + std::fabs(u[static_cast<size_t>(i)]))))
                fail_msg("%s gelu(%.9g): %.9g (geglu %.9g) vs %.9g", isa_name(), gd, y[static_cast<size_t>(i)], z[static_cast<size_t>(i)], want);
        }
        if (first_gelu.empty()) first_gelu = y, first_geglu = z;
        else if (y != first_gelu || z != first_geglu) fail_msg("%s gelu: bits differ from the first level's", isa_name());
    });
}

// The gated delta rule at every level against a double-precision reference (the bound of
// parity_hybrid_ops.cpp: (4 S + 16) u per token on values of the state's size), with head sizes that
// fill the lanes (128) and leave a tail (40); the prompt in one run and token by token give the same
// bits at each level, and the AVX2 and AVX-512 levels (16 lanes with FMAs) the same bits as each other.
static void test_gated_delta_levels(void **) {
    for (const int S : {40, 128}) {
        uint64_t st = 91 + uint64_t(S);
        const int H = 2, Hk = 1, T = 6;
        const int row = (2 * Hk + H) * S;
        const std::vector<float> qkv = rand_vec(&st, size_t(T) * row, -1, 1), a = rand_vec(&st, T * H, -3, 2),
                                 b = rand_vec(&st, T * H, -3, 3), dt = rand_vec(&st, H, -1, 1),
                                 decay = rand_vec(&st, H, -2, -0.1f);
        DeltaParams p;
        p.n_head = H, p.n_head_k = Hk, p.head_dim = S, p.dt = dt.data(), p.decay = decay.data();
        p.scale = 1.0f / std::sqrt(float(S));
        // Reference outputs, in double.
        std::vector<double> ref(size_t(T) * H * S), M(size_t(H) * S * S, 0.0);
        double mag = 0;
        std::vector<double> bound(T);
        for (int t = 0; t < T; ++t) {
            const float *xt = qkv.data() + size_t(t) * row;
            for (int h = 0; h < H; ++h) {
                std::vector<double> q(S), k(S);
                double nq = 0, nk = 0;
                for (int i = 0; i < S; ++i) nq += double(xt[i]) * xt[i], nk += double(xt[S + i]) * xt[S + i];
                for (int i = 0; i < S; ++i)
                    q[i] = xt[i] / std::max(std::sqrt(nq), 1e-6) * p.scale, k[i] = xt[S + i] / std::max(std::sqrt(nk), 1e-6);
                const double sp = double(a[t * H + h]) + dt[h];
                const double g = std::exp((sp > 20 ? sp : std::log1p(std::exp(sp))) * decay[h]);
                const double beta = 1.0 / (1.0 + std::exp(-double(b[t * H + h])));
                for (int j = 0; j < S; ++j) {
                    double *m = M.data() + (size_t(h) * S + j) * S, u = 0, o = 0;
                    for (int i = 0; i < S; ++i) m[i] *= g, u += m[i] * k[i];
                    const double d = beta * (xt[(2 * Hk + h) * S + j] - u);
                    for (int i = 0; i < S; ++i) m[i] += k[i] * d, o += m[i] * q[i], mag = std::max(mag, std::fabs(m[i]));
                    ref[(size_t(t) * H + h) * S + j] = o;
                }
            }
            bound[t] = (4.0 * S + 16) * kU * std::max(1.0, mag) * (t + 1);
        }
        std::vector<float> fused;   // the 16-lane FMA levels' outputs, to compare bit for bit
        for_each_variant([&](int level) {
            auto pool = make_pool(2);
            std::vector<float> y(ref.size()), y1(ref.size()), state(size_t(H) * S * S), state1(state.size());
            StateRun whole{0, uint32_t(T), state.data(), nullptr};
            gated_delta(*pool, qkv.data(), a.data(), b.data(), y.data(), p, &whole, 1, 0);
            for (int t = 0; t < T; ++t) {
                StateRun one{0, 1, state1.data(), t ? state1.data() : nullptr};
                gated_delta(*pool, qkv.data() + size_t(t) * row, a.data() + t * H, b.data() + t * H,
                            y1.data() + size_t(t) * H * S, p, &one, 1, 0);
            }
            for (size_t i = 0; i < y.size(); ++i) {
                const double err = std::fabs(y[i] - ref[i]);
                if (!(err <= bound[i / (size_t(H) * S)]))
                    fail_msg("gated_delta S %d level %d [%zu]: %.9g vs %.9g", S, level, i, double(y[i]), ref[i]);
            }
            assert_memory_equal(y.data(), y1.data(), y.size() * sizeof(float));
            assert_memory_equal(state.data(), state1.data(), state.size() * sizeof(float));
            if (level >= 1) {
                if (fused.empty()) fused = y;
                else assert_memory_equal(fused.data(), y.data(), y.size() * sizeof(float));
            }
        });
    }
}

static void test_pool_destroy(void **) {
    make_pool(4).reset();  // never used
    {
        auto pool = make_pool(3);  // workers still spinning after the job
        pool->run([](int, int) {});
    }
    {
        auto pool = make_pool(2);  // workers asleep
        pool->run([](int, int) {});
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    make_pool(1).reset();
}

// run_chunks covers every chunk once, whichever threads take them, and the budget's thread cap holds:
// with max_threads 1 every chunk runs on the calling thread.
static void test_pool_chunks_budget(void **) {
    auto pool_owner = make_pool(3);
    ThreadPool &pool = *pool_owner;
    const std::thread::id me = std::this_thread::get_id();
    for (int cap : {0, 1}) {
        CpuBudget b;
        b.max_threads = cap;
        cpu_budget_set(b);
        for (int rep = 0; rep < 50; ++rep) {
            std::vector<std::atomic<int>> seen(37);
            for (auto &x : seen) x.store(0);
            std::atomic<int> elsewhere{0};
            pool.run_chunks(37, [&](int64_t c) {
                seen[static_cast<size_t>(c)].fetch_add(1);
                if (std::this_thread::get_id() != me) elsewhere.fetch_add(1);
            });
            for (auto &x : seen) assert_int_equal(x.load(), 1);
            if (cap == 1) assert_int_equal(elsewhere.load(), 0);
        }
        if (cap == 1) assert_int_equal(pool.width(), 1);
    }
    cpu_budget_set(CpuBudget{});
}

// The width follows the measured speedup: jobs whose chunks stall for 2 ms on any worker (a worker the
// OS descheduled, as a busy neighbour does) make the workers a loss, and the pool drops to the calling
// thread alone within a few windows; with the budget's fixed thread count it keeps its width. Dropped, it
// tries two threads again before long, even when every job is a decode product.
static void test_pool_adapts(void **) {
    for (bool adaptive : {true, false}) {
        CpuBudget b;
        b.adaptive = adaptive;
        cpu_budget_set(b);
        auto pool_owner = make_pool(2);
        ThreadPool &pool = *pool_owner;
        const std::thread::id me = std::this_thread::get_id();
        std::atomic<int64_t> sink{0};
        for (int job = 0; job < 400 && pool.width() == 2; ++job)
            pool.run_chunks(8, [&](int64_t c) {
                // 20 us of work per chunk, so that the worker is in time to take some.
                const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
                while (std::chrono::steady_clock::now() < end) sink.fetch_add(c, std::memory_order_relaxed);
                if (std::this_thread::get_id() != me) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            });
        assert_int_equal(pool.width(), adaptive ? 1 : 2);
        if (!adaptive) continue;
        // Then decode products alone (row_steal.hpp: one range per thread of width(), so one chunk at
        // width 1): the windows still go on, and within a few of them the pool probes two threads.
        bool probed = false;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        while (!probed && std::chrono::steady_clock::now() < until) {
            detail::run_rows_stealing(pool, 64, 16 * 1024, 4, [&](int64_t r0, int64_t r1) {
                const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(r1 - r0);
                while (std::chrono::steady_clock::now() < end) sink.fetch_add(1, std::memory_order_relaxed);
            });
            probed = pool.width() == 2;
        }
        assert_true(probed);
    }
    cpu_budget_set(CpuBudget{});
}

// Sets the CPUs of every thread of the process (the pool's workers included, whose ids the pool keeps to
// itself); false if one could not be set.
static bool pin_all_threads(const cpu_set_t &set) {
    bool ok = true;
    if (DIR *d = opendir("/proc/self/task")) {
        while (dirent *e = readdir(d))
            if (e->d_name[0] != '.') ok = sched_setaffinity(static_cast<pid_t>(std::atoi(e->d_name)), sizeof set, &set) == 0 && ok;
        closedir(d);
        return ok;
    }
    return false;
}

// A worker that shares the caller's CPU (all the process's threads on one CPU, as a busy process on a
// 2-core machine can leave the caller and its worker halving one core): the caller waits for its CPU
// about half the time, its own worker's doing, and the pool drops to the caller alone within a few
// windows that end early (threadpool.cpp, kStallNs), in milliseconds, not after seconds (the controller
// without them took 0.6-1.1 s beside a busy thread). Linux with schedstat and 2 CPUs or more (so that the
// pool spins as it does on a machine it fits); elsewhere skipped.
static void test_pool_yields_a_shared_cpu(void **) {
#if defined(__linux__)
    cpu_set_t all;
    std::FILE *schedstat = std::fopen("/proc/thread-self/schedstat", "r");
    if (schedstat) std::fclose(schedstat);
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2 || !schedstat) {
        print_message("skip: needs 2 CPUs and /proc/thread-self/schedstat\n");
        return;
    }
    auto pool_owner = make_pool(2);
    ThreadPool &pool = *pool_owner;
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    const bool pinned = pin_all_threads(one);
    std::atomic<int64_t> sink{0};
    const auto t0 = std::chrono::steady_clock::now();
    while (pinned && pool.width() == 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2))
        pool.run_chunks(8, [&](int64_t c) {
            const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
            while (std::chrono::steady_clock::now() < end) sink.fetch_add(c, std::memory_order_relaxed);
        });
    const double drop_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const int width = pool.width();
    assert_true(pin_all_threads(all));
    assert_true(pinned);
    print_message("pool with its worker on the caller's CPU: width 1 after %.1f ms\n", drop_ms);
    assert_int_equal(width, 1);
    // Two windows that end early take ~5-10 ms; the bound leaves room for a loaded machine.
    assert_true(drop_ms < 500);
#endif
}

// ---- timings (EMBER_KERNEL_BENCH=1) ----------------------------------------------------------------------

// The best of 5 timings of one matmul of nt tokens (each long enough to be timed: ~2e8 weight bytes x
// tokens, at least 10 calls).
static void bench_one(ThreadPool &pool, Scratch &scratch, const WeightView &v, size_t bytes, int64_t nt) {
    uint64_t st = 3;
    const std::vector<float> x = rand_vec(&st, static_cast<size_t>(nt * v.n_in), -1, 1);
    std::vector<float> y(static_cast<size_t>(nt * v.n_out));
    for (int i = 0; i < 20; ++i) matmul(pool, scratch, v, x.data(), nt, y.data(), nullptr);
    double best = 1e30;
    for (int trial = 0; trial < 5; ++trial) {
        const int iters = static_cast<int>(2e8 / static_cast<double>(bytes * static_cast<size_t>(nt)) + 10);
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) matmul(pool, scratch, v, x.data(), nt, y.data(), nullptr);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
        best = std::fmin(best, us);
    }
    // Decode is a stream over the weights (GB/s); prefill reuses them (multiply-adds per second).
    const double rate = nt == 1 ? static_cast<double>(bytes) / (best * 1e3)
                                : static_cast<double>(v.n_in * v.n_out * nt) / (best * 1e3);
    print_message("bench %-6s %-4s %4lld -> %5lld, %3lld tok, %d thr: %9.2f us/call, %6.1f %s\n", isa_name(),
                  dtype_name(v.type), (long long)v.n_in, (long long)v.n_out, (long long)nt, pool.size(), best, rate,
                  nt == 1 ? "GB/s of weights" : "GMAC/s");
}
static void bench_one(ThreadPool &pool, Scratch &scratch, const TestWeight &w, int64_t nt) {
    bench_one(pool, scratch, w.view(), w.data.size(), nt);
}

// EMBER_KERNEL_BENCH=gemm[:THREADS[:TOKENS]] (default 1 thread, 256 tokens): a TinyLlama prefill's
// products alone, Q4_0, Q4_K and Q6_K at its three shapes (attention 2048 -> 2048, gate/up 2048 -> 5632,
// down 5632 -> 2048), at the level in use only (EMBER_CPU_ISA picks another); Q4_K and Q6_K interleaved
// 16 rows at a time where the level takes them so, as the model loader leaves them (rows16.hpp). The
// prefill GEMM's speed without the rest of the model (docs/benchmarks.md, "Method": kernels alone).
static void bench_gemm(const char *env) {
    const char *a = std::strchr(env, ':');
    const int threads = a ? std::atoi(a + 1) : 1;
    const char *b = a ? std::strchr(a + 1, ':') : nullptr;
    const int64_t nt = b ? std::atoll(b + 1) : 256;
    const struct { int64_t n_in, n_out; } shapes[] = {{2048, 2048}, {2048, 5632}, {5632, 2048}};
    auto pool = make_pool(threads > 0 ? threads : 1);
    Scratch scratch;
    uint64_t st = 4;
    for (DType type : {DType::Q4_0, DType::Q4_K, DType::Q6_K})
        for (const auto &sh : shapes) {
            TestWeight w = make_weight(type, sh.n_out, sh.n_in, &st);
            WeightView v = w.view();
            if (rows16_native(type)) {
                rows16_pack(type, w.data.data(), v.n_out, v.row_bytes);
                v.rows16 = true;
            }
            bench_one(*pool, scratch, v, w.data.size(), nt);
        }
}

// EMBER_KERNEL_BENCH=attention: one layer's attention at TinyLlama's shape (32 query heads on 4 KV heads,
// head_dim 64) over a 512-token sequence whose 16-row blocks lie scattered in the pool, 2 threads, at
// each SIMD level: a prefill of 512 tokens in passes of 256 queries as the runtime cuts it (f16, Q8_0
// and Q4_0 caches), and 512 decode steps (passes of one query). Best and median of 7 layers (on a
// Sapphire Rapids VM, 2026-11-26: 4.7 ms per layer at `amx`, 8.3 at `avx2`, for the prefill of 512).
static void bench_attention() {
    uint64_t st = 3;
    auto pool = make_pool(2);
    const int n_head = 32, n_head_kv = 4, hd = 64;
    const int64_t kv_row = static_cast<int64_t>(n_head_kv) * hd, q_row = static_cast<int64_t>(n_head) * hd, n_prompt = 512;
    for (DType type : kKvTypes) {
        AttnSeq seq = make_attn_seq(&st, n_prompt, kv_row, type);
        const AttnPool kv = place_seqs({&seq}, 16, kv_row, rand_perm(&st, blocks_needed({&seq}, 16)));
        std::vector<int32_t> pos(static_cast<size_t>(n_prompt));
        for (int64_t t = 0; t < n_prompt; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
        const std::vector<const int32_t *> tables(static_cast<size_t>(n_prompt), seq.table.data());
        const std::vector<float> q = rand_vec(&st, static_cast<size_t>(n_prompt * q_row), -2, 2);
        const AttnParams p = attn_params(n_head, n_head_kv, hd, 1.0f);
        std::vector<float> out(q.size());
        for_each_variant([&](int v) {
            if (v < 1) return;
            for (int64_t n_batch : {int64_t{256}, int64_t{1}}) {
                if (n_batch == 1 && type != DType::F16) continue;
                auto layer = [&] {
                    for (int64_t t0 = 0; t0 < n_prompt; t0 += n_batch)
                        attention(*pool, q.data() + t0 * q_row, pos.data() + t0, tables.data() + t0, std::min(n_batch, n_prompt - t0),
                                  kv.view(), out.data() + t0 * q_row, p);
                };
                layer();  // warm-up: pages, caches, the pool's threads
                std::vector<double> ms;
                for (int r = 0; r < 7; ++r) {
                    const auto t0 = std::chrono::steady_clock::now();
                    layer();
                    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
                }
                std::sort(ms.begin(), ms.end());
                print_message("bench %-6s attention %s cache, P %lld in passes of %lld, 32 heads on 4, head_dim 64, 2 thr: best %.3f ms, "
                              "median %.3f ms per layer\n", isa_name(), dtype_name(type), static_cast<long long>(n_prompt),
                              static_cast<long long>(n_batch), ms.front(), ms[ms.size() / 2]);
            }
        });
    }
}

static void test_bench(void **) {
    const char *env = std::getenv("EMBER_KERNEL_BENCH");
    if (!env || !*env || *env == '0') return;
    if (std::strstr(env, "attention")) {
        bench_attention();
        return;
    }
    if (std::strncmp(env, "gemm", 4) == 0) {
        bench_gemm(env);
        return;
    }
    // The quantized formats at a TinyLlama shape (2048 -> 2048): decode (1 token) and prefill (64).
    if (std::strstr(env, "formats")) {
        uint64_t st = 2;
        Scratch scratch;
        const char *only = std::strchr(env, ':');  // formats:Q4_K,Q6_K runs those alone
        for (DType type : kQuantTypes) {
            if (only && !std::strstr(only, dtype_name(type))) continue;
            const TestWeight w = make_weight(type, 2048, 2048, &st);
            for_each_variant([&](int v) {
                for (int threads : {1, 2}) {
                    auto pool_owner = make_pool(threads);
                    if (v >= 1 || threads == 1) bench_one(*pool_owner, scratch, w, 1);
                    if (v >= 1) bench_one(*pool_owner, scratch, w, 64);
                }
            });
        }
        return;
    }
    uint64_t st = 1;
    const TestWeight big = make_weight(DType::Q8_0, 32000, 288, &st);
    const TestWeight ffn = make_weight(DType::Q8_0, 768, 288, &st);
    const TestWeight ffn4 = make_weight(DType::Q4_0, 768, 288, &st);
    const TestWeight ffn16 = make_weight(DType::F16, 768, 288, &st);
    Scratch scratch;
    for_each_variant([&](int v) {
        for (int threads : {1, 2}) {
            auto pool_owner = make_pool(threads);
            ThreadPool &pool = *pool_owner;
            if (v >= 1 || threads == 1) bench_one(pool, scratch, big, 1);
            bench_one(pool, scratch, ffn, 1);
            if (v >= 1) {
                bench_one(pool, scratch, ffn4, 1);
                bench_one(pool, scratch, ffn16, 1);
                bench_one(pool, scratch, ffn, 64);
            }
        }
    });
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp16_exhaustive),
        cmocka_unit_test(test_fp16_rounding),
        cmocka_unit_test(test_fp16_directed),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_quant_q8_0),
        cmocka_unit_test(test_quant_q4_0),
        cmocka_unit_test(test_quantize_acts),
        cmocka_unit_test(test_quantize_acts_k),
        cmocka_unit_test(test_block_layouts),
        cmocka_unit_test(test_quant_formats),
        cmocka_unit_test(test_dequantize),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_multi),
        cmocka_unit_test(test_matmul_panels),
        cmocka_unit_test(test_matmul_batch_invariant),
        cmocka_unit_test(test_matmul_q8_0_extremes),
        cmocka_unit_test(test_matmul_rows16),
        cmocka_unit_test(test_matmul_rows16_no_memory),
        cmocka_unit_test(test_rms_norm),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_batch),
        cmocka_unit_test(test_attention_blocks),
        cmocka_unit_test(test_attention_uneven),
        cmocka_unit_test(test_attention_layout),
        cmocka_unit_test(test_get_rows),
        cmocka_unit_test(test_pool_run),
        cmocka_unit_test(test_pool_parallel_for),
        cmocka_unit_test(test_rows_stealing),
        cmocka_unit_test(test_pool_stress),
        cmocka_unit_test(test_gated_delta_levels),
        cmocka_unit_test(test_gelu_levels),
        cmocka_unit_test(test_pool_destroy),
        cmocka_unit_test(test_pool_chunks_budget),
        cmocka_unit_test(test_pool_adapts),
        cmocka_unit_test(test_pool_yields_a_shared_cpu),
        cmocka_unit_test(test_bench),
    };
    std::printf("cpu kernels: best variant is %s\n", isa_name());
    // A timing run is only that: the tests have run (or will) on their own.
    const char *bench = std::getenv("EMBER_KERNEL_BENCH");
    if (bench && *bench && *bench != '0') cmocka_set_test_filter("test_bench");
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
