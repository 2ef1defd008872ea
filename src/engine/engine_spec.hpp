// engine_spec.hpp — speculative decoding in the engine: a request proposes up to k tokens after its
// pending one, and the step's single forward pass verifies them beside every other request's work.
//
// A request's part of a step, with z its pending token at position P and x1..xk its drafts: the batch
// holds z, x1..xk with logits for each; the sampler then draws from those rows in order exactly as plain
// decoding would (the same calls, the same random numbers), keeping x_i while the drawn token equals it.
// The first draw that differs (or the draw after the last draft) becomes the new pending token. So a
// request's tokens are those of plain decoding, greedy or sampled with a seed, whatever was drafted — the
// rule spec/speculator.hpp uses for the MTP draft (spec/acceptance.hpp's rule keeps more drafts when
// sampling but draws other random numbers than plain decoding).
//
// Rejected drafts are rolled back: their K/V rows are forgotten by truncating the request's sequence. A
// model with recurrent layers (Qwen3.5) keeps its state per sequence, not per position, so a verifying
// pass reads the request's state slot and writes a second one (a fork, module_api.h): all drafts
// accepted, the two swap; one rejected, the first slot still holds the state before z, and z plus the
// accepted drafts are fed again, with no drafts, in the request's next step.
//
// A request drafts at most k tokens, and one more than its last round kept: a draft right for a run of
// m tokens is asked for m + 1 next, and one that is seldom right costs one drafted token a round.
//
// Drafts come from n-gram lookup in the request's own tokens (spec/lookup.hpp) or from the model's own
// multi-token-prediction block (mtp_stream.hpp), which runs on a context of its own with a block pool
// of its own: each step evaluates the pairs every request's last pass made known (one batch for all),
// then chains k - 1 more passes over the drafting requests. Its drafts are its argmax: the guess most
// likely to equal the token the target draws.
#pragma once

#include "backend/backend.hpp"
#include "kv/block_pool.hpp"
#include "model/model.hpp"

#include <memory>
#include <vector>

namespace ember {

struct Request;
struct EnginePlan;

class EngineDrafter {
public:
    // The largest draft length an engine takes: a rollback stays within what a window table keeps.
    static constexpr uint32_t kMaxK = 8;

    // Checks the mode (EMBER_SPEC_LOOKUP or EMBER_SPEC_MTP; a draft model is EMBER_ERR_UNSUPPORTED) and, for
    // MTP, loads the block on `backend` (EMBER_ERR_INVALID_ARGUMENT when the model has none).
    EngineDrafter(const Model &model, Backend &backend, const BackendContext &target, const EnginePlan &plan,
                  ember_spec_mode mode, uint32_t k, uint32_t ngram_max);
    ~EngineDrafter();
    // The block's context (its KV blocks for every request), as it is created: what an estimate counts.
    static ContextParams mtp_context_params(const EnginePlan &plan);

    // The hidden rows the target's passes are to return (floats a row), 0: none needed.
    uint32_t hidden_width() const { return mtp_ ? width_ : 0; }
    // A request that speculates starts drafting (at admission, after its adopted prefix).
    void start(Request &r) const;
    // Fills the drafts of every request in `active` that drafts this step: one that speculates, has a
    // pending token and nothing to feed again, with room for a draft in its context and its max_tokens.
    void propose(const std::vector<std::shared_ptr<Request>> &active, uint32_t n_ctx);

private:
    struct Row {
        Request *r;
        const float *h;
        int32_t token;
        bool logits;
    };
    // Evaluates rows of the block (each request's rows consecutive, in order), in chunks of n_batch; a row
    // with logits appends the block's argmax to its request's drafts and keeps its hidden row for chaining.
    void eval(const std::vector<Row> &rows);

    const Model &model_;
    ember_spec_mode mode_;
    uint32_t k_, ngram_max_;
    uint32_t width_ = 0, n_batch_ = 0, n_logits_ = 0;
    std::unique_ptr<BackendContext> mtp_;
    std::unique_ptr<kv::BlockPool> pool_;
    std::vector<float> logits_, hidden_, inputs_;
    std::vector<int32_t> tokens_, pos_, logit_rows_;
    std::vector<const int32_t *> tables_;
    std::vector<Row> rows_;
};

// The size of a draft a request may make now (0: none), for a request with its pending token at position
// `pos`, as the step's verification can use at most: positions below n_ctx, tokens within max_tokens.
uint32_t draft_room(const Request &r, uint32_t k, uint32_t n_ctx);

} // namespace ember
