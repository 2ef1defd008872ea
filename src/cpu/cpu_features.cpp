// cpu_features.cpp — run-time choice of the kernels' ISA level.
//
// The library is built for baseline x86-64 so it loads anywhere; the AVX2, AVX-512 and AMX variants are
// compiled separately (*_avx2.cpp, *_avx512.cpp, *_amx.cpp) and reached only through the table chosen
// here, after asking the CPU (CPUID) and the OS (XGETBV: YMM state for AVX2, ZMM and opmask state for
// AVX-512, tile state for AMX) whether the level's instructions are usable. AMX also needs the process's
// permission (Linux: arch_prctl ARCH_REQ_XCOMP_PERM), asked once; where it is refused the level is not
// used and the AVX-512 one is.
//
// EMBER_CPU_ISA=scalar|avx2|avx512|amx caps the level, so CI runs every path on one machine; a level the
// CPU lacks is never chosen, whatever the variable says (it can only lower the choice).
#include "cpu/kernels.hpp"
#include "cpu/rows16.hpp"
#include "cpu/vec_dot.hpp"

#include <atomic>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <cstdlib>
#include <cstring>
#if defined(__linux__) && defined(EMBER_CPU_AMX)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ember::cpu {
namespace detail {
namespace {

// Interleaved weights (rows16.hpp) through a level's kernel of the file's layout, and its own tile
// (short products) or panels (long ones) where Native or Panel is not null.
template <DType Type, MatmulRowsFn Plain, MatmulRowsFn Native = nullptr, MatmulRowsFn Panel = nullptr>
void matmul_rows_rows16(const MatmulJob &job, int64_t r0, int64_t r1) {
    rows16_rows(Type, Plain, Native, Panel, job, r0, r1);
}

const KernelTable kScalar = {
    "scalar",
    {matmul_rows_f32_scalar, matmul_rows_f16_scalar, matmul_rows_bf16_scalar, matmul_rows_q8_0_scalar,
     matmul_rows_q4_0_scalar, matmul_rows_q4_1_scalar, matmul_rows_q5_0_scalar, matmul_rows_q5_1_scalar,
     matmul_rows_q4_k_scalar, matmul_rows_q5_k_scalar, matmul_rows_q6_k_scalar, matmul_rows_q2_k_scalar,
     matmul_rows_q3_k_scalar, matmul_rows_iq4_nl_scalar, matmul_rows_iq4_xs_scalar, matmul_rows_mxfp4_scalar},
    quantize_acts_scalar,
    quantize_acts_k_scalar,
    attend_head_scalar,
    attend_head_q8_0_scalar,
    attend_head_q4_0_scalar,
    swiglu_scalar,
    f32_to_f16_scalar,
    nullptr,
    nullptr,
    nullptr,
    {matmul_rows_rows16<DType::Q4_K, matmul_rows_q4_k_scalar>, matmul_rows_rows16<DType::Q6_K, matmul_rows_q6_k_scalar>,
     matmul_rows_rows16<DType::Q4_0, matmul_rows_q4_0_scalar>, matmul_rows_rows16<DType::Q8_0, matmul_rows_q8_0_scalar>},
    false,
    gated_delta_head_scalar,
    ssm_conv_chunk_scalar,
    gelu_lanes8,
};

#if defined(__x86_64__) || defined(__i386__)
const KernelTable kAvx2 = {
    "avx2",
    {matmul_rows_f32_avx2, matmul_rows_f16_avx2, matmul_rows_bf16_avx2, matmul_rows_q8_0_avx2,
     matmul_rows_q4_0_avx2, matmul_rows_q4_1_avx2, matmul_rows_q5_0_avx2, matmul_rows_q5_1_avx2,
     matmul_rows_q4_k_avx2, matmul_rows_q5_k_avx2, matmul_rows_q6_k_avx2, matmul_rows_q2_k_avx2,
     matmul_rows_q3_k_avx2, matmul_rows_iq4_nl_avx2, matmul_rows_iq4_xs_avx2, matmul_rows_mxfp4_avx2},
    quantize_acts_avx2,
    quantize_acts_k_avx2,
    attend_head_avx2,
    attend_head_q8_0_avx2,
    attend_head_q4_0_avx2,
    swiglu_avx2,
    f32_to_f16_avx2,
    attend_heads_avx2,
    attend_heads_q8_0_avx2,
    attend_heads_q4_0_avx2,
    {matmul_rows_rows16<DType::Q4_K, matmul_rows_q4_k_avx2>, matmul_rows_rows16<DType::Q6_K, matmul_rows_q6_k_avx2>,
     matmul_rows_rows16<DType::Q4_0, matmul_rows_q4_0_avx2>, matmul_rows_rows16<DType::Q8_0, matmul_rows_q8_0_avx2>},
    false,
    gated_delta_head_avx2,
    ssm_conv_chunk_avx2,
    gelu_lanes8,
};

// Q6_K at the AVX-512 and AMX levels: decode (one token) through the VPDPBUSD tile
// (vec_dot_k_avx512.cpp), everything else through the level's kernel (Rest: panels for prefill, the AVX2
// tiles for small batches). Chosen here rather than inside Rest, whose files hold the prefill GEMMs;
// every path gives the same bits.
template <MatmulRowsFn Rest>
void matmul_rows_q6_k_decode_first(const MatmulJob &job, int64_t r0, int64_t r1) {
    if (job.n_tokens == 1) return matmul_rows_q6_k_decode_avx512(job, r0, r1);
    Rest(job, r0, r1);
}

const KernelTable kAvx512 = [] {
    // The AVX2 table with the VNNI/512-bit kernels in place (vec_dot.hpp says which, and why the bits
    // do not change).
    KernelTable t = kAvx2;
    t.name = "avx512";
    t.matmul[kWF32] = matmul_rows_f32_avx512;
    t.matmul[kWF16] = matmul_rows_f16_avx512;
    t.matmul[kWBF16] = matmul_rows_bf16_avx512;
    t.matmul[kWQ8_0] = matmul_rows_q8_0_avx512;
    t.matmul[kWQ4_0] = matmul_rows_q4_0_avx512;
    t.matmul[kWQ4_K] = matmul_rows_q4_k_avx512;
    t.matmul[kWQ6_K] = matmul_rows_q6_k_decode_first<matmul_rows_q6_k_avx512>;
    t.matmul[kWIQ4_NL] = matmul_rows_iq4_nl_avx512;
    t.matmul[kWIQ4_XS] = matmul_rows_iq4_xs_avx512;
    t.matmul[kWMXFP4] = matmul_rows_mxfp4_avx512;
    t.matmul[kWQ3_K] = matmul_rows_q3_k_avx512;
    t.matmul[kWQ2_K] = matmul_rows_q2_k_avx512;
    t.quantize_acts = quantize_acts_avx512;
    t.quantize_acts_k = quantize_acts_k_avx512;
    t.swiglu = swiglu_avx512;
    t.gelu = gelu_avx512;
    t.gated_delta_head = gated_delta_head_avx512;
    t.attend_heads = attend_heads_avx512;
    t.attend_heads_q8_0 = attend_heads_q8_0_avx512;
    t.attend_heads_q4_0 = attend_heads_q4_0_avx512;
    t.matmul_rows16[kR16Q4_K] = matmul_rows_rows16<DType::Q4_K, matmul_rows_q4_k_avx512, matmul_rows_q4_k_rows16_avx512,
                                                   matmul_panels_q4_k_rows16_avx512>;
    t.matmul_rows16[kR16Q6_K] = matmul_rows_rows16<DType::Q6_K, matmul_rows_q6_k_decode_first<matmul_rows_q6_k_avx512>,
                                                   matmul_rows_q6_k_rows16_avx512, matmul_panels_q6_k_rows16_avx512>;
    t.matmul_rows16[kR16Q4_0] = matmul_rows_rows16<DType::Q4_0, matmul_rows_q4_0_avx512, matmul_rows_q4_0_rows16_avx512,
                                                   matmul_panels_q4_0_rows16_avx512>;
    t.matmul_rows16[kR16Q8_0] = matmul_rows_rows16<DType::Q8_0, matmul_rows_q8_0_avx512, matmul_rows_q8_0_rows16_avx512,
                                                   matmul_panels_q8_0_rows16_avx512>;
    t.rows16_native = true;
    return t;
}();

#if defined(EMBER_CPU_AMX)
const KernelTable kAmx = [] {
    // The AVX-512 table with the tile GEMMs for prefill (vec_dot.hpp; the same bits).
    KernelTable t = kAvx512;
    t.name = "amx";
    t.matmul[kWQ8_0] = matmul_rows_q8_0_amx;
    t.matmul[kWQ4_0] = matmul_rows_q4_0_amx;
    t.matmul[kWQ4_K] = matmul_rows_q4_k_amx;
    t.matmul[kWQ6_K] = matmul_rows_q6_k_decode_first<matmul_rows_q6_k_amx>;
    t.matmul_rows16[kR16Q4_K] = matmul_rows_rows16<DType::Q4_K, matmul_rows_q4_k_amx, matmul_rows_q4_k_rows16_avx512,
                                                   matmul_rows_q4_k_rows16_amx>;
    t.matmul_rows16[kR16Q6_K] = matmul_rows_rows16<DType::Q6_K, matmul_rows_q6_k_decode_first<matmul_rows_q6_k_amx>,
                                                   matmul_rows_q6_k_rows16_avx512, matmul_rows_q6_k_rows16_amx>;
    t.matmul_rows16[kR16Q4_0] = matmul_rows_rows16<DType::Q4_0, matmul_rows_q4_0_amx, matmul_rows_q4_0_rows16_avx512,
                                                   matmul_rows_q4_0_rows16_amx>;
    t.matmul_rows16[kR16Q8_0] = matmul_rows_rows16<DType::Q8_0, matmul_rows_q8_0_amx, matmul_rows_q8_0_rows16_avx512,
                                                   matmul_rows_q8_0_rows16_amx>;
    return t;
}();
#endif

// The CPU's feature bits, asked with CPUID directly rather than through __builtin_cpu_supports, whose
// accepted names differ between compilers (clang 14 knows no "avx512vnni"), and the OS's consent through
// XGETBV: YMM state for AVX2, opmask and ZMM state too for AVX-512.
struct X86Features {
    bool avx2 = false, avx512 = false;
    bool amx = false;  // AMX-TILE and AMX-INT8 with palette 1 as this code uses it, and the OS saving tile state
};

X86Features x86_features() {
    X86Features f;
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
    if (!osxsave || !avx) return f;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    const bool os_ymm = (xcr0_lo & 0x6u) == 0x6u, os_zmm = (xcr0_lo & 0xe6u) == 0xe6u;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    const bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512dq = b & (1u << 17),
               avx512bw = b & (1u << 30), avx512vl = b & (1u << 31), vnni = c & (1u << 11);
    f.avx2 = os_ymm && avx2 && fma && f16c;
    f.avx512 = f.avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl && vnni;
    // AMX: CPUID.7.0:EDX bits 24 (AMX-TILE) and 25 (AMX-INT8); XCR0 bits 17 and 18 (XTILECFG, XTILEDATA).
    const bool amx_tile = d & (1u << 24), amx_int8 = d & (1u << 25), os_tiles = (xcr0_lo & 0x60000u) == 0x60000u;
    if (f.avx512 && amx_tile && amx_int8 && os_tiles && __get_cpuid_count(0x1d, 1, &a, &b, &c, &d)) {
        // Palette 1 (leaf 0x1D.1): at least 8 tiles of 16 rows of 64 bytes, which the kernels assume.
        const unsigned bytes_per_row = b & 0xffffu, max_names = b >> 16, max_rows = c & 0xffffu;
        f.amx = bytes_per_row >= 64 && max_names >= 8 && max_rows >= 16;
    }
    return f;
}

// Linux enables the tile data state per process, on request (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA, kernel 5.16 and later): without it the first tile instruction faults. Asked once
// (callers hold a function-local static); 0 means granted, for this and every later thread.
#if defined(EMBER_CPU_AMX)
bool os_permits_amx() {
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}
#endif

#endif

// The level EMBER_CPU_ISA allows (read once; unset or unknown: no cap).
Isa env_cap() {
    static const Isa cap = [] {
        const char *e = std::getenv("EMBER_CPU_ISA");
        if (e && std::strcmp(e, "scalar") == 0) return Isa::Scalar;
        if (e && std::strcmp(e, "avx2") == 0) return Isa::Avx2;
        if (e && std::strcmp(e, "avx512") == 0) return Isa::Avx512;
        return Isa::Amx;
    }();
    return cap;
}

const KernelTable *table(Isa level) {
#if defined(__x86_64__) || defined(__i386__)
#if defined(EMBER_CPU_AMX)
    if (level == Isa::Amx) return &kAmx;
#endif
    if (level == Isa::Avx512) return &kAvx512;
    if (level == Isa::Avx2) return &kAvx2;
#endif
    (void)level;
    return &kScalar;
}

// Why `level` cannot run here (nullptr: it can), ignoring EMBER_CPU_ISA.
const char *cpu_lacks(Isa level) {
    if (level == Isa::Scalar) return nullptr;
#if defined(__x86_64__) || defined(__i386__)
    static const X86Features f = x86_features();
    if (level == Isa::Avx2) return f.avx2 ? nullptr : "the CPU (or the OS) lacks AVX2, FMA or F16C";
    if (level == Isa::Avx512) return f.avx512 ? nullptr : "the CPU (or the OS) lacks one of AVX-512 F, BW, VL, DQ and VNNI";
#if defined(EMBER_CPU_AMX)
    if (!f.amx) return "the CPU (or the OS) lacks AMX-TILE, AMX-INT8 or AVX-512 with VNNI";
    // Asked only where the CPU has AMX, once per process (a thread-safe local static).
    static const bool permitted = os_permits_amx();
    return permitted ? nullptr : "the OS refused this process the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)";
#else
    return "this build has no AMX kernels (the compiler lacks -mamx-tile / -mamx-int8)";
#endif
#else
    return "not an x86 build";
#endif
}

// The highest level the CPU supports and EMBER_CPU_ISA allows.
const KernelTable *best() {
    for (Isa level : {Isa::Amx, Isa::Avx512, Isa::Avx2})
        if (level <= env_cap() && !cpu_lacks(level)) return table(level);
    return &kScalar;
}

// Relaxed is enough: the tables are constants, so a reader only needs some valid pointer.
std::atomic<const KernelTable *> g_active{nullptr};

} // namespace

const KernelTable &kernels() {
    const KernelTable *t = g_active.load(std::memory_order_relaxed);
    if (!t) {
        t = best();
        const KernelTable *expected = nullptr;
        if (!g_active.compare_exchange_strong(expected, t, std::memory_order_relaxed)) t = expected;
    }
    return *t;
}

} // namespace detail

const char *isa_name() { return detail::kernels().name; }

const char *isa_unavailable(Isa level) {
    if (const char *why = detail::cpu_lacks(level)) return why;
    if (level > detail::env_cap()) return "EMBER_CPU_ISA caps the level below it";
    return nullptr;
}

bool force_isa(Isa level) {
    if (isa_unavailable(level)) return false;
    detail::g_active.store(detail::table(level), std::memory_order_relaxed);
    return true;
}

void force_scalar(bool on) {
    detail::g_active.store(on ? &detail::kScalar : detail::best(), std::memory_order_relaxed);
}

} // namespace ember::cpu
