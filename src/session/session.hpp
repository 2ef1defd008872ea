// session.hpp — one sequence on one model: its share of a KV cache, the tokens so far, the logits of
// the last one, and the streaming text state of generation. Sessions forked from one another share
// one KV cache (SessionKv): blocks they have in common are stored once.
#pragma once

#include "backend/backend.hpp"
#include "backend/placement.hpp"
#include "kv/kv_sequence.hpp"
#include "kv/window_table.hpp"
#include "model/model.hpp"
#include "sampler/sampler.hpp"
#include "tokenizer/tokenizer.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ember {

struct SessionOptions {
    uint32_t n_ctx = 0;          // 0: the trained context, capped at kDefaultMaxCtx
    uint32_t n_threads = 0;      // 0: physical cores, at most 8
    uint32_t n_batch = 256;
    uint64_t seed = 0;
    ember_backend_kind backend = EMBER_BACKEND_AUTO;
    uint32_t n_seq_max = 1;      // sequences (forks) the shared cache is sized for
    DType kv_type = DType::F16;
    // Run on this session's worker threads instead of starting new ones (same backend only; see
    // ContextParams::share_threads_with): for a speculative draft, which takes turns with its target.
    const class Session *share_threads_with = nullptr;
    // The model's fingerprint for saved states, computed once and shared by every session on the model
    // (the ember_model handle owns it); null: this session and its forks compute their own on first use.
    std::shared_ptr<class ModelFingerprint> fingerprint;
    // Sliding-window layers' K/V rows in blocks of their own, released once no pass can read them
    // (kv/window_table.hpp), where the backend supports it (Backend::window_blocks) and the window is well inside
    // n_ctx. false: every layer's rows stay in the main blocks (tests compare the two).
    bool window_blocks = true;
    // Placement across devices (backend/placement.hpp): GPU layers, experts on the CPU, the GPU budget. With
    // a GPU backend and a request that splits, the session runs the placement plan_placement chooses.
    PlacementRequest placement;
    // A backend to run on instead of `backend` (a placement's, from plan_placement): tests and engines.
    Backend *placed = nullptr;
    // A model with recurrent layers on a backend that keeps per-token states (Backend::keep_states): the
    // states a feed asked to keep them (feed's keep_states) holds besides its two, for truncate() to take
    // instead of re-feeding (kKeptStates: a speculative verifying pass at the default draft length).
    uint32_t kept_states = kKeptStates;
    static constexpr uint32_t kKeptStates = EMBER_SESSION_KEPT_STATES;
};

// The KV cache of a session and its forks: one backend context, one block pool, and the lock that
// serializes their use of both (forks may be used from different threads).
struct SessionKv {
    std::unique_ptr<BackendContext> ctx;
    std::unique_ptr<kv::BlockPool> pool;
    // The sliding-window layers' blocks (kv/window_table.hpp), when the backend keeps them apart: null
    // otherwise. Their ids follow the pool's in the backend's copy_block.
    std::unique_ptr<kv::BlockPool> window_pool;
    uint32_t window = 0, window_keep = 0;
    uint64_t context_bytes = 0;   // what the backend allocated for ctx (Backend::context_bytes)
    // The recurrent states' free slots (a model with recurrent layers: two a sequence and its kept
    // states, see Session).
    std::vector<int32_t> free_states;
    uint32_t kept_states = 0;   // SessionOptions::kept_states where the backend keeps them, else 0
    std::mutex mutex;
};

// Result of one generation step.
struct GenStep {
    int32_t token = -1;
    bool end_of_generation = false;
    std::string text;            // whole UTF-8 characters completed by this step
};

class Session {
public:
    static constexpr uint32_t kDefaultMaxCtx = 4096;

    // Throws EMBER_ERR_INVALID_ARGUMENT (vocab-only model, bad options), EMBER_ERR_UNSUPPORTED (backend).
    Session(const Model &model, const SessionOptions &opts);
    ~Session();
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;

    // A new session that continues from this one's state (tokens, logits, text state), sharing its KV
    // blocks: writes after the fork copy a shared partial block first.
    std::unique_ptr<Session> fork();

    // Evaluates tokens after the current position in chunks of n_batch; keeps the last logits, and
    // with all_logits (n rows of n_vocab) every token's (a speculative verifier scores each drafted
    // position). EMBER_ERR_OUT_OF_MEMORY, evaluating nothing, when the cache shared with forks has too
    // few free blocks.
    // With `cancel`: checked between chunks and handed to the backend (which checks it between layers);
    // when it is set the feed throws EMBER_ERR_CANCELLED and leaves the session as it was before.
    // With keep_states (a model with recurrent layers; a speculative verifying pass): the passes also
    // leave the state after each of the feed's first kept_states() tokens (but its last) in slots of their
    // own, so that truncate() to a position inside the feed takes one instead of re-feeding.
    void feed(const int32_t *tokens, size_t n, float *all_logits = nullptr, const std::atomic<bool> *cancel = nullptr,
              bool keep_states = false);
    // The states a feed can keep (SessionOptions::kept_states; 0: none, a model without recurrent layers
    // or a backend that does not keep them).
    uint32_t kept_states() const { return static_cast<uint32_t>(kept_.size()); }
    // Forward passes run so far (feeds and the re-feeding of truncate): what a rollback cost.
    uint64_t passes() const { return passes_; }
    // The tokens evaluated so far.
    const std::vector<int32_t> &tokens() const { return seq_->tokens(); }
    // The text a generated token completes (whole UTF-8 characters), advancing the session's text
    // stream; for an end-of-generation token, what the stream still held back.
    std::string text_of(int32_t token);
    // nullptr before the first feed and after truncate.
    const float *logits() const { return logits_valid_ ? logits_.data() : nullptr; }
    uint32_t n_vocab() const { return model_.desc().hp.n_vocab; }
    uint32_t position() const { return seq_->size(); }
    uint32_t n_ctx() const { return n_ctx_; }
    // Forgets the tokens from position n on. A model with recurrent layers (Qwen3.5) keeps no state per
    // position, only those of the last feed: its start's, and with keep_states the states after its first
    // tokens. It takes the one at n when there is one (a speculative rollback: no forward pass), else it
    // re-evaluates tokens to reach n from the latest of them before n, or from position 0 when n is
    // before the last feed (every token up to n: as costly as feeding them).
    void truncate(uint32_t n);
    // Truncates and takes `logits` (n_vocab floats, computed for the n-th token by an earlier feed with
    // all_logits) as the current logits, sparing the re-evaluation of that token. Unlike truncate(n),
    // keeps the text stream: it rolls back tokens that were evaluated but never emitted (speculation).
    void truncate(uint32_t n, const float *logits);

    // The session's state (tokens, KV rows, last logits) as bytes; restore() validates such bytes
    // completely (EMBER_ERR_CORRUPT_DATA otherwise, leaving the session unchanged) and replaces the state.
    // (Not const: a session whose long feed was cancelled first re-evaluates its window layers' rows,
    // see ensure_window.)
    std::vector<uint8_t> save();
    void restore(const uint8_t *data, size_t size);
    // Reads a saved state from a file header first: what the header says (model, cache layout, length,
    // context) is checked against the session and the file's size before the rest is read, so that a
    // huge or foreign file costs one small read. Not a regular file (a directory, a device): EMBER_ERR_IO.
    void restore_file(const char *path);

    // Samples from the current logits, records the token in the sampler, feeds it unless it ends
    // generation, and returns it with the text it completes.
    GenStep next(Sampler &sampler);

    const Model &model() const { return model_; }
    // Blocks the session's window table holds (0 when its window layers' rows are in the main blocks),
    // and the window pool's size (0 without one): what bounds the window layers' KV memory.
    uint32_t window_blocks_held() const { return win_ ? win_->n_held() : 0; }
    uint32_t window_pool_blocks() const { return kv_->window_pool ? kv_->window_pool->n_blocks() : 0; }
    // Bytes of the backend context (KV cache and activations; device memory on a GPU) this session and
    // its forks share.
    uint64_t context_bytes() const { return kv_->context_bytes; }
    ember_backend_kind backend_kind() const { return backend_kind_; }
    // The backend context whose worker threads another context may share (ContextParams::share_threads_with).
    const BackendContext *threads_context() const { return kv_->ctx.get(); }
    // Where the placement across devices put the model (its backend is null on one device), and what was asked.
    const PlacementPlan &placement() const { return placement_; }
    const PlacementRequest &placement_request() const { return placement_request_; }
    // EMBER_PRECISION_* for the passes from now on (ember_session_set_precision); EMBER_ERR_UNSUPPORTED
    // for EMBER_PRECISION_HIGH on a backend without it (Backend::precision_high).
    void set_precision(uint32_t precision);
    uint32_t precision() const { return precision_; }

    // Hidden rows (a model whose program returns them: model_desc.hpp's hidden_buf, the state a
    // multi-token-prediction block reads): with keep_hidden(true) (a no-op when on) every feed from now on also records
    // each token's hidden row, and truncation forgets them with their tokens. hidden_row(p) is
    // position p's row (hidden_width() floats), or nullptr where none was recorded (before keep_hidden
    // was turned on, or past position()). EMBER_ERR_UNSUPPORTED for a model without hidden rows.
    void keep_hidden(bool on);
    const float *hidden_row(uint32_t pos) const;
    uint32_t hidden_width() const { return hidden_width_; }

private:
    struct ForkTag {};
    Session(const Session &parent, ForkTag);
    void feed_locked(const int32_t *tokens, size_t n, float *all_logits, const std::atomic<bool> *cancel = nullptr,
                     bool keep_states = false);
    kv::CopyBlockFn copy_fn() const;
    kv::CopyBlockFn window_copy_fn() const;
    // The block table read_kv/write_kv take for positions 0..n-1 (the window table's after the main one's
    // when the window layers have their own, see backend.hpp).
    std::vector<int32_t> io_table(const kv::KvSequence &seq, const kv::WindowTable *win, uint32_t n) const;
    // truncate()'s common part: cuts the cache to n tokens, re-evaluating them when the window layers'
    // rows a pass at n would read were already released.
    void truncate_kv(uint32_t n);
    // After a feed of several passes was rolled back (cancelled, failed), the window table may lack rows
    // a pass at position() reads (they were released as the feed went on): then this re-evaluates the
    // tokens so far (keeping the logits). Called before anything reads the window table.
    void ensure_window();
    // A recurrent model's states (state_floats > 0): the sequence's state in cur_state_ (at position();
    // none is read at position 0, whose state is zero), and a second slot that a feed writes, taking its
    // passes' state there and swapping the two only once every pass succeeded — so a cancelled or failed
    // feed leaves cur_state_ as it was, and after a feed work_state_ holds the state at the feed's start
    // (checkpoint_, -1 when it holds none): what truncate() goes back to and re-feeds from. A feed with
    // keep_states also leaves the state at position checkpoint_ + 1 + i in kept_[i], i < n_kept_; taking
    // one swaps its slot number with cur_state_ (no copy).
    bool has_state() const { return cur_state_ >= 0; }
    void take_state_slots();   // two slots and the kept ones from the shared free list, or EMBER_ERR_OUT_OF_MEMORY
    void release_state_slots();
    // truncate()'s part for a recurrent model: the state at n from the checkpoint or from the start.
    void truncate_state(uint32_t n);
    // Drops the hidden rows of positions n and later.
    void forget_hidden(uint32_t n);

    // Checks a saved state's header (the first min(size, 48) bytes are at data) against this session and
    // a total size of `size` bytes; returns the header's length. Throws as restore() does.
    uint32_t check_state_header(const uint8_t *data, size_t size) const;

    const Model &model_;
    uint32_t n_ctx_ = 0, n_batch_ = 0;
    DType kv_type_ = DType::F16;
    ember_backend_kind backend_kind_ = EMBER_BACKEND_CPU;   // the backend that runs this session
    PlacementPlan placement_;
    PlacementRequest placement_request_;
    bool precision_high_ok_ = false;                         // its Backend::precision_high()
    uint32_t precision_ = 0;                                 // EMBER_PRECISION_*
    // A session is one sequence in a block pool (shared with its forks only), evaluated by the same
    // batched, paged forward pass the engine uses for many sequences. seq_ is released under the lock
    // before kv_ goes.
    std::shared_ptr<SessionKv> kv_;
    std::shared_ptr<ModelFingerprint> fingerprint_;   // see SessionOptions::fingerprint
    std::unique_ptr<kv::KvSequence> seq_;
    std::unique_ptr<kv::WindowTable> win_;   // with kv_->window_pool: the window layers' rows
    bool window_stale_ = false;              // win_ was emptied by a rollback: see ensure_window
    int32_t cur_state_ = -1, work_state_ = -1;
    int64_t checkpoint_ = -1;
    std::vector<int32_t> kept_;   // the kept states' slots (kv_->kept_states of them)
    uint32_t n_kept_ = 0;         // how many of them hold a state of the last feed
    uint64_t passes_ = 0;
    std::vector<int32_t> pos_, rows_, state_slots_, state_src_, state_keep_;
    std::vector<const int32_t *> tables_, window_tables_;
    std::vector<float> logits_;
    bool logits_valid_ = false;
    Utf8Stream utf8_;
    // keep_hidden's rows: positions hidden_start_ .. hidden_start_ + rows - 1 (hidden_width_ 0: off).
    uint32_t hidden_width_ = 0, hidden_start_ = 0;
    std::vector<float> hidden_;
};

uint32_t default_thread_count();

} // namespace ember
