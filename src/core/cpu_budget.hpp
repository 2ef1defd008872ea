// cpu_budget.hpp — the process-wide CPU budget (ember_cpu_budget_set in the C API): the most threads a
// CPU thread pool computes with, how eagerly idle threads yield, and whether the count adapts to a busy
// machine. In core because two layers meet here: the ABI sets it, the CPU backend reads it at each job.
#pragma once

namespace ember {

enum class CpuPriority : int { Normal = 0, Low = 1, High = 2 };
struct CpuBudget {
    int max_threads = 0;                   // 0: each pool's own size; else at most this many per pool
    CpuPriority priority = CpuPriority::Normal;
    bool adaptive = true;                  // false: always use the budget's threads, never fewer
};
void cpu_budget_set(const CpuBudget &b);
CpuBudget cpu_budget_get();

// The fields one at a time (relaxed atomic loads), for the thread pool's hot paths.
int cpu_budget_max_threads();
CpuPriority cpu_budget_priority();
bool cpu_budget_adaptive();

} // namespace ember
