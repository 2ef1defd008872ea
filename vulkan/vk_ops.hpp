// vk_ops.hpp — module_api.h's run_op on a device (tests/test_parity.cpp).
#pragma once

#include "backend/module_api.h"
#include "vk_exec.hpp"

#include <functional>

namespace ember::vk {

void run_op(Device &dev, const ember_mod_op &op);

} // namespace ember::vk
