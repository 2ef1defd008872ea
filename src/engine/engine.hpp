// engine.hpp — continuous batching: many requests on one model share one paged KV cache and one forward
// pass per step. See the Engine section of ember.h for the contract.
#pragma once

#include "backend/backend.hpp"
#include "engine/engine_spec.hpp"
#include "engine/request.hpp"
#include "engine/state_snapshots.hpp"
#include "backend/placement.hpp"
#include "kv/block_pool.hpp"
#include "model/model.hpp"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ember {

struct EngineOptions {
    uint32_t n_ctx = 0;
    uint32_t n_seq_max = 8;
    uint64_t kv_bytes = 0;
    uint32_t n_threads = 0;
    uint32_t n_batch = 256;
    ember_backend_kind backend = EMBER_BACKEND_AUTO;
    bool manual_step = false;
    DType kv_type = DType::F16;
    // Sliding-window layers' K/V rows in a pool of their own (kv/window_table.hpp), released once no pass
    // can read them, where the backend supports it (Backend::window_blocks: the CPU, Vulkan and CUDA
    // modules) and the window is well inside n_ctx. false:
    // every layer's rows stay in the main blocks (tests compare the two).
    bool window_blocks = true;
    // Placement across devices (backend/placement.hpp), as SessionOptions's: with a GPU backend and a
    // request that splits, the engine runs the placement plan_placement chooses for its plan.
    PlacementRequest placement;
    Backend *placed = nullptr;   // a backend to run on instead of `backend` (tests)
    // Speculative decoding for the requests that ask for it (engine_spec.hpp): EMBER_SPEC_OFF,
    // EMBER_SPEC_LOOKUP or EMBER_SPEC_MTP, the draft length, and lookup's longest n-gram.
    ember_spec_mode spec_mode = EMBER_SPEC_OFF;
    uint32_t spec_k = 4;
    uint32_t spec_ngram_max = 3;
};

// The sizes an engine allocates, computed before allocating anything (ember_estimate_memory uses the
// same function).
// With window blocks, n_blocks counts the main pool's blocks (the other layers' rows, for whole
// sequences) and n_window_blocks the window pool's; kv_bytes is both pools' bytes. A kv_bytes budget
// buys the window pool first (its size is fixed by n_seq_max, the window and n_batch) and main blocks
// with the rest.
struct EnginePlan {
    uint32_t n_ctx = 0, n_seq_max = 0, n_batch = 0, n_threads = 0;
    uint32_t block_size = 0, n_blocks = 0;
    uint32_t window = 0, n_window_blocks = 0;   // 0, 0: no window pool
    // A model with recurrent layers: a state slot per running sequence and n_snapshots for prefix points
    // (engine/state_snapshots.hpp), state_bytes in all (also counted in kv_bytes: the sequences' memory).
    uint32_t n_state_slots = 0, n_snapshots = 0;
    uint64_t state_bytes = 0;
    uint64_t kv_bytes = 0;
    DType kv_type = DType::F16;
    // With speculation: the draft length (0: none). A request's pass then carries up to spec_k + 1
    // tokens with logits for each, and on a recurrent model a second state slot (n_state_slots counts
    // n_seq_max of them after the snapshots').
    uint32_t spec_k = 0;
    // Output rows a pass returns at most: a logits row per running request and draft, or on an embedding
    // model every row of a pass (mean pooling reads them all; its n_batch holds its longest text).
    uint32_t n_logits = 0;
};
EnginePlan plan_engine(const Model &model, const EngineOptions &opts);

// What an engine allocates, from the same plan and the same backend sizing it allocates with.
struct MemoryEstimate {
    uint64_t weights_bytes = 0;   // tensor data (mapped from the file by the CPU backend, not copied)
    uint64_t kv_bytes = 0;        // the KV cache and the recurrent states
    uint64_t compute_bytes = 0;   // activations and scratch
};
MemoryEstimate estimate_engine_memory(const Model &model, const EngineOptions &opts);
// The placement across devices an engine with these options would run (nothing allocated); on one
// device, a plan without a backend.
PlacementPlan estimate_engine_placement(const Model &model, const EngineOptions &opts);

class Engine {
public:
    Engine(const Model &model, const EngineOptions &opts);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine &operator=(const Engine &) = delete;

    // Throws EMBER_ERR_INVALID_ARGUMENT unless tokens[0..n) is a prompt this engine can take (not empty,
    // shorter than n_ctx, ids in the vocabulary). Called before a caller's prompt is copied.
    void check_prompt(const int32_t *tokens, size_t n) const;
    // Validates (check_prompt) and queues. Throws EMBER_ERR_INVALID_ARGUMENT / EMBER_ERR_INVALID_STATE.
    void submit(const std::shared_ptr<Request> &r);

    // Embedding requests (engine_embed.cpp). On an embedding model its own pooling or another, on a
    // generating model mean or last pooling over its final normed hidden rows. Texts are token sequences
    // with the model's special tokens applied.
    struct EmbedRequestOptions {
        PoolingOptions pooling;
        uint32_t max_tokens = 0;   // 0: embed_max_tokens()
        bool truncate = false;
        // The texts are (query, document) pairs' tokens (rerank_pair_tokens) for a reranking model to score;
        // a reranking model takes only these, and they are for a reranking model only.
        bool pairs = false;
    };
    // The texts checked and fitted, the pooling resolved: what submit_embed queues. Throws
    // EMBER_ERR_INVALID_ARGUMENT (bad options, pairs for a model that does not rank or lone texts for one
    // that does, an empty text, one over max_tokens without truncate, a token outside the vocabulary) and
    // EMBER_ERR_UNSUPPORTED (a model whose program returns no rows to pool).
    std::unique_ptr<EmbedWork> embed_work(std::vector<std::vector<int32_t>> texts, const EmbedRequestOptions &o) const;
    void submit_embed(const std::shared_ptr<Request> &r);
    // The longest text a pass takes beside the running requests' decode tokens.
    uint32_t embed_max_tokens() const;
    // An engine on an embedding model: it takes embedding requests only.
    bool embeds_only() const { return model_.desc().embedding.outputs_hidden; }
    // Manual mode: one step; returns whether work remains.
    bool step();
    // Evaluates tokens and keeps them resident (see ember_engine_pin_prefix). Blocks.
    void pin_prefix(const int32_t *tokens, size_t n);

    struct Stats {
        uint32_t n_blocks_used = 0, n_blocks_cached = 0, n_running = 0, n_queued = 0;
        uint32_t n_window_blocks_used = 0, n_window_blocks_cached = 0;   // the window pool's, if any
        uint32_t n_embedding = 0;   // embedding requests with texts still to embed (in n_running too)
    };
    // The speculation an engine runs for the requests that ask for it (EMBER_SPEC_OFF: none).
    ember_spec_mode speculation() const { return drafter_ ? opts_.spec_mode : EMBER_SPEC_OFF; }
    // Read under the locks the step publishes them with; a snapshot between steps.
    Stats stats();

    const EnginePlan &plan() const { return plan_; }
    const Model &model() const { return model_; }
    // The backend the engine runs on (what AUTO or a device chose, never AUTO).
    ember_backend_kind backend_kind() const { return backend_kind_; }
    // Where the placement across devices put the model (its backend is null on one device).
    const PlacementPlan &placement() const { return placement_; }
    bool manual() const { return opts_.manual_step; }

private:
    bool step_locked();
    // Publishes the counts stats() reports and whether work remains (returned).
    bool publish();
    void worker_main();
    void fail_step(ember_status status, const char *message) noexcept;
    void admit();
    // Embedding requests in a step (engine_embed.cpp): take the new ones and drop the cancelled; put whole
    // texts into the batch within `budget` (at most `share` of it once one text is in); after the pass,
    // pool their rows and free their blocks; fail those of a failed step.
    void admit_embeds();
    void add_embed_texts(uint32_t &budget, uint32_t share, bool &starved);
    void finish_embed_texts();
    void fail_embeds(ember_status status, const char *message);
    // Ends a request: releases its KV sequence (unless keep_seq: a pinned prefix) and queues its final
    // state, which flush_ended() makes visible after the step published its stats, so whoever sees the
    // request end also sees the engine's counts without it.
    void finish(const std::shared_ptr<Request> &r, ember_request_state state, ember_status error = EMBER_OK,
                const std::string &message = {}, bool keep_seq = false);
    void flush_ended();
    void emit(Request &r, int32_t token);
    // The batch's tokens of a generating request: what a rollback left to feed again, its pending token
    // and its drafts; the number of logits rows (the last ones).
    uint32_t decode_tokens(Request &r, std::vector<int32_t> &out) const;
    // Samples a generating request's logits rows in order as plain decoding would, keeps the drafts the
    // draws agree with, rolls back the others, emits and ends what is done. `rows`: its logits rows;
    // `hidden`: the hidden rows of its tokens in the batch (nullptr without the MTP draft).
    void sample_decode(const std::shared_ptr<Request> &self, const float *rows, const float *hidden);
    // Rolls a request back to `keep` evaluated tokens after its drafts were rejected (engine_spec.hpp).
    void roll_back(Request &r, uint32_t keep, uint32_t pos_z);
    std::string pin_refusal(size_t blocks) const;   // "" when pins may hold `blocks` more

    const Model &model_;
    EngineOptions opts_;
    EnginePlan plan_;
    ember_backend_kind backend_kind_ = EMBER_BACKEND_CPU;
    PlacementPlan placement_;
    std::unique_ptr<BackendContext> ctx_;
    kv::BlockPool pool_;
    std::unique_ptr<kv::BlockPool> window_pool_;   // with plan_.n_window_blocks: the window layers' blocks
    // A recurrent model's state slots: the running requests' (free ones here) and the snapshots'.
    std::vector<int32_t> free_states_;
    std::unique_ptr<StateSnapshots> snapshots_;
    std::vector<int32_t> b_state_slots_, b_state_src_;
    // The prompt position at which a request's state is kept as a snapshot: its last whole block boundary.
    uint32_t snapshot_point(const Request &r) const;
    // Admission on a recurrent model: the adopted prefix cut back to the longest one with a snapshot,
    // whose state the request starts from; returns the tokens kept.
    uint32_t adopt_state(Request &r, kv::KvSequence &seq, uint32_t adopted);

    std::mutex queue_mutex_;
    std::condition_variable queue_cv_;
    std::deque<std::shared_ptr<Request>> queue_;
    bool stop_ = false;
    // Pool and slot counts as of the end of the last step, under queue_mutex_ (the worker waits on
    // n_running too).
    Stats published_;

    std::mutex step_mutex_;            // one step at a time (manual mode, pin_prefix)
    std::vector<std::shared_ptr<Request>> active_;
    std::vector<std::shared_ptr<Request>> pinned_;
    // Batch buffers, reused every step.
    std::vector<int32_t> b_tokens_, b_pos_, b_logit_rows_;
    std::vector<const int32_t *> b_tables_, b_window_tables_;
    // Each request in the batch: its first row, token count, and first logits row (n_logits of them).
    struct Fed {
        std::shared_ptr<Request> r;
        uint32_t row = 0, n = 0, logits_row = 0, n_logits = 0;
    };
    std::vector<Fed> b_fed_;
    std::vector<int32_t> b_decode_;   // a generating request's tokens (decode_tokens)
    std::vector<float> hidden_;       // the batch's hidden rows, for the MTP draft and embedding texts
    // Embedding requests: submitted (under queue_mutex_), then the engine thread's until they end.
    std::deque<std::shared_ptr<Request>> embed_queue_;
    std::vector<std::shared_ptr<Request>> embeds_;
    // Each embedding text in the batch: its first row and length, its first output row (an embedding
    // model's pooled rows), and the sequence that holds its K/V rows for this pass only.
    struct EmbedFed {
        std::shared_ptr<Request> r;
        size_t text = 0;
        uint32_t row = 0, n = 0, out_row = 0;
        std::unique_ptr<kv::KvSequence> seq;
        std::unique_ptr<kv::WindowTable> win;
    };
    std::vector<EmbedFed> b_embed_;
    uint32_t hidden_width_ = 0;       // the program's hidden rows (a generating model's final normed state)
    struct Ended {
        std::shared_ptr<Request> request;
        ember_request_state state;
        ember_status error;
        std::string message;
        std::string tail;  // text held back by the UTF-8 stream
    };
    std::vector<Ended> ended_;
    std::vector<float> logits_;
    std::unique_ptr<EngineDrafter> drafter_;   // with speculation

    std::thread worker_;
};

} // namespace ember
