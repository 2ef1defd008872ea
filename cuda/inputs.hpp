// inputs.hpp — what a forward pass copies to the device before its kernels run, prepared on the host
// (plain C++, tested on the CPU by tests/test_cuda_host.cpp).
//
// io (int32, `rows` = the context's activation rows): tokens [rows], positions [rows], cache slots
// [rows] (the row of each token's K/V: table[pos / block_size] * block_size + pos % block_size), table
// offsets [rows], logits rows [n_logits]. tables: each distinct block table of the batch once, as many
// blocks as its furthest token needs; a token's table starts at tables[offset]. Tokens of one sequence
// share one table pointer, so a batch of decode steps of many sequences uploads each table once.
#pragma once

#include "backend/module_api.h"

#include <cstdint>
#include <vector>

namespace ember::cu {

struct StepShape {
    uint32_t rows = 0, block_size = 0, n_blocks = 0, n_vocab = 0, n_batch = 0, n_logits = 0;
};

// Fills io (4 * rows + n_logits values) and tables; checks every id, position and block against the
// shape (EMBER_ERR_INTERNAL, as the CPU backend). Returns the largest number of keys a query sees.
int32_t step_inputs(const ember_mod_batch &b, const StepShape &z, int32_t *io, std::vector<int32_t> &tables);

} // namespace ember::cu
