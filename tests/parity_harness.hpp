// parity_harness.hpp — what every case of the parity harness shares (test_parity.cpp and the model
// families' cases in parity_family_ops.cpp): the backend under test, running one op on it, random inputs,
// and the check of a result against its double-precision reference and stated bound.
#pragma once

#include "test_util.h"

#include "backend/graph.h"
#include "backend/module_api.h"
#include "core/error.hpp"

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace parity {

constexpr double kU = 1.0 / 16777216.0;  // float's unit roundoff, 2^-24: the bounds are multiples of it

// The backend under test (the target): its module table's run_op (throwing ember::Error on failure) and its name
// ("cpu", "vulkan", "cuda"); set once by test_parity's main before any case runs.
struct Target {
    std::function<void(const ember_mod_op &)> run;
    const char *name = "cpu";
};
inline Target &target() {
    static Target b;
    return b;
}

// An op description with its size set and every option at its neutral value.
inline ember_mod_op make_op(uint32_t kind) {
    ember_mod_op op{};
    op.struct_size = sizeof op;
    op.kind = kind;
    op.rope_attn_factor = 1.0f;  // ROPE_YARN's output scale; plain ROPE ignores it
    return op;
}

// Runs `op` on the backend under test; any error fails the case, naming the op.
inline void run(const ember_mod_op &op) {
    try {
        target().run(op);
    } catch (const ember::Error &e) {
        fail_msg("%s: op %s failed: %s", target().name, ember_graph_op_name(op.kind), e.what());
    }
}

inline std::vector<float> rand_vec(uint64_t *st, size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float &x : v) x = test_randf(st, lo, hi);
    return v;
}

inline void check(const char *what, size_t i, double got, double want, double bound) {
    if (!(std::fabs(got - want) <= bound))
        fail_msg("%s %s [%zu]: %.9g vs %.9g, err %.3g > bound %.3g", target().name, what, i, got, want,
                 std::fabs(got - want), bound);
}

} // namespace parity
