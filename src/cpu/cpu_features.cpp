// cpu_features.cpp — run-time choice of the kernels' ISA variant.
//
// The library is built for baseline x86-64 so it loads anywhere; the AVX2 variants are compiled
// separately (*_avx2.cpp) and reached only through the table chosen here, after asking the CPU (and
// the OS, which libgcc's check covers via XGETBV) whether AVX2, FMA and F16C are usable.
//
// EMBER_CPU_ISA=scalar (or avx2) caps the level, so CI runs every path on one machine; a level the CPU
// lacks is never chosen, whatever the variable says (it can only lower the choice).
#include "cpu/kernels.hpp"
#include "cpu/vec_dot.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace ember::cpu {
namespace detail {
namespace {

const KernelTable kScalar = {
    "scalar",
    {matmul_rows_f32_scalar, matmul_rows_f16_scalar, matmul_rows_bf16_scalar, matmul_rows_q8_0_scalar,
     matmul_rows_q4_0_scalar, matmul_rows_q4_1_scalar, matmul_rows_q5_0_scalar, matmul_rows_q5_1_scalar,
     matmul_rows_q4_k_scalar, matmul_rows_q5_k_scalar, matmul_rows_q6_k_scalar},
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
     matmul_rows_q4_k_avx2, matmul_rows_q5_k_avx2, matmul_rows_q6_k_avx2},
    quantize_acts_avx2,
    attend_head_avx2,
    attend_head_q8_0_avx2,
    swiglu_avx2,
    f32_to_f16_avx2,
};

bool cpu_has_avx2() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
}
#endif

// The highest level the CPU supports and EMBER_CPU_ISA allows (read once).
const KernelTable *best() {
    static const bool scalar_only = [] {
        const char *cap = std::getenv("EMBER_CPU_ISA");
        return cap && std::strcmp(cap, "scalar") == 0;
    }();
    if (scalar_only) return &kScalar;
#if defined(__x86_64__) || defined(__i386__)
    static const bool avx2 = cpu_has_avx2();
    if (avx2) return &kAvx2;
#endif
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

void force_scalar(bool on) {
    detail::g_active.store(on ? &detail::kScalar : detail::best(), std::memory_order_relaxed);
}

} // namespace ember::cpu
