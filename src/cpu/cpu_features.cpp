// cpu_features.cpp — run-time choice of the kernels' ISA level.
//
// The library is built for baseline x86-64 so it loads anywhere; the AVX2 and AVX-512 variants are
// compiled separately (*_avx2.cpp, *_avx512.cpp) and reached only through the table chosen here, after
// asking the CPU (CPUID) and the OS (XGETBV: YMM state for AVX2, ZMM and opmask state for AVX-512)
// whether the level's instructions are usable.
//
// EMBER_CPU_ISA=scalar|avx2|avx512 caps the level, so CI runs every path on one machine; a level the
// CPU lacks is never chosen, whatever the variable says (it can only lower the choice).
#include "cpu/kernels.hpp"
#include "cpu/vec_dot.hpp"

#include <atomic>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <cstdlib>
#include <cstring>

namespace ember::cpu {
namespace detail {
namespace {

const KernelTable kScalar = {
    "scalar",
    {matmul_rows_f32_scalar, matmul_rows_f16_scalar, matmul_rows_bf16_scalar, matmul_rows_q8_0_scalar,
     matmul_rows_q4_0_scalar, matmul_rows_q4_1_scalar, matmul_rows_q5_0_scalar, matmul_rows_q5_1_scalar,
     matmul_rows_q4_k_scalar, matmul_rows_q5_k_scalar, matmul_rows_q6_k_scalar, matmul_rows_q2_k_scalar,
     matmul_rows_q3_k_scalar, matmul_rows_iq4_nl_scalar, matmul_rows_iq4_xs_scalar, matmul_rows_mxfp4_scalar},
    quantize_acts_scalar,
    attend_head_scalar,
    attend_head_q8_0_scalar,
    swiglu_scalar,
    f32_to_f16_scalar,
};

#if defined(__x86_64__) || defined(__i386__)
const KernelTable kAvx2 = {
    "avx2",
    {matmul_rows_f32_avx2, matmul_rows_f16_avx2, matmul_rows_bf16_avx2, matmul_rows_q8_0_avx2,
     matmul_rows_q4_0_avx2, matmul_rows_q4_1_avx2, matmul_rows_q5_0_avx2, matmul_rows_q5_1_avx2,
     matmul_rows_q4_k_avx2, matmul_rows_q5_k_avx2, matmul_rows_q6_k_avx2, matmul_rows_q2_k_avx2,
     matmul_rows_q3_k_avx2, matmul_rows_iq4_nl_avx2, matmul_rows_iq4_xs_avx2, matmul_rows_mxfp4_avx2},
    quantize_acts_avx2,
    attend_head_avx2,
    attend_head_q8_0_avx2,
    swiglu_avx2,
    f32_to_f16_avx2,
};

const KernelTable kAvx512 = [] {
    // The AVX2 table with the VNNI/512-bit kernels in place (vec_dot.hpp says which, and why the bits
    // do not change).
    KernelTable t = kAvx2;
    t.name = "avx512";
    t.matmul[kWQ8_0] = matmul_rows_q8_0_avx512;
    t.matmul[kWQ4_0] = matmul_rows_q4_0_avx512;
    t.matmul[kWQ4_K] = matmul_rows_q4_k_avx512;
    t.matmul[kWQ6_K] = matmul_rows_q6_k_avx512;
    t.matmul[kWIQ4_NL] = matmul_rows_iq4_nl_avx512;
    t.matmul[kWIQ4_XS] = matmul_rows_iq4_xs_avx512;
    t.matmul[kWMXFP4] = matmul_rows_mxfp4_avx512;
    t.matmul[kWQ3_K] = matmul_rows_q3_k_avx512;
    t.matmul[kWQ2_K] = matmul_rows_q2_k_avx512;
    return t;
}();

// The CPU's feature bits, asked with CPUID directly rather than through __builtin_cpu_supports, whose
// accepted names differ between compilers (clang 14 knows no "avx512vnni"), and the OS's consent through
// XGETBV: YMM state for AVX2, opmask and ZMM state too for AVX-512.
struct X86Features {
    bool avx2 = false, avx512 = false;
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
    return f;
}

bool cpu_has_avx2() { return x86_features().avx2; }
bool cpu_has_avx512() { return x86_features().avx512; }
#endif

// The level EMBER_CPU_ISA allows (read once; unset or unknown: no cap).
Isa env_cap() {
    static const Isa cap = [] {
        const char *e = std::getenv("EMBER_CPU_ISA");
        if (e && std::strcmp(e, "scalar") == 0) return Isa::Scalar;
        if (e && std::strcmp(e, "avx2") == 0) return Isa::Avx2;
        return Isa::Avx512;
    }();
    return cap;
}

const KernelTable *table(Isa level) {
#if defined(__x86_64__) || defined(__i386__)
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
    static const bool avx2 = cpu_has_avx2(), avx512 = cpu_has_avx512();
    if (level == Isa::Avx2) return avx2 ? nullptr : "the CPU (or the OS) lacks AVX2, FMA or F16C";
    return avx512 ? nullptr : "the CPU (or the OS) lacks one of AVX-512 F, BW, VL, DQ and VNNI";
#else
    return "not an x86 build";
#endif
}

// The highest level the CPU supports and EMBER_CPU_ISA allows.
const KernelTable *best() {
    for (Isa level : {Isa::Avx512, Isa::Avx2})
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
