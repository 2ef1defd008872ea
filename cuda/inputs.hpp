// inputs.hpp — what a forward pass copies to the device before its kernels run, prepared on the host
// (plain C++, tested on the CPU by tests/test_cuda_host.cpp).
//
// io (int32, `rows` = the context's activation rows): tokens [rows], positions [rows], cache slots
// [rows] (the row of each token's K/V: table[pos / block_size] * block_size + pos % block_size), table
// offsets [rows], logits rows [n_logits], and with a window pool (backend.hpp's window tables, which the
// sliding-window layers read and write instead) the window layers' cache slots [rows] and table offsets
// [rows], for a model with recurrent state (graph.h's state slots) its sequence runs (StateIo below), and
// for a program that attends both ways (graph.h's SEQUENCE mask) each token's sequence's last position in
// the pass [rows] (a sequence's tokens are consecutive and share one block table).
// tables: each distinct block table of the batch once (window tables among them), as many
// blocks as its furthest token needs; a token's table starts at tables[offset]. Tokens of one sequence
// share one table pointer, so a batch of decode steps of many sequences uploads each table once.
#pragma once

#include "backend/module_api.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

namespace ember::cu {

struct StepShape {
    uint32_t rows = 0, block_size = 0, n_blocks = 0, n_vocab = 0, n_batch = 0, n_logits = 0;
    uint32_t n_window_blocks = 0;  // 0: no window pool (the batch's window_tables are not read)
    uint32_t n_state_slots = 0;    // 0: no recurrent state (the batch's state_slots are not read)
    // Token ids must be below this (the embedding's rows; 0: n_vocab). A part of a program cut across
    // devices returns other rows than the vocabulary's, or starts from activations (no embedding at all).
    uint32_t n_token_ids = 0;
    // Positions must be below this (an ADD_POS_ROWS table's rows; 0: no such table).
    uint32_t n_pos_rows = 0;
    // The pass uploads each token's sequence's last position (step_io_seq_last).
    bool seq_last = false;
};

// The recurrent layers' view of a pass (at step_io_state in io): its tokens grouped into runs, one per
// sequence (consecutive tokens in position order, graph.h), each run's tokens [t0, t1), the slot it
// writes and the slot its first token reads (-1: zeros; the same slot: in place). Every array has `rows`
// entries (a pass has at most as many runs as tokens), so the kernels' grids depend on the pass's token
// count alone and a captured decode step reads whatever runs the next step brings.
// kKeep: per token, the slot that keeps its state (module_api.h's state_keep; -1: none).
struct StateIo {
    static constexpr size_t kRunOf = 0, kT0 = 1, kT1 = 2, kFrom = 3, kSlot = 4, kKeep = 5;  // arrays of `rows`, in order
    static size_t words(size_t rows) { return 6 * rows + 1; }                               // then the number of runs
};

// Values of io, and where the window layers' slots and table offsets and the state runs start in it.
inline size_t step_io_state(size_t rows, size_t n_logits, bool window) { return (window ? 6 : 4) * rows + n_logits; }
inline size_t step_io_seq_last(size_t rows, size_t n_logits, bool window, bool state) {
    return step_io_state(rows, n_logits, window) + (state ? StateIo::words(rows) : 0);
}
inline size_t step_io_words(size_t rows, size_t n_logits, bool window, bool state = false, bool seq_last = false) {
    return step_io_seq_last(rows, n_logits, window, state) + (seq_last ? rows : 0);
}
inline size_t step_io_window_slots(size_t rows, size_t n_logits) { return 4 * rows + n_logits; }
inline size_t step_io_window_offsets(size_t rows, size_t n_logits) { return 5 * rows + n_logits; }

// The block tables of a pass as the attention kernels read them: each distinct table once, as many of
// its blocks as its furthest token needs, one after another (the tiled kernel reads all of a tile's keys
// through the table of the tile's first token, so a table must reach the tile's last position).
class TablePack {
public:
    // A token at `pos` reads `table`: its blocks up to pos's.
    void need(const int32_t *table, int32_t pos, int32_t block_size) {
        auto &e = tables_[table];
        e.first = std::max(e.first, pos / block_size + 1);
    }
    // Writes the tables to `out` (cleared first); offset() is valid from then on.
    void pack(std::vector<int32_t> &out) {
        out.clear();
        for (auto &[t, e] : tables_) {
            e.second = static_cast<int32_t>(out.size());
            out.insert(out.end(), t, t + e.first);
        }
    }
    int32_t offset(const int32_t *table) const { return tables_.at(table).second; }

private:
    std::map<const int32_t *, std::pair<int32_t, int32_t>> tables_;  // table -> (blocks, offset)
};

// Fills io (step_io_words values) and tables; checks every id, position and block against the shape
// (EMBER_ERR_INTERNAL, as the CPU backend). A window table's entries may be -1 (released) except the
// token's own block: the window layers read no further back than the window, which the table keeps.
// With n_state_slots, also the state runs, checked as the CPU backend checks them (slots in range, a
// sequence's tokens consecutive and in position order, no run reading a slot this pass writes). With
// n_pos_rows, positions past the table are EMBER_ERR_INVALID_ARGUMENT (as the CPU backend); with seq_last,
// each token's sequence's last position (its run: consecutive tokens of one block table).
// Returns the largest number of keys a query sees.
int32_t step_inputs(const ember_mod_batch &b, const StepShape &z, int32_t *io, std::vector<int32_t> &tables);

// out[t] = the largest position of token t's sequence in the batch: its run of consecutive tokens of one
// block table (graph.h's SEQUENCE mask reads keys up to there).
void sequence_last(const ember_mod_batch &b, int32_t *out);

// read_kv/write_kv of one layer: the cache rows of the positions 0..n-1 whose block in `table` is held
// (not -1, a released window block), and those positions.
struct KvRowPlan {
    std::vector<int32_t> rows;
    std::vector<uint32_t> pos;
};
KvRowPlan kv_row_plan(const int32_t *table, uint32_t n, uint32_t block_size);

// The state runs of a batch into `out` (StateIo's layout for `rows`); returns the number of runs.
uint32_t state_runs(const ember_mod_batch &b, uint32_t n_state_slots, size_t rows, int32_t *out);

} // namespace ember::cu
