// parity_encoder_ops.hpp — the parity harness's cases for the encoders' ops (graph.h's layer_norm, gelu and
// attention_ext's SEQUENCE mask; BERT, docs/embeddings.md), added to test_parity's list on the backends that
// run them through run_op (the CPU and the CUDA module): parity_encoder_ops.cpp.
#pragma once

#include "test_util.h"

#include "parity_harness.hpp"

#include <vector>

// Appends the cases; they run on parity::target() (parity_harness.hpp), set by test_parity's main.
void parity_encoder_ops_add(std::vector<CMUnitTest> &tests);
