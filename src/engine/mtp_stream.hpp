// mtp_stream.hpp — one request's rows in the engine's multi-token-prediction block (engine_spec.hpp).
//
// The block predicts the token after x from x and the model's final hidden state h one position earlier
// (spec/mtp_draft.hpp): its row j holds the pair (h_{o+j}, token o+j+1), o the first position whose
// hidden row the engine recorded for the request (its adopted prefix has none). A pair can be made once
// both halves are known: the hidden row comes with the forward pass that evaluates a position, the token
// after it when the prompt is fed or when it is sampled or accepted. Pairs wait here until the next
// step's drafting evaluates them; the rows drafting chains past them are forgotten again (n_real).
#pragma once

#include "kv/kv_sequence.hpp"

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace ember {

struct MtpStream {
    std::unique_ptr<kv::KvSequence> seq;   // the block's K/V rows, in the engine's block pool of the block
    uint32_t n_real = 0;                   // rows made from recorded hidden rows (the rest: chained drafts)
    uint32_t width = 0;                    // floats of a hidden row
    std::vector<float> rows;               // pairs not yet evaluated: their hidden rows
    std::vector<int32_t> toks;             // and their tokens
    std::vector<float> last;               // the last evaluated position's hidden row (has_last)
    bool has_last = false;
    std::vector<float> chain;              // the block's own hidden row of its last draft (chaining reads it)

    // The token after the last evaluated position is known: with that position's row, a pair.
    void token(int32_t t) {
        if (!has_last) return;
        rows.insert(rows.end(), last.begin(), last.end());
        toks.push_back(t);
        has_last = false;
    }
    // A position was evaluated: its hidden row waits for the token after it.
    void hidden(const float *row) {
        last.assign(row, row + width);
        has_last = true;
    }
};

} // namespace ember
