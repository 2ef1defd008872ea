// api_cpu.cpp — the process-wide CPU budget through the C ABI (since EMBER_1.4): the most threads each
// session computes with, how eagerly idle threads yield their cores, and whether the thread count adapts
// to a busy machine (core/cpu_budget.hpp; the CPU backend's thread pools read it).
#include "abi/handles.hpp"
#include "core/cpu_budget.hpp"

#include <cstring>

using namespace ember;
using ember::abi::guard;

extern "C" {

void ember_cpu_budget_init(ember_cpu_budget *budget) {
    if (!budget) return;
    std::memset(budget, 0, sizeof *budget);
    budget->struct_size = sizeof *budget;
    budget->priority = EMBER_CPU_PRIORITY_NORMAL;
}

ember_status ember_cpu_budget_set(const ember_cpu_budget *budget) {
    return guard("ember_cpu_budget_set", [&] {
        const ember_cpu_budget p = abi::read_params(budget, sizeof(ember_cpu_budget), ember_cpu_budget_init, "ember_cpu_budget");
        if (p.priority < EMBER_CPU_PRIORITY_NORMAL || p.priority > EMBER_CPU_PRIORITY_HIGH)
            fail(EMBER_ERR_INVALID_ARGUMENT, "ember_cpu_budget.priority %d is not an ember_cpu_priority", p.priority);
        if (p.flags & ~uint32_t{EMBER_CPU_BUDGET_FIXED_THREADS})
            fail(EMBER_ERR_INVALID_ARGUMENT, "ember_cpu_budget.flags 0x%x has undefined bits", p.flags);
        if (p.max_threads > 4096) fail(EMBER_ERR_INVALID_ARGUMENT, "ember_cpu_budget.max_threads %u is too large", p.max_threads);
        CpuBudget b;
        b.max_threads = static_cast<int>(p.max_threads);
        b.priority = static_cast<CpuPriority>(p.priority);
        b.adaptive = !(p.flags & EMBER_CPU_BUDGET_FIXED_THREADS);
        cpu_budget_set(b);
        return EMBER_OK;
    });
}

ember_status ember_cpu_budget_get(ember_cpu_budget *budget) {
    return guard("ember_cpu_budget_get", [&] {
        EMBER_REQUIRE_ARG(budget);
        const CpuBudget b = cpu_budget_get();
        ember_cpu_budget full;
        ember_cpu_budget_init(&full);
        full.max_threads = static_cast<uint32_t>(b.max_threads);
        full.priority = static_cast<int32_t>(b.priority);
        full.flags = b.adaptive ? 0u : uint32_t{EMBER_CPU_BUDGET_FIXED_THREADS};
        abi::write_out(budget, full, sizeof(ember_cpu_budget), "ember_cpu_budget");
        return EMBER_OK;
    });
}

} // extern "C"
