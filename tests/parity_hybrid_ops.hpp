// parity_hybrid_ops.hpp — the parity harness's cases for the hybrid families' ops (graph.h's ops from
// COPY_COLS on), added to test_parity's list: parity_hybrid_ops.cpp.
#pragma once

#include "test_util.h"

#include "parity_harness.hpp"

#include <vector>

// Appends the cases; they run on parity::target() (parity_harness.hpp), set by test_parity's main.
void parity_hybrid_ops_add(std::vector<CMUnitTest> &tests);
