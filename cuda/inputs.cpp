// inputs.cpp — a forward pass's device inputs (see inputs.hpp).
#include "inputs.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <map>

namespace ember::cu {

int32_t step_inputs(const ember_mod_batch &b, const StepShape &z, int32_t *io, std::vector<int32_t> &tables) {
    const uint32_t n = b.n_tokens, nl = b.n_logits;
    if (n == 0 || n > z.n_batch || nl > z.n_logits)
        fail(EMBER_ERR_INTERNAL, "cuda forward: %u tokens / %u logits exceed the context's %u / %u", n, nl, z.n_batch,
             z.n_logits);
    const int32_t bs = static_cast<int32_t>(z.block_size);
    const size_t r = z.rows;
    std::map<const int32_t *, std::pair<int32_t, int32_t>> tab;  // table -> (blocks needed, offset)
    int32_t max_keys = 0;
    for (uint32_t t = 0; t < n; ++t) {
        const int32_t p = b.pos[t];
        if (p < 0) fail(EMBER_ERR_INTERNAL, "cuda forward: token %u at position %d", t, p);
        const int32_t nb = p / bs + 1;
        for (int32_t i = 0; i < nb; ++i) {
            const int32_t block = b.tables[t][i];
            if (block < 0 || static_cast<uint32_t>(block) >= z.n_blocks)
                fail(EMBER_ERR_INTERNAL, "cuda forward: token %u at position %d maps to block %d of %u", t, p, block,
                     z.n_blocks);
        }
        if (b.tokens[t] < 0 || static_cast<uint32_t>(b.tokens[t]) >= z.n_vocab)
            fail(EMBER_ERR_INTERNAL, "cuda forward: token id %d out of range", b.tokens[t]);
        io[t] = b.tokens[t];
        io[r + t] = p;
        io[2 * r + t] = b.tables[t][p / bs] * bs + p % bs;
        auto &e = tab[b.tables[t]];
        e.first = std::max(e.first, nb);
        max_keys = std::max(max_keys, p + 1);
    }
    tables.clear();
    for (auto &[t, e] : tab) {
        e.second = static_cast<int32_t>(tables.size());
        tables.insert(tables.end(), t, t + e.first);
    }
    for (uint32_t t = 0; t < n; ++t) io[3 * r + t] = tab[b.tables[t]].second;
    for (uint32_t i = 0; i < nl; ++i) {
        if (b.logits_rows[i] < 0 || static_cast<uint32_t>(b.logits_rows[i]) >= n)
            fail(EMBER_ERR_INTERNAL, "cuda forward: logits row %d of %u tokens", b.logits_rows[i], n);
        io[4 * r + i] = b.logits_rows[i];
    }
    return max_keys;
}

} // namespace ember::cu
