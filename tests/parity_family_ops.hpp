// parity_family_ops.hpp — the parity harness's cases for the ops of the model families (graph.h's ops from
// SCALE on), added to test_parity's list: parity_family_ops.cpp.
#pragma once

#include "test_util.h"

#include "backend/module_api.h"

#include <functional>
#include <vector>

// Appends the cases; run_op runs one op on the backend under test (throwing ember::Error on failure).
using ParityRun = std::function<void(const ember_mod_op &)>;
void parity_family_ops_add(std::vector<CMUnitTest> &tests, ParityRun run_op, const char *backend_name);
