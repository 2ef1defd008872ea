#include "session/session.hpp"

#include "core/error.hpp"
#include "core/host_memory.hpp"
#include "backend/window_layers.hpp"
#include "session/model_fingerprint.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>

namespace ember {

uint32_t default_thread_count() {
    // Physical cores: count distinct (package, core) pairs; SMT siblings share the memory bandwidth
    // that decode is bound by, so they rarely help.
    std::set<std::pair<int, int>> cores;
    for (unsigned cpu = 0; cpu < 1024; ++cpu) {
        const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
        std::ifstream pkg(base + "physical_package_id"), core(base + "core_id");
        int p = 0, c = 0;
        if (!(pkg >> p) || !(core >> c)) break;
        cores.insert({p, c});
    }
    uint32_t n = static_cast<uint32_t>(cores.size());
    if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
    return std::min(n, 8u);
}

namespace {

// How far back a session can truncate without re-evaluating tokens (kv/window_table.hpp's keep): more
// than a speculative draft, which is what rolls back in the normal course of generation.
constexpr uint32_t kWindowKeep = 64;

} // namespace

Session::Session(const Model &model, const SessionOptions &opts)
    : model_(model), fingerprint_(opts.fingerprint ? opts.fingerprint : std::make_shared<ModelFingerprint>()) {
    if (model.vocab_only())
        fail(EMBER_ERR_INVALID_ARGUMENT, "the model was loaded vocab-only; load it with weights to create a session");
    refuse_embedding_model(model, "sessions");
    const HParams &hp = model.desc().hp;
    n_ctx_ = opts.n_ctx ? opts.n_ctx : std::min(hp.n_ctx_train ? hp.n_ctx_train : kDefaultMaxCtx, kDefaultMaxCtx);
    if (n_ctx_ > (1u << 24)) fail(EMBER_ERR_INVALID_ARGUMENT, "n_ctx %u is too large", n_ctx_);
    n_batch_ = std::min(opts.n_batch ? opts.n_batch : 256u, n_ctx_);
    const uint32_t n_threads = opts.n_threads ? opts.n_threads : default_thread_count();
    if (n_threads > 256) fail(EMBER_ERR_INVALID_ARGUMENT, "n_threads %u is too large", n_threads);
    const uint32_t n_seq = opts.n_seq_max ? opts.n_seq_max : 1;
    if (n_seq > 4096) fail(EMBER_ERR_INVALID_ARGUMENT, "n_seq_max %u is too large", n_seq);
    kv_type_ = opts.kv_type;
    Backend *backend = opts.placed ? opts.placed : &backend_require(opts.backend);
    // One spare block per sequence: rolling back into a block that was already full and published makes
    // the next write copy it first (copy-on-write), which briefly needs one block more than the context.
    const uint64_t n_blocks = uint64_t{n_seq} * ((n_ctx_ + kv::kBlockSize - 1) / kv::kBlockSize + 1);
    if (n_blocks > (1u << 30)) fail(EMBER_ERR_INVALID_ARGUMENT, "n_ctx %u x n_seq_max %u is too large", n_ctx_, n_seq);
    backend_kind_ = backend->kind();
    precision_high_ok_ = backend->precision_high();
    ContextParams cp;
    cp.n_blocks = static_cast<uint32_t>(n_blocks);
    cp.block_size = kv::kBlockSize;
    cp.n_threads = n_threads;
    cp.n_batch = n_batch_;
    cp.n_logits = n_batch_;   // feed() with all_logits: one row per token of a chunk
    cp.kv_type = kv_type_;
    if (opts.share_threads_with) cp.share_threads_with = opts.share_threads_with->kv_->ctx.get();
    // Window layers' rows in a pool of their own, released as the sequences move past them, when that
    // pool is smaller than the main one (the window is well inside the context) and the backend keeps
    // them apart (Backend::window_blocks: the CPU, Vulkan and CUDA modules of this tree). One sequence more
    // than n_seq_max: forks that share most of their blocks fit in the main pool's spare blocks, but
    // once they have moved a window apart they share no window block.
    const WindowLayers wl = window_layers(model.desc().c);
    const uint32_t window = wl.window;
    if (opts.window_blocks && wl.n_layers > 0 && backend->window_blocks())
        cp.n_window_blocks = kv::WindowTable::pool_blocks(window, kWindowKeep, n_batch_, 0, n_seq, n_blocks);
    // Recurrent layers: two states a sequence (the current one and the one a feed writes), and the states
    // a feed may keep per token (see feed) where the backend keeps them.
    uint32_t kept = 0;
    if (state_bytes(model.desc().c) > 0) {
        if (!backend->recurrent_state())
            fail(EMBER_ERR_UNSUPPORTED, "the %s backend does not run models with recurrent layers (%s)", backend->name(),
                 model.desc().arch.c_str());
        // $EMBER_KEPT_STATES (0..64) replaces the count: 0 saves the memory and rollbacks re-feed
        // (bench/rollback_cost.c compares the two).
        kept = opts.kept_states;
        if (const char *env = std::getenv("EMBER_KEPT_STATES"); env && env[0]) kept = static_cast<uint32_t>(std::atoi(env));
        if (kept > 64) fail(EMBER_ERR_INVALID_ARGUMENT, "%u kept states is too many (at most 64)", kept);
        if (!backend->keep_states()) kept = 0;
        cp.n_state_slots = (2 + kept) * n_seq;
    }
    placement_request_ = opts.placement;
    if (!opts.placed && opts.placement.split() && backend->kind() != EMBER_BACKEND_CPU) {
        // Across devices (backend/placement.hpp): refused here, before anything is allocated, when it cannot fit.
        placement_ = plan_placement(model.desc_for(n_ctx_).c, *backend, cp, opts.placement);
        backend = placement_.backend;
        log_msg(&model.log(), EMBER_LOG_INFO, "placement: %s", placement_.describe().c_str());
        backend_kind_ = backend->kind();
        precision_high_ok_ = backend->precision_high();
    }
    const uint64_t context_bytes = backend->context_bytes(model.desc().c, cp);
    {
        const uint64_t bytes = context_bytes + uint64_t{hp.n_vocab} * sizeof(float);
        const std::string what = format("a session of n_ctx %u x n_seq_max %u", n_ctx_, n_seq);
        if (placement_.backend && placement_.gpu_layers > 0 && backend_kind_ != EMBER_BACKEND_CPU) {
            // Across devices: the GPU's part was held to its budget by plan_placement; the CPU's part here.
            check_host_memory(placement_.cpu_context, (what + ", its part on the CPU").c_str());
        } else if (backend_kind_ == EMBER_BACKEND_CPU) {
            const uint64_t weights = model.cpu_weights_reserve(bytes);   // the first CPU user copies them (model.hpp)
            check_host_memory(bytes + weights, (what + (weights ? " with its huge-page copy of the weights" : "")).c_str());
        } else {
            check_device_memory(bytes, backend->device_memory_available(),
                                format("%s device memory", backend->name()).c_str(), what.c_str());
        }
    }
    kv_ = std::make_shared<SessionKv>();
    kv_->context_bytes = context_bytes;
    kv_->kept_states = kept;
    kv_->ctx = model.backend_model(*backend, n_ctx_).create_context(cp);   // LongRoPE: its long factors past the original context
    kv_->pool = std::make_unique<kv::BlockPool>(cp.n_blocks, kv::kBlockSize);
    seq_ = std::make_unique<kv::KvSequence>(*kv_->pool);
    if (cp.n_window_blocks > 0) {
        kv_->window_pool = std::make_unique<kv::BlockPool>(cp.n_window_blocks, kv::kBlockSize);
        kv_->window = window, kv_->window_keep = kWindowKeep;
        win_ = std::make_unique<kv::WindowTable>(*kv_->window_pool, window, kWindowKeep);
        window_tables_.resize(n_batch_);
    }
    for (uint32_t i = cp.n_state_slots; i-- > 0;) kv_->free_states.push_back(static_cast<int32_t>(i));
    if (cp.n_state_slots > 0) take_state_slots();
    logits_.resize(hp.n_vocab);
    pos_.resize(n_batch_);
    rows_.resize(n_batch_);
    tables_.resize(n_batch_);
    for (uint32_t i = 0; i < n_batch_; ++i) rows_[i] = static_cast<int32_t>(i);
}

void Session::take_state_slots() {
    // The caller holds kv_->mutex (or is the constructor).
    if (kv_->free_states.size() < 2 + size_t{kv_->kept_states})
        fail(EMBER_ERR_OUT_OF_MEMORY,
             "the recurrent states this session shares with its forks are all in use (create the session with a "
             "larger n_seq_max)");
    cur_state_ = kv_->free_states.back();
    kv_->free_states.pop_back();
    work_state_ = kv_->free_states.back();
    kv_->free_states.pop_back();
    kept_.assign(kv_->free_states.end() - kv_->kept_states, kv_->free_states.end());
    kv_->free_states.resize(kv_->free_states.size() - kv_->kept_states);
    n_kept_ = 0;
    state_slots_.resize(n_batch_);
    state_src_.resize(n_batch_);
    state_keep_.assign(kept_.empty() ? 0 : n_batch_, -1);
}

void Session::release_state_slots() {
    if (!has_state()) return;
    kv_->free_states.insert(kv_->free_states.end(), kept_.begin(), kept_.end());
    kv_->free_states.push_back(work_state_);
    kv_->free_states.push_back(cur_state_);
    cur_state_ = work_state_ = -1;
    kept_.clear();
    n_kept_ = 0;
}

Session::Session(const Session &parent, ForkTag)
    : model_(parent.model_), n_ctx_(parent.n_ctx_), n_batch_(parent.n_batch_), kv_type_(parent.kv_type_),
      backend_kind_(parent.backend_kind_), precision_high_ok_(parent.precision_high_ok_), precision_(parent.precision_),
      kv_(parent.kv_), fingerprint_(parent.fingerprint_), logits_(parent.logits_), logits_valid_(parent.logits_valid_), utf8_(parent.utf8_) {
    // The caller holds kv_->mutex.
    seq_ = std::make_unique<kv::KvSequence>(parent.seq_->fork());
    if (parent.win_) win_ = std::make_unique<kv::WindowTable>(parent.win_->fork());
    window_stale_ = parent.window_stale_;   // then each rebuilds its own on first use
    placement_ = parent.placement_;
    placement_request_ = parent.placement_request_;
    if (parent.has_state()) {
        take_state_slots();
        try {
            if (parent.position() > 0) kv_->ctx->copy_state(parent.cur_state_, cur_state_);
        } catch (...) {
            release_state_slots();
            throw;
        }
    }
    pos_.resize(n_batch_);
    rows_ = parent.rows_;
    tables_.resize(n_batch_);
    window_tables_.resize(parent.window_tables_.size());
}

void Session::set_precision(uint32_t precision) {
    if (precision > EMBER_PRECISION_HIGH) fail(EMBER_ERR_INVALID_ARGUMENT, "unknown precision %u", precision);
    if (precision == EMBER_PRECISION_HIGH && !precision_high_ok_)
        fail(EMBER_ERR_UNSUPPORTED, "EMBER_PRECISION_HIGH: the %s backend rounds activations to 8 bits only",
             backend_kind_ == EMBER_BACKEND_CUDA ? "CUDA" : backend_kind_ == EMBER_BACKEND_VULKAN ? "Vulkan" : "CPU");
    precision_ = precision;
}

Session::~Session() {
    std::lock_guard<std::mutex> lock(kv_->mutex);
    release_state_slots();
    win_.reset();
    seq_.reset();
}

std::unique_ptr<Session> Session::fork() {
    std::lock_guard<std::mutex> lock(kv_->mutex);
    return std::unique_ptr<Session>(new Session(*this, ForkTag{}));
}

kv::CopyBlockFn Session::copy_fn() const {
    BackendContext *ctx = kv_->ctx.get();
    return [ctx](int32_t src, int32_t dst) { ctx->copy_block(src, dst); };
}

kv::CopyBlockFn Session::window_copy_fn() const {
    // The backend numbers the window pool's blocks after the main pool's (backend.hpp).
    BackendContext *ctx = kv_->ctx.get();
    const auto base = static_cast<int32_t>(kv_->pool->n_blocks());
    return [ctx, base](int32_t src, int32_t dst) { ctx->copy_block(base + src, base + dst); };
}

std::vector<int32_t> Session::io_table(const kv::KvSequence &seq, const kv::WindowTable *win, uint32_t n) const {
    const size_t nb = (size_t{n} + kv::kBlockSize - 1) / kv::kBlockSize;
    std::vector<int32_t> t(seq.blocks().begin(), seq.blocks().begin() + static_cast<std::ptrdiff_t>(nb));
    if (win) t.insert(t.end(), win->blocks().begin(), win->blocks().begin() + static_cast<std::ptrdiff_t>(nb));
    return t;
}

void Session::feed(const int32_t *tokens, size_t n, float *all_logits, const std::atomic<bool> *cancel, bool keep_states) {
    if (n == 0) return;
    std::lock_guard<std::mutex> lock(kv_->mutex);
    feed_locked(tokens, n, all_logits, cancel, keep_states);
}

void Session::feed_locked(const int32_t *tokens, size_t n, float *all_logits, const std::atomic<bool> *cancel,
                          bool keep_states) {
    if (n > n_ctx_ - position())
        fail(EMBER_ERR_CONTEXT_FULL, "%zu tokens do not fit: %u of %u context positions are used", n, position(), n_ctx_);
    const int32_t n_vocab = static_cast<int32_t>(model_.desc().hp.n_vocab);
    ensure_window();
    for (size_t i = 0; i < n; ++i)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            fail(EMBER_ERR_INVALID_ARGUMENT, "token %d at index %zu is outside the vocabulary (0..%d)", tokens[i], i, n_vocab - 1);
    // Every block the whole feed needs, up front: a cache shared with forks can run short, and then
    // nothing is evaluated.
    if (!seq_->reserve(static_cast<uint32_t>(n), copy_fn()))
        fail(EMBER_ERR_OUT_OF_MEMORY,
             "the KV cache this session shares with its forks has too few free blocks for %zu more tokens "
             "(create the session with a larger n_seq_max)",
             n);
    const uint32_t start = position();
    const bool had_logits = logits_valid_;
    // The states this feed keeps: after each of its first tokens but the last (whose state is the current
    // one afterwards), as many as there are slots. The last feed's kept states are gone from here on.
    const size_t n_keep = keep_states && has_state() ? std::min(n - 1, kept_.size()) : 0;
    n_kept_ = 0;
    // A feed is all or nothing: when it stops early — cancelled, or a pass failed (a device lost, memory
    // a module could not get) — the chunks it already evaluated are forgotten, so the caller can retry
    // or go on from exactly where it was. The old logits survive unless the failing pass was the one
    // that writes them (the last chunk), which may have left them half written.
    bool logits_pass = false;
    if (hidden_width_) {
        if (start < hidden_start_) hidden_start_ = start, hidden_.clear();
        hidden_.resize((size_t{start} + n - hidden_start_) * hidden_width_);
    }
    const auto roll_back = [&](bool logits_untouched) {
        forget_hidden(start);
        seq_->truncate(start);
        if (win_ && win_->can_truncate(start)) {
            win_->truncate(start);
        } else if (win_) {
            // The passes released window rows a pass at `start` reads: rebuilt before the next use
            // (ensure_window), so that a cancellation stays quick.
            win_->truncate(0);
            window_stale_ = true;
        }
        logits_valid_ = had_logits && (logits_untouched || !logits_pass);
        // The passes wrote work_state_ (and kept slots): it no longer holds the last feed's start.
        checkpoint_ = -1;
    };
    try {
        logits_valid_ = false;
        for (size_t off = 0; off < n; off += n_batch_) {
            if (cancel && cancel->load(std::memory_order_relaxed))
                fail(EMBER_ERR_CANCELLED, "the feed was cancelled (ember_session_cancel)");
            const uint32_t chunk = static_cast<uint32_t>(std::min<size_t>(n_batch_, n - off));
            // The window table grows one pass at a time (it releases what the pass leaves behind).
            if (win_ && !win_->reserve(chunk, window_copy_fn()))
                fail(EMBER_ERR_OUT_OF_MEMORY,
                     "the window layers' KV blocks this session shares with its forks ran short "
                     "(create the session with a larger n_seq_max)");
            const int32_t *table = seq_->blocks().data();
            for (uint32_t i = 0; i < chunk; ++i) {
                pos_[i] = static_cast<int32_t>(position() + i);
                tables_[i] = table;
                if (win_) window_tables_[i] = win_->blocks().data();
            }
            const int32_t last_row = static_cast<int32_t>(chunk - 1);
            Batch b;
            b.n_tokens = chunk;
            b.tokens = tokens + off;
            b.pos = pos_.data();
            b.tables = tables_.data();
            if (all_logits) {
                b.n_logits = chunk;
                b.logits_rows = rows_.data();
                b.logits = all_logits + off * logits_.size();
            } else if (off + chunk == n) {
                b.n_logits = 1;
                b.logits_rows = &last_row;
                b.logits = logits_.data();
                logits_pass = true;
            }
            b.cancel = cancel;
            if (hidden_width_) b.hidden = hidden_.data() + (size_t{position()} - hidden_start_) * hidden_width_;
            if (win_) b.window_tables = window_tables_.data();
            b.precision = precision_;
            if (has_state()) {
                // The feed's passes write work_state_: the first reads the current state (none at position 0).
                const int32_t src = off > 0 ? work_state_ : start > 0 ? cur_state_ : -1;
                std::fill_n(state_slots_.begin(), chunk, work_state_);
                std::fill_n(state_src_.begin(), chunk, src);
                b.state_slots = state_slots_.data();
                b.state_src = state_src_.data();
                if (n_keep > off) {
                    // Token off + i keeps its state in kept_[off + i] (the pass's other tokens: none).
                    const size_t k = std::min<size_t>(chunk, n_keep - off);
                    std::copy_n(kept_.begin() + static_cast<std::ptrdiff_t>(off), k, state_keep_.begin());
                    std::fill(state_keep_.begin() + static_cast<std::ptrdiff_t>(k), state_keep_.begin() + chunk, -1);
                    b.state_keep = state_keep_.data();
                }
            }
            ++passes_;
            kv_->ctx->forward(b);
            seq_->commit(tokens + off, chunk);
            if (win_) win_->commit(chunk);
        }
    } catch (const Error &e) {
        // Cancellation is checked before a pass writes its logits (after its last layer), so a cancelled
        // pass never touched them.
        roll_back(e.status() == EMBER_ERR_CANCELLED);
        throw;
    } catch (...) {
        roll_back(false);
        throw;
    }
    if (has_state()) {
        std::swap(cur_state_, work_state_);
        checkpoint_ = start;
        n_kept_ = static_cast<uint32_t>(n_keep);
    }
    if (all_logits) std::copy_n(all_logits + (n - 1) * logits_.size(), logits_.size(), logits_.data());
    logits_valid_ = true;
}

void Session::ensure_window() {
    if (!window_stale_) return;
    // Evaluates the tokens again from position 0 (global rows are rewritten with the same values), keeping
    // the logits and text state of the rolled-back session. If that fails the session is left empty.
    const std::vector<float> logits = logits_;
    const bool valid = logits_valid_;
    truncate_kv(position());
    logits_ = logits;
    logits_valid_ = valid;
}

void Session::truncate_state(uint32_t n) {
    if (n == position() && !window_stale_) return;
    // From the latest state the last feed left at most n: a kept one (checkpoint_ + 1 + i, kept_[i]), its
    // start's (checkpoint_, work_state_), else the start; the KV rows of the positions re-fed are written
    // again with the same values. If that feed fails the session is left at `from`.
    bool from_checkpoint = checkpoint_ >= 0 && static_cast<uint64_t>(checkpoint_) <= n;
    uint32_t from = from_checkpoint ? static_cast<uint32_t>(checkpoint_) : 0;
    int32_t *base = &work_state_;
    if (from_checkpoint && n > from && n_kept_ > 0) {
        const uint32_t i = std::min(n - from, n_kept_) - 1;
        base = &kept_[i];
        from += i + 1;
    }
    if (win_ && from > 0 && (window_stale_ || !win_->can_truncate(from))) from_checkpoint = false, from = 0;
    const std::vector<int32_t> keep(seq_->tokens().begin() + from, seq_->tokens().begin() + n);
    forget_hidden(from);
    seq_->truncate(from);
    if (win_) {
        win_->truncate(from);
        window_stale_ = false;
    }
    if (from_checkpoint) std::swap(cur_state_, *base);
    checkpoint_ = -1;
    n_kept_ = 0;
    logits_valid_ = false;
    if (!keep.empty()) feed_locked(keep.data(), keep.size(), nullptr);
}

void Session::truncate_kv(uint32_t n) {
    if (has_state()) {
        truncate_state(n);
        return;
    }
    if (!win_ || (!window_stale_ && win_->can_truncate(n))) {
        forget_hidden(n);
        seq_->truncate(n);
        if (win_) win_->truncate(n);
        return;
    }
    // The window layers' rows that a pass at n reads were released: evaluate the n tokens again (from
    // the start, as every earlier window's rows are gone too). If that fails the session is left empty.
    const std::vector<int32_t> keep(seq_->tokens().begin(), seq_->tokens().begin() + n);
    forget_hidden(0);
    seq_->truncate(0);
    win_->truncate(0);
    window_stale_ = false;
    logits_valid_ = false;
    if (n > 0) feed_locked(keep.data(), keep.size(), nullptr);
}

void Session::truncate(uint32_t n) {
    std::lock_guard<std::mutex> lock(kv_->mutex);
    if (n > position()) fail(EMBER_ERR_INVALID_ARGUMENT, "cannot truncate to %u tokens: the session has %u", n, position());
    truncate_kv(n);
    logits_valid_ = false;
    utf8_.reset();
}

void Session::truncate(uint32_t n, const float *logits) {
    std::lock_guard<std::mutex> lock(kv_->mutex);
    if (n > position()) fail(EMBER_ERR_INVALID_ARGUMENT, "cannot truncate to %u tokens: the session has %u", n, position());
    truncate_kv(n);
    std::copy_n(logits, logits_.size(), logits_.data());
    logits_valid_ = true;
}

void Session::keep_hidden(bool on) {
    std::lock_guard<std::mutex> lock(kv_->mutex);
    if (on && model_.desc().hidden_buf < 0)
        fail(EMBER_ERR_UNSUPPORTED, "the %s model's forward pass returns no hidden rows", model_.arch().c_str());
    if (on == (hidden_width_ > 0)) return;   // the rows recorded so far stay
    hidden_.clear();
    hidden_start_ = position();
    hidden_width_ = on ? model_.desc().bufs[static_cast<size_t>(model_.desc().hidden_buf)].width : 0;
}

const float *Session::hidden_row(uint32_t pos) const {
    if (!hidden_width_ || pos < hidden_start_ || pos >= position()) return nullptr;
    return hidden_.data() + (size_t{pos} - hidden_start_) * hidden_width_;
}

void Session::forget_hidden(uint32_t n) {
    if (!hidden_width_) return;
    if (n < hidden_start_) hidden_start_ = n;
    hidden_.resize((size_t{n} - hidden_start_) * hidden_width_);
}

GenStep Session::next(Sampler &sampler) {
    if (!logits_valid_) fail(EMBER_ERR_INVALID_STATE, "no logits: feed the prompt before generating");
    // Refuse before sampling, so a full context leaves the sampler's history untouched.
    if (position() >= n_ctx_) fail(EMBER_ERR_CONTEXT_FULL, "the context is full (%u tokens)", n_ctx_);
    GenStep step;
    step.token = sampler.sample(logits_.data(), logits_.size());
    sampler.accept(step.token);
    step.end_of_generation = model_.tokenizer().is_eog(step.token);
    if (!step.end_of_generation) feed(&step.token, 1);
    step.text = text_of(step.token);
    return step;
}

std::string Session::text_of(int32_t token) {
    const Tokenizer &tok = model_.tokenizer();
    if (tok.is_eog(token)) return utf8_.flush();
    return utf8_.push(tok.token_to_piece(token, false));
}

} // namespace ember
