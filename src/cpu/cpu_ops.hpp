// cpu_ops.hpp — one op on host arrays (module_api.h's run_op, for the parity harness).
#pragma once

#include "backend/module_api.h"
#include "cpu/kernels.hpp"

namespace ember::cpu {
void run_op(const ember_mod_op &op);
} // namespace ember::cpu
