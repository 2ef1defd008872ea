// inputs.cpp — a forward pass's device inputs (see inputs.hpp).
#include "inputs.hpp"

#include "backend/state_runs.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <cstddef>

namespace ember::cu {

int32_t step_inputs(const ember_mod_batch &b, const StepShape &z, int32_t *io, std::vector<int32_t> &tables) {
    const uint32_t n = b.n_tokens, nl = b.n_logits;
    if (n == 0 || n > z.n_batch || nl > z.n_logits)
        fail(EMBER_ERR_INTERNAL, "cuda forward: %u tokens / %u logits exceed the context's %u / %u", n, nl, z.n_batch,
             z.n_logits);
    const int32_t bs = static_cast<int32_t>(z.block_size);
    const size_t r = z.rows;
    TablePack tab;
    int32_t max_keys = 0;
    const bool window = z.n_window_blocks > 0;
    if (window && (b.struct_size < offsetof(ember_mod_batch, window_tables) + sizeof b.window_tables || !b.window_tables))
        fail(EMBER_ERR_INTERNAL, "cuda forward: a context with window blocks needs the batch's window tables");
    const size_t wslots = step_io_window_slots(r, z.n_logits), woff = step_io_window_offsets(r, z.n_logits);
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
        if (b.tokens[t] < 0 || static_cast<uint32_t>(b.tokens[t]) >= (z.n_token_ids ? z.n_token_ids : z.n_vocab))
            fail(EMBER_ERR_INTERNAL, "cuda forward: token id %d out of range", b.tokens[t]);
        if (z.n_pos_rows && static_cast<uint32_t>(p) >= z.n_pos_rows)
            fail(EMBER_ERR_INVALID_ARGUMENT, "cuda forward: position %d is past the model's %u position embeddings", p,
                 z.n_pos_rows);
        io[t] = b.tokens[t];
        io[r + t] = p;
        io[2 * r + t] = b.tables[t][p / bs] * bs + p % bs;
        tab.need(b.tables[t], p, bs);
        max_keys = std::max(max_keys, p + 1);
        if (!window) continue;
        const int32_t *wt = b.window_tables[t];
        for (int32_t i = 0; i < nb; ++i)
            if (wt[i] < (i == nb - 1 ? 0 : -1) || wt[i] >= static_cast<int32_t>(z.n_window_blocks))
                fail(EMBER_ERR_INTERNAL, "cuda forward: token %u at position %d maps to window block %d of %u", t, p,
                     wt[i], z.n_window_blocks);
        io[wslots + t] = wt[p / bs] * bs + p % bs;
        tab.need(wt, p, bs);
    }
    tab.pack(tables);
    for (uint32_t t = 0; t < n; ++t) {
        io[3 * r + t] = tab.offset(b.tables[t]);
        if (window) io[woff + t] = tab.offset(b.window_tables[t]);
    }
    for (uint32_t i = 0; i < nl; ++i) {
        if (b.logits_rows[i] < 0 || static_cast<uint32_t>(b.logits_rows[i]) >= n)
            fail(EMBER_ERR_INTERNAL, "cuda forward: logits row %d of %u tokens", b.logits_rows[i], n);
        io[4 * r + i] = b.logits_rows[i];
    }
    if (z.n_state_slots) state_runs(b, z.n_state_slots, r, io + step_io_state(r, z.n_logits, window));
    if (z.seq_last) sequence_last(b, io + step_io_seq_last(r, z.n_logits, window, z.n_state_slots > 0));
    return max_keys;
}

void sequence_last(const ember_mod_batch &b, int32_t *out) {
    for (uint32_t t0 = 0; t0 < b.n_tokens;) {
        uint32_t t1 = t0 + 1;
        int32_t m = b.pos[t0];
        while (t1 < b.n_tokens && b.tables[t1] == b.tables[t0]) m = std::max(m, b.pos[t1++]);
        std::fill(out + t0, out + t1, m);
        t0 = t1;
    }
}

uint32_t state_runs(const ember_mod_batch &b, uint32_t n_state_slots, size_t rows, int32_t *out) {
    const std::vector<SlotRun> runs = slot_runs(b, n_state_slots, "cuda forward");
    int32_t *run_of = out + StateIo::kRunOf * rows, *t0 = out + StateIo::kT0 * rows, *t1 = out + StateIo::kT1 * rows;
    int32_t *from = out + StateIo::kFrom * rows, *slot = out + StateIo::kSlot * rows, *keep = out + StateIo::kKeep * rows;
    const int32_t *kept = kept_slots(b, n_state_slots, runs, "cuda forward");
    for (size_t t = 0; t < rows; ++t) keep[t] = kept && t < b.n_tokens ? kept[t] : -1;
    for (size_t n = 0; n < runs.size(); ++n) {
        const SlotRun &r = runs[n];
        t0[n] = static_cast<int32_t>(r.t0), t1[n] = static_cast<int32_t>(r.t1), from[n] = r.from, slot[n] = r.slot;
        for (uint32_t t = r.t0; t < r.t1; ++t) run_of[t] = static_cast<int32_t>(n);
    }
    out[StateIo::words(rows) - 1] = static_cast<int32_t>(runs.size());
    return static_cast<uint32_t>(runs.size());
}

KvRowPlan kv_row_plan(const int32_t *table, uint32_t n, uint32_t block_size) {
    KvRowPlan plan;
    for (uint32_t p = 0; p < n; ++p) {
        const int32_t block = table[p / block_size];
        if (block < 0) continue;
        plan.rows.push_back(block * static_cast<int32_t>(block_size) + static_cast<int32_t>(p % block_size));
        plan.pos.push_back(p);
    }
    return plan;
}

} // namespace ember::cu
