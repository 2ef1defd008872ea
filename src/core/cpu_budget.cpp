#include "core/cpu_budget.hpp"

#include <atomic>
#include <cstdlib>

namespace ember {

namespace {
std::atomic<int> g_max_threads{0};
std::atomic<int> g_priority{static_cast<int>(CpuPriority::Normal)};
// EMBER_CPU_ADAPT=0 fixes the width from the start (benchmarks of the fixed thread count).
std::atomic<bool> g_adaptive{[] {
    const char *e = std::getenv("EMBER_CPU_ADAPT");
    return !(e && e[0] == '0');
}()};
} // namespace

void cpu_budget_set(const CpuBudget &b) {
    g_max_threads.store(b.max_threads < 0 ? 0 : b.max_threads, std::memory_order_relaxed);
    g_priority.store(static_cast<int>(b.priority), std::memory_order_relaxed);
    g_adaptive.store(b.adaptive, std::memory_order_relaxed);
}

CpuBudget cpu_budget_get() {
    CpuBudget b;
    b.max_threads = cpu_budget_max_threads();
    b.priority = cpu_budget_priority();
    b.adaptive = cpu_budget_adaptive();
    return b;
}

int cpu_budget_max_threads() { return g_max_threads.load(std::memory_order_relaxed); }
CpuPriority cpu_budget_priority() { return static_cast<CpuPriority>(g_priority.load(std::memory_order_relaxed)); }
bool cpu_budget_adaptive() { return g_adaptive.load(std::memory_order_relaxed); }

} // namespace ember
