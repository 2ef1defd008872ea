// ops.hpp — module_api.h's run_op on the CUDA device (tests/test_parity.cpp).
#pragma once

#include "backend/module_api.h"
#include "device.hpp"

namespace ember::cu {
void run_op(Device &dev, const ember_mod_op &op);
}
