// mtp_draft.hpp — a model's own multi-token-prediction block as the draft of speculative decoding
// (speculator.hpp): no second model, the block's program (model.hpp's mtp_desc) on the target's backend
// with KV rows of its own.
//
// The block predicts the token after x from x and the target's final hidden state h one position
// earlier. Its row at position i holds the pair (h_{o+i}, token o+i+1) for the target positions from o
// on (o: the first position whose hidden row the target recorded, Session::keep_hidden): rotary
// attention depends on distances only, so counting from o changes nothing but where the block's context
// begins. Proposing for the context C + z (the target holds C, z is the pending token):
//   1. catch up: evaluate the pairs the block lacks, up to (h_{|C|-1}, z), in one batch — its last
//      logits give x1;
//   2. chain: x_i's logits come from the pair (the block's own hidden row of the step before, x_{i-1})
//      at the next position.
// The chained rows are forgotten at the next catch-up, which replaces them with the target's rows.
#pragma once

#include "kv/block_pool.hpp"
#include "kv/kv_sequence.hpp"
#include "session/session.hpp"

#include <memory>
#include <vector>

namespace ember::spec {

class MtpDraft {
public:
    // Loads the block's program on the target's backend (EMBER_ERR_INVALID_ARGUMENT when the model has no
    // such block, EMBER_ERR_UNSUPPORTED when the backend does not run it) and turns on the target's
    // hidden rows.
    MtpDraft(Session &target, uint32_t n_threads);

    // Step 1: the logits for x1 in the context `ctx` (the target's tokens and z), or nullptr when the
    // target has no hidden row for its last position (speculation was attached after its last feed: the
    // round then drafts nothing).
    const float *catch_up(const Session &target, const std::vector<int32_t> &ctx);
    // Step 2: the logits for the token after x (the token just drafted).
    const float *chain(int32_t x);

private:
    // Evaluates n pairs (hidden rows `h`, tokens `x`) after the block's current rows; keeps the last
    // row's logits and hidden row.
    void eval(const float *h, const int32_t *x, uint32_t n);

    const Model &model_;
    uint32_t n_ctx_, n_batch_, n_embd_;
    std::unique_ptr<BackendContext> ctx_;
    std::unique_ptr<kv::BlockPool> pool_;
    std::unique_ptr<kv::KvSequence> seq_;
    // The target tokens the block's rows were made from (positions 0 .. origin_ + n_real_), the target
    // position of the block's row 0, and how many of its rows came from the target's hidden rows (the
    // rest are chained drafts).
    std::vector<int32_t> seen_;
    uint32_t origin_ = 0, n_real_ = 0;
    std::vector<float> logits_, hidden_, inputs_;
    std::vector<int32_t> pos_, tokens_;
    std::vector<const int32_t *> tables_;
};

} // namespace ember::spec
