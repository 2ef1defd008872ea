// engine.cpp — the step loop of continuous batching.
//
// A step: drop cancelled requests; admit queued ones into free slots (adopting cached prefix blocks);
// build one batch — first the pending token of every generating request (decode latency matters most),
// then chunks of prompts up to n_batch tokens; evaluate it; sample for every request whose last needed
// token was in the batch. KV blocks come from one pool; a request that cannot get a block waits for
// others to release theirs, and fails only if nothing else could ever release one.
//
// Sliding-window layers (on the CPU): their rows live in a second pool, in a WindowTable per request
// beside its KvSequence, released as the request moves past its window. Full window blocks are
// published under their global twins' chain hashes, so a prompt that adopts a cached prefix adopts the
// window blocks of that prefix's last window too — as long a prefix as has all of them (see admit()).
#include "engine/engine.hpp"

#include "core/callback_scope.hpp"
#include "core/error.hpp"
#include "core/host_memory.hpp"
#include "backend/window_layers.hpp"
#include "embed/pooling.hpp"
#include "session/session.hpp"

#include <algorithm>
#include <cstdio>

namespace ember {

namespace {
Backend &find_backend(ember_backend_kind kind) {
    return backend_require(kind);
}

// An engine never truncates a request's sequence (it only grows and ends), but a later prompt that
// adopts its blocks continues from the last whole block boundary, up to a block before where it ended:
// keeping block_size - 1 positions behind the window keeps what a pass from there reads, so a pinned
// prefix stays adoptable and a finished request leaves its last window complete in the cache.
constexpr uint32_t kWindowKeep = kv::kBlockSize - 1;
} // namespace

EnginePlan plan_engine(const Model &model, const EngineOptions &opts) {
    if (model.vocab_only())
        fail(EMBER_ERR_INVALID_ARGUMENT, "the model was loaded vocab-only; load it with weights to create an engine");
    const HParams &hp = model.desc().hp;
    const ember_mod_model_desc &d = model.desc().c;
    EnginePlan p;
    p.block_size = kv::kBlockSize;
    p.n_ctx = opts.n_ctx ? opts.n_ctx : std::min(hp.n_ctx_train ? hp.n_ctx_train : Session::kDefaultMaxCtx,
                                                 Session::kDefaultMaxCtx);
    p.n_seq_max = opts.n_seq_max ? opts.n_seq_max : 8;
    if (p.n_ctx > (1u << 24) || p.n_seq_max > 4096)
        fail(EMBER_ERR_INVALID_ARGUMENT, "n_ctx %u or n_seq_max %u is too large", p.n_ctx, p.n_seq_max);
    p.n_batch = std::max(opts.n_batch ? opts.n_batch : 256u, p.n_seq_max);
    p.n_threads = opts.n_threads ? opts.n_threads : default_thread_count();
    check_kv_type(d, opts.kv_type);
    p.kv_type = opts.kv_type;
    const uint64_t block_bytes = uint64_t{p.block_size} * kv_bytes_per_token(d, p.kv_type);
    const uint64_t per_seq = (p.n_ctx + p.block_size - 1) / p.block_size;
    const uint64_t default_blocks = per_seq * p.n_seq_max + p.n_seq_max;
    uint64_t blocks = opts.kv_bytes ? opts.kv_bytes / block_bytes : default_blocks;
    uint64_t kv_bytes = blocks * block_bytes;

    // The window pool, where the backend keeps window layers apart (Backend::window_blocks: the CPU,
    // Vulkan and CUDA modules) and it is smaller than the main pool. It costs only the window layers' rows; the
    // main blocks then hold only the other layers' rows, so a budget buys more of them.
    const WindowLayers wl = window_layers(d);
    // (Not on an embedding model: its texts live for one pass, and its window layers may attend both ways.)
    if (opts.window_blocks && wl.n_layers > 0 && !model.desc().embedding.outputs_hidden && find_backend(opts.backend).window_blocks()) {
        const uint32_t n_window = kv::WindowTable::pool_blocks(wl.window, kWindowKeep, p.block_size, p.n_batch, p.n_seq_max, blocks);
        const uint64_t window_block_bytes = uint64_t{p.block_size} * 2 * wl.n_layers * kv_row_bytes(d, p.kv_type);
        const uint64_t main_block_bytes = block_bytes - window_block_bytes;
        const uint64_t window_bytes = n_window * window_block_bytes;
        uint64_t main = 0;
        if (!opts.kv_bytes || main_block_bytes == 0) main = default_blocks;   // (every layer windowed: main blocks are free)
        else if (opts.kv_bytes >= window_bytes + (per_seq + 1) * main_block_bytes)
            main = (opts.kv_bytes - window_bytes) / main_block_bytes;
        // else a budget too small for both pools: one pool, as without windows (checked below).
        if (n_window > 0 && main > 0) {
            blocks = main;
            kv_bytes = main * main_block_bytes + window_bytes;
            p.window = wl.window;
            p.n_window_blocks = n_window;
        }
    }
    // Speculation: a pass of every running request's k + 1 tokens fits one batch.
    if (opts.spec_mode != EMBER_SPEC_OFF) {
        p.spec_k = opts.spec_k;
        if (p.spec_k < 1 || p.spec_k > EngineDrafter::kMaxK)
            fail(EMBER_ERR_INVALID_ARGUMENT, "an engine's draft length must be in 1..%u, got %u", EngineDrafter::kMaxK, p.spec_k);
        p.n_batch = std::max(p.n_batch, p.n_seq_max * (p.spec_k + 2));
    }
    p.n_logits = p.n_seq_max * (p.spec_k + 1);
    if (model.desc().embedding.outputs_hidden) {
        // An embedding model's engine: a pass holds its longest text (an encoder's text must be in one pass,
        // as it attends both ways), and mean pooling reads every row of it.
        p.n_batch = std::max(p.n_batch, std::min(default_max_tokens(model.desc()), p.n_ctx));
        p.n_logits = p.n_batch;
    }
    // Recurrent layers: a state per running sequence and as many snapshots (at least 2), bought first;
    // with speculation a second state per running sequence (engine_spec.hpp).
    if (const uint64_t sb = state_bytes(d); sb > 0) {
        p.n_snapshots = std::max(2u, p.n_seq_max);
        p.n_state_slots = p.n_seq_max + p.n_snapshots + (p.spec_k ? p.n_seq_max : 0);
        p.state_bytes = uint64_t{p.n_state_slots} * sb;
        if (opts.kv_bytes) {
            if (opts.kv_bytes < p.state_bytes + (per_seq + 1) * block_bytes)
                fail(EMBER_ERR_INVALID_ARGUMENT,
                     "a budget of %llu bytes does not hold the %u recurrent states (%llu bytes) and one sequence's KV blocks",
                     (unsigned long long)opts.kv_bytes, p.n_state_slots, (unsigned long long)p.state_bytes);
            blocks = (opts.kv_bytes - p.state_bytes) / block_bytes;
            kv_bytes = blocks * block_bytes;
        }
    }
    if (blocks < per_seq + 1)
        fail(EMBER_ERR_INVALID_ARGUMENT, "a KV budget of %llu bytes holds %llu blocks; one sequence of %u tokens needs %llu",
             (unsigned long long)opts.kv_bytes, (unsigned long long)blocks, p.n_ctx, (unsigned long long)per_seq + 1);
    if (blocks > (1u << 30)) fail(EMBER_ERR_INVALID_ARGUMENT, "KV budget too large");
    p.n_blocks = static_cast<uint32_t>(blocks);
    p.kv_bytes = kv_bytes + p.state_bytes;
    return p;
}

namespace {
ContextParams context_params(const EnginePlan &p) {
    ContextParams cp;
    cp.n_blocks = p.n_blocks;
    cp.block_size = p.block_size;
    cp.n_threads = p.n_threads;
    cp.n_batch = p.n_batch;
    cp.n_logits = p.n_logits;
    cp.kv_type = p.kv_type;
    cp.n_window_blocks = p.n_window_blocks;
    cp.n_state_slots = p.n_state_slots;
    return cp;
}

// The backend that runs the engine: a placement across devices where one is asked of a GPU backend
// (backend/placement.hpp; refused here, before anything is allocated, when it cannot fit), else the one
// opts.backend names.
Backend &engine_backend(const Model &model, const EngineOptions &opts, const EnginePlan &plan,
                        PlacementPlan *placed = nullptr) {
    if (opts.placed) return *opts.placed;
    Backend &backend = find_backend(opts.backend);
    if (!opts.placement.split() || backend.kind() == EMBER_BACKEND_CPU) return backend;
    const PlacementPlan p = plan_placement(model.desc_for(plan.n_ctx).c, backend, context_params(plan), opts.placement);
    if (placed) *placed = p;
    return *p.backend;
}
} // namespace

MemoryEstimate estimate_engine_memory(const Model &model, const EngineOptions &opts) {
    const EnginePlan plan = plan_engine(model, opts);
    MemoryEstimate m;
    m.weights_bytes = model.size_bytes();
    m.kv_bytes = plan.kv_bytes;
    Backend &backend = engine_backend(model, opts, plan);
    const uint64_t context = backend.context_bytes(model.desc().c, context_params(plan));
    m.compute_bytes = context - plan.kv_bytes + uint64_t{plan.n_logits} * model.desc().c.n_vocab * sizeof(float);
    // The multi-token-prediction block's context (its KV rows and activations) and the batch's hidden rows.
    if (opts.spec_mode == EMBER_SPEC_MTP)
        m.compute_bytes += backend.context_bytes(model.mtp_desc().c, EngineDrafter::mtp_context_params(plan)) +
                           uint64_t{plan.n_batch} * model.mtp_desc().hp.n_embd * sizeof(float);
    return m;
}

PlacementPlan estimate_engine_placement(const Model &model, const EngineOptions &opts) {
    PlacementPlan p;
    engine_backend(model, opts, plan_engine(model, opts), &p);
    return p;
}

namespace {
// The plan, once the memory it needs is known to be there (before the block pool, the first large
// allocation, is made).
EnginePlan plan_within_memory(const Model &model, const EngineOptions &opts) {
    const EnginePlan plan = plan_engine(model, opts);
    PlacementPlan placed;
    Backend &backend = engine_backend(model, opts, plan, &placed);
    const MemoryEstimate m = estimate_engine_memory(model, opts);
    const std::string what = format("an engine of n_ctx %u x n_seq_max %u (%u KV blocks)", plan.n_ctx, plan.n_seq_max, plan.n_blocks);
    if (placed.backend && placed.gpu_layers > 0 && backend.kind() != EMBER_BACKEND_CPU) {
        // Across devices: the GPU's part was held to its budget by plan_placement; the CPU's part here.
        check_host_memory(placed.cpu_context, (what + ", its part on the CPU").c_str());
    } else if (backend.kind() == EMBER_BACKEND_CPU) {
        const uint64_t weights = model.cpu_weights_reserve(m.kv_bytes + m.compute_bytes);   // (model.hpp)
        check_host_memory(m.kv_bytes + m.compute_bytes + weights,
                          (what + (weights ? " with its huge-page copy of the weights" : "")).c_str());
    } else {
        check_device_memory(m.kv_bytes + m.compute_bytes, backend.device_memory_available(),
                            format("%s device memory", backend.name()).c_str(), what.c_str());
    }
    return plan;
}
} // namespace

Engine::Engine(const Model &model, const EngineOptions &opts)
    : model_(model), opts_(opts), plan_(plan_within_memory(model, opts)), pool_(plan_.n_blocks, plan_.block_size) {
    // plan_.n_ctx is each request's context: LongRoPE files get their long factors past the original one.
    const EmbeddingInfo &e = model.desc().embedding;
    if (e.outputs_hidden && opts.spec_mode != EMBER_SPEC_OFF)
        fail(EMBER_ERR_UNSUPPORTED, "'%s' is an embedding model: it generates nothing, so an engine on it does not speculate",
             model.arch().c_str());
    if (!e.outputs_hidden && model.desc().hidden_buf >= 0)
        hidden_width_ = model.desc().bufs[static_cast<size_t>(model.desc().hidden_buf)].width;
    Backend &backend = engine_backend(model, opts, plan_, &placement_);
    if (placement_.backend) log_msg(&model.log(), EMBER_LOG_INFO, "placement: %s", placement_.describe().c_str());
    backend_kind_ = backend.kind();
    if (plan_.n_state_slots > 0 && !backend.recurrent_state())
        fail(EMBER_ERR_UNSUPPORTED, "the %s backend does not run models with recurrent layers (%s)", backend.name(),
             model.desc().arch.c_str());
    ctx_ = model.backend_model(backend, plan_.n_ctx).create_context(context_params(plan_));
    if (plan_.n_state_slots > 0) {
        // The running requests' slots, then the snapshots', then (speculation) the running requests' second ones.
        const uint32_t spares = plan_.n_state_slots - plan_.n_seq_max - plan_.n_snapshots;
        for (uint32_t i = spares; i-- > 0;) free_states_.push_back(static_cast<int32_t>(plan_.n_seq_max + plan_.n_snapshots + i));
        for (uint32_t i = plan_.n_seq_max; i-- > 0;) free_states_.push_back(static_cast<int32_t>(i));
        snapshots_ = std::make_unique<StateSnapshots>(static_cast<int32_t>(plan_.n_seq_max), plan_.n_snapshots);
    }
    if (plan_.n_window_blocks > 0) window_pool_ = std::make_unique<kv::BlockPool>(plan_.n_window_blocks, plan_.block_size);
    logits_.resize(size_t{plan_.n_logits} * model.desc().c.n_vocab);
    if (plan_.spec_k) {
        // The MTP layer on the device's own backend, as a session's (not split across devices: it is one layer).
        Backend &draft_backend = placement_.backend ? backend_require(backend_kind_) : backend;
        drafter_ = std::make_unique<EngineDrafter>(model, draft_backend, *ctx_, plan_, opts.spec_mode, plan_.spec_k,
                                                   opts.spec_ngram_max);
        hidden_.resize(size_t{plan_.n_batch} * drafter_->hidden_width());
    }
    if (!opts_.manual_step) worker_ = std::thread([this] { worker_main(); });
}

Engine::~Engine() {
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        stop_ = true;
    }
    queue_cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    std::lock_guard<std::mutex> step(step_mutex_);
    // Sequences hold blocks of pool_, which dies with the engine: release them first.
    for (auto &r : active_) finish(r, EMBER_REQUEST_CANCELLED);
    for (auto &r : queue_) finish(r, EMBER_REQUEST_CANCELLED);
    for (auto &r : embeds_) finish(r, EMBER_REQUEST_CANCELLED);
    for (auto &r : embed_queue_) finish(r, EMBER_REQUEST_CANCELLED);
    b_embed_.clear();
    for (auto &r : pinned_) r->release_kv();
    flush_ended();
}

void Engine::check_prompt(const int32_t *tokens, size_t n) const {
    if (embeds_only())
        fail(EMBER_ERR_UNSUPPORTED, "'%s' is an embedding model (pooling %s): it has no next-token logits, so an engine on "
             "it takes embedding requests (ember_engine_submit_embed), not generation", model_.arch().c_str(),
             pooling_name(model_.desc().embedding.pooling));
    const int32_t n_vocab = static_cast<int32_t>(model_.desc().hp.n_vocab);
    if (n == 0) fail(EMBER_ERR_INVALID_ARGUMENT, "the prompt is empty");
    if (n >= plan_.n_ctx)
        fail(EMBER_ERR_INVALID_ARGUMENT, "a prompt of %zu tokens leaves no room in a context of %u", n, plan_.n_ctx);
    for (size_t i = 0; i < n; ++i)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            fail(EMBER_ERR_INVALID_ARGUMENT, "prompt token %d at index %zu is outside the vocabulary", tokens[i], i);
}

void Engine::submit(const std::shared_ptr<Request> &r) {
    check_prompt(r->prompt.data(), r->prompt.size());
    r->speculate = r->speculate && drafter_ && !r->pin;
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        if (stop_) fail(EMBER_ERR_INVALID_STATE, "the engine is shutting down");
        queue_.push_back(r);
    }
    queue_cv_.notify_one();
}

void Engine::worker_main() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(queue_mutex_);
            queue_cv_.wait(lock, [this] {
                return stop_ || !queue_.empty() || !embed_queue_.empty() || published_.n_running > 0;
            });
            if (stop_) return;
        }
        try {
            step();
        } catch (const Error &e) {
            fail_step(e.status(), e.what());
        } catch (const std::bad_alloc &) {
            fail_step(EMBER_ERR_OUT_OF_MEMORY, "out of memory");
        } catch (const std::exception &e) {
            fail_step(EMBER_ERR_INTERNAL, e.what());
        }
    }
}

void Engine::fail_step(ember_status status, const char *message) noexcept {
    // A failed step fails the requests it carried, with the step's status (out of memory is not a bug);
    // the engine itself keeps running. Nothing may escape the worker thread: a request that cannot even
    // be failed for want of memory stays active, and the next step takes it up again.
    std::lock_guard<std::mutex> step(step_mutex_);
    try {
        for (auto &r : active_) finish(r, EMBER_REQUEST_FAILED, status, message);
    } catch (...) {
    }
    std::erase_if(active_, [](const std::shared_ptr<Request> &r) { return r->finished; });
    try {
        fail_embeds(status, message);
    } catch (...) {
    }
    try {
        publish();
        flush_ended();
    } catch (...) {
    }
}

bool Engine::step() {
    std::lock_guard<std::mutex> lock(step_mutex_);
    return step_locked();
}

void Engine::finish(const std::shared_ptr<Request> &r, ember_request_state state, ember_status error,
                    const std::string &message, bool keep_seq) {
    if (r->finished) return;
    // The text the UTF-8 stream and the stop strings still hold (nothing after a stop string).
    std::string tail = r->stop.push(r->utf8.flush());
    tail += r->stop.finish();
    ended_.push_back({r, state, error, message, std::move(tail)});  // first: if it throws, nothing changed
    r->finished = true;
    for (int32_t *slot : {&r->state_slot, &r->state_spare})   // (a pinned prefix's state lives on in its snapshot)
        if (*slot >= 0) {
            free_states_.push_back(*slot);
            *slot = -1;
        }
    if (!keep_seq) r->release_kv();  // full blocks stay cached in the pools for later prompts that share them
}

void Engine::flush_ended() {
    for (Ended &e : ended_) {
        Request &r = *e.request;
        {
            std::lock_guard<std::mutex> lock(r.mutex);
            r.text += e.tail;
            r.state = e.state;
            r.error = e.error;
            r.error_message = e.message;
        }
        r.ended.notify_all();
    }
    ended_.clear();
}

void Engine::emit(Request &r, int32_t token) {
    const std::string text = r.stop.push(r.utf8.push(model_.tokenizer().token_to_piece(token, false)));
    {
        std::lock_guard<std::mutex> lock(r.mutex);
        r.tokens.push_back(token);
        if (r.sampler->params().n_logprobs > 0)
            r.logprobs.push_back({r.sampler->last_logprob(), r.sampler->last_top_logprobs()});
        r.text += text;
    }
    std::lock_guard<std::recursive_mutex> cb(r.cb_mutex);
    // The callback runs inside the step: the engine calls it may not make are refused (ember.h).
    const CallbackScope scope(this, "the engine's step (ember_request_params.on_token)");
    if (r.on_token && !r.on_token(r.handle, token, text.data(), text.size(), r.user_data)) r.cancel = true;
}

uint32_t Engine::decode_tokens(Request &r, std::vector<int32_t> &out) const {
    out.assign(r.replay.begin(), r.replay.end());
    out.push_back(r.pending);
    out.insert(out.end(), r.drafts.begin(), r.drafts.end());
    return static_cast<uint32_t>(1 + r.drafts.size());
}

void Engine::sample_decode(const std::shared_ptr<Request> &self, const float *rows, const float *hidden) {
    Request &r = *self;
    const size_t n_vocab = model_.desc().hp.n_vocab;
    const bool decode = r.pending >= 0;   // else the prompt's last chunk
    const uint32_t n_drafts = static_cast<uint32_t>(r.drafts.size());
    const size_t width = drafter_ ? drafter_->hidden_width() : 0;
    // The hidden rows from the pending token on (the replayed tokens' came with the pass that drafted them).
    const float *h = hidden ? hidden + r.replay.size() * width : nullptr;
    r.replay.clear();   // evaluated again by this pass
    // Logits row i follows the token at position pos0 + i: the pending token (or the prompt's last), then
    // the drafts. Each row is sampled as plain decoding samples it; the next row only while the draw
    // agrees with the draft there, whose K/V rows are then already in the cache.
    const uint32_t pos0 = r.seq->size() - 1 - n_drafts;
    int32_t next = -1;
    bool ended = false;
    uint32_t i = 0;
    for (;; ++i) {
        const int32_t tok = r.sampler->sample(rows + size_t{i} * n_vocab, n_vocab);
        r.sampler->accept(tok);
        ++r.generated;
        const bool agrees = i < n_drafts && tok == r.drafts[i];
        if (model_.tokenizer().is_eog(tok)) {
            finish(self, EMBER_REQUEST_DONE);
            ended = true;
            break;
        }
        emit(r, tok);
        // pos0 + 1 + i tokens are evaluated where plain decoding stands now.
        if (r.stop.stopped() || (r.max_tokens && r.generated >= r.max_tokens) || pos0 + 1 + i + 1 > plan_.n_ctx) {
            finish(self, EMBER_REQUEST_DONE);
            ended = true;
            break;
        }
        if (!agrees) {
            next = tok;
            break;
        }
        if (r.cancel) {   // its callback asked: plain decoding would end it before the next token too
            finish(self, EMBER_REQUEST_CANCELLED);
            ended = true;
            break;
        }
    }
    if (decode) {
        std::lock_guard<std::mutex> lock(r.mutex);
        ++r.decode_steps;
        r.spec_drafted += n_drafts;
        r.spec_accepted += std::min(i, n_drafts);
    }
    if (ended) return;
    // The next round drafts one more than this one kept: as many as the draft was right for in a row,
    // up to spec_k, so a draft that is seldom right costs little (engine_spec.hpp).
    if (n_drafts > 0) r.draft_len = i + 1;
    // i drafts agreed: the pending token and they stay, the rest go.
    if (i < n_drafts) roll_back(r, pos0 + 1 + i, pos0);
    else if (n_drafts > 0 && r.state_spare >= 0) std::swap(r.state_slot, r.state_spare);   // the pass's state is the request's
    if (r.mtp) {
        if (decode) {
            r.mtp->hidden(h);
            for (uint32_t j = 1; j <= i; ++j) {
                r.mtp->token(r.drafts[j - 1]);
                r.mtp->hidden(h + j * width);
            }
        }
        r.mtp->token(next);
    }
    r.pending = next;
}

void Engine::roll_back(Request &r, uint32_t keep, uint32_t pos_z) {
    uint32_t to = keep;
    if (r.state_spare >= 0) {
        // A recurrent model: the state slot holds the state before the pending token (the pass wrote the
        // other one), so the tokens kept are fed again from there.
        r.replay.assign(r.seq->tokens().begin() + pos_z, r.seq->tokens().begin() + keep);
        to = pos_z;
    }
    if (r.win) {
        if (!r.win->can_truncate(to)) fail(EMBER_ERR_INTERNAL, "speculation: the window blocks cannot roll back to position %u", to);
        r.win->truncate(to);
    }
    r.seq->truncate(to);
}

uint32_t Engine::snapshot_point(const Request &r) const {
    return static_cast<uint32_t>(r.prompt.size()) / plan_.block_size * plan_.block_size;
}

uint32_t Engine::adopt_state(Request &r, kv::KvSequence &seq, uint32_t adopted) {
    const uint32_t bs = plan_.block_size;
    for (uint32_t m = adopted / bs * bs; m >= bs; m -= bs) {
        const int32_t snap = snapshots_->find(seq.hashes()[m / bs - 1], m);
        if (snap < 0) continue;
        seq.truncate(m);
        ctx_->copy_state(snap, r.state_slot);
        r.state_zero = false;
        return m;
    }
    seq.truncate(0);
    r.state_zero = true;
    return 0;
}

void Engine::admit() {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    // A request leaves the queue only once everything that can fail (allocations) is done: if admitting
    // it throws, it is still queued, and a later step admits it.
    while (!queue_.empty() && active_.size() < plan_.n_seq_max) {
        std::shared_ptr<Request> r = queue_.front();
        if (r->cancel) {
            finish(r, EMBER_REQUEST_CANCELLED);
            queue_.pop_front();
            continue;
        }
        if (drafter_) drafter_->start(*r);   // (first: its allocation is all that may fail)
        auto seq = std::make_unique<kv::KvSequence>(pool_);
        uint32_t adopted = seq->adopt_prefix(r->prompt.data(), static_cast<uint32_t>(r->prompt.size()));
        std::unique_ptr<kv::WindowTable> win;
        if (window_pool_) {
            // A prefix is of use only as far as the window blocks its first pass reads are cached too: the
            // window table adopts the longest such prefix, and the global blocks past it go back.
            win = std::make_unique<kv::WindowTable>(*window_pool_, plan_.window, kWindowKeep);
            adopted = win->adopt_prefix(seq->hashes(), adopted);
            seq->truncate(adopted);
        }
        if (snapshots_) {
            r->state_slot = free_states_.back();   // one per running request (two speculating): never short here
            free_states_.pop_back();
            if (r->speculate) {
                r->state_spare = free_states_.back();
                free_states_.pop_back();
            }
            try {
                adopted = adopt_state(*r, *seq, adopted);
                if (win) adopted = win->adopt_prefix(seq->hashes(), adopted);
            } catch (...) {
                for (int32_t *slot : {&r->state_slot, &r->state_spare})
                    if (*slot >= 0) free_states_.push_back(*slot), *slot = -1;
                throw;
            }
        }
        active_.push_back(r);
        queue_.pop_front();
        r->seq = std::move(seq);
        r->win = std::move(win);
        r->n_evaluated = adopted;
        std::lock_guard<std::mutex> rl(r->mutex);
        r->state = EMBER_REQUEST_RUNNING;
    }
    // Queued requests cancelled while every slot is busy end now, not when a slot frees.
    for (auto it = queue_.begin(); it != queue_.end();) {
        if ((*it)->cancel) {
            finish(*it, EMBER_REQUEST_CANCELLED);
            it = queue_.erase(it);
        } else {
            ++it;
        }
    }
}

bool Engine::step_locked() {
    // 1. Cancellations take effect at step boundaries, between prompt chunks too.
    std::erase_if(active_, [this](const std::shared_ptr<Request> &r) {
        if (!r->cancel) return false;
        finish(r, EMBER_REQUEST_CANCELLED);
        return true;
    });
    admit();
    admit_embeds();

    // Drafts for the requests that speculate (engine_spec.hpp).
    if (drafter_) drafter_->propose(active_, plan_.n_ctx);

    // 2. Build the batch: decode tokens first (with their drafts), then prompt chunks.
    const auto copy = [this](int32_t src, int32_t dst) { ctx_->copy_block(src, dst); };
    // The backend numbers the window pool's blocks after the main pool's (backend.hpp).
    const auto window_copy = [this](int32_t src, int32_t dst) {
        const auto base = static_cast<int32_t>(pool_.n_blocks());
        ctx_->copy_block(base + src, base + dst);
    };
    b_tokens_.clear();
    b_pos_.clear();
    b_tables_.clear();
    b_window_tables_.clear();
    b_logit_rows_.clear();
    std::vector<Fed> &fed = b_fed_;
    fed.clear();
    uint32_t budget = plan_.n_batch;
    bool starved = false;
    // Adds n tokens of a request, with logits for the last n_logits of them.
    auto add = [&](const std::shared_ptr<Request> &self, const int32_t *toks, uint32_t n, uint32_t n_logits) {
        Request &r = *self;
        // A main reservation that stands while the window one fails is kept for the next try.
        if (!r.seq->reserve(n, copy) || (r.win && !r.win->reserve(n, window_copy))) {
            starved = true;
            return;
        }
        const uint32_t p0 = r.seq->size();
        const Fed f{self, static_cast<uint32_t>(b_tokens_.size()), n, static_cast<uint32_t>(b_logit_rows_.size()), n_logits};
        for (uint32_t i = 0; i < n; ++i) {
            b_tokens_.push_back(toks[i]);
            b_pos_.push_back(static_cast<int32_t>(p0 + i));
            b_tables_.push_back(nullptr);  // set after all reserves (tables may move while they grow)
        }
        for (uint32_t i = n - n_logits; i < n; ++i) b_logit_rows_.push_back(static_cast<int32_t>(f.row + i));
        fed.push_back(f);
        budget -= n;
    };
    for (auto &r : active_) {
        if (r->pending < 0 || budget == 0) continue;
        // (The plan's n_batch holds every request's k + 1 tokens; a long replay may wait for a step with room.)
        if (r->replay.size() + 1 + r->drafts.size() > budget) r->drafts.clear();
        const uint32_t n_logits = decode_tokens(*r, b_decode_);
        if (b_decode_.size() > budget) continue;
        add(r, b_decode_.data(), static_cast<uint32_t>(b_decode_.size()), n_logits);
    }
    // Then embedding texts, whole: before the prompt chunks, which can be cut to any length, so that a
    // text always finds room beside the decode tokens (embed_max_tokens); while prompts wait, texts after
    // the first take at most half of what is left, so neither kind starves the other. They share the
    // generations' pass rather than run one of their own: the weights are read once for both, and a
    // row's result does not depend on the other rows of its pass (each sequence attends to its own blocks).
    bool prompts_wait = false;
    for (auto &r : active_) prompts_wait = prompts_wait || r->n_evaluated < r->prompt.size();
    bool embed_starved = false;
    add_embed_texts(budget, prompts_wait ? budget / 2 : budget, embed_starved);
    for (auto &r : active_) {
        const uint32_t left = static_cast<uint32_t>(r->prompt.size()) - r->n_evaluated;
        if (left == 0 || budget == 0) continue;
        uint32_t n = std::min(left, budget);
        // A recurrent model's pass ends at the prompt's last whole block boundary, where its state is kept.
        const uint32_t point = snapshot_point(*r);
        if (snapshots_ && r->n_evaluated < point) n = std::min(n, point - r->n_evaluated);
        add(r, r->prompt.data() + r->n_evaluated, n, n == left && !r->pin ? 1 : 0);
    }
    if (fed.empty() && b_embed_.empty()) {
        if (embed_starved && active_.empty()) {
            // Blocks that nothing running will release (pinned prefixes hold the rest): the text never fits.
            finish(embeds_.front(), EMBER_REQUEST_FAILED, EMBER_ERR_OUT_OF_MEMORY,
                   "the KV cache has no room for the embedding text beside the pinned prefixes");
            embeds_.erase(embeds_.begin());
        } else if (starved) {
            // Nothing can run and nothing holds blocks that a step would free: the budget is too small
            // for even one of the waiting requests. Fail the newest one so the others can proceed.
            finish(active_.back(), EMBER_REQUEST_FAILED, EMBER_ERR_OUT_OF_MEMORY, "the KV cache budget is exhausted");
            active_.pop_back();
        }
        const bool busy = publish();
        flush_ended();
        return busy;
    }
    if (window_pool_) b_window_tables_.resize(b_tables_.size());
    const auto set_tables = [this](uint32_t row, uint32_t n, const kv::KvSequence &seq, const kv::WindowTable *win) {
        for (uint32_t i = 0; i < n; ++i) b_tables_[row + i] = seq.blocks().data();
        if (window_pool_)
            for (uint32_t i = 0; i < n; ++i) b_window_tables_[row + i] = win->blocks().data();
    };
    for (const Fed &f : fed) set_tables(f.row, f.n, *f.r->seq, f.r->win.get());
    for (const EmbedFed &e : b_embed_) set_tables(e.row, e.n, *e.seq, e.win.get());

    // 3. One forward pass for everything.
    Batch b;
    b.n_tokens = static_cast<uint32_t>(b_tokens_.size());
    b.tokens = b_tokens_.data();
    b.pos = b_pos_.data();
    b.tables = b_tables_.data();
    b.n_logits = static_cast<uint32_t>(b_logit_rows_.size());
    b.logits_rows = b_logit_rows_.data();
    b.logits = logits_.data();
    if (window_pool_) b.window_tables = b_window_tables_.data();
    const uint32_t width = drafter_ ? drafter_->hidden_width() : 0;
    // The hidden rows: the MTP draft's, and an embedding text's on a generating model (its pooled rows).
    if (!b_embed_.empty() && !embeds_only() && hidden_.size() < size_t{plan_.n_batch} * hidden_width_)
        hidden_.resize(size_t{plan_.n_batch} * hidden_width_);
    if (width || (!b_embed_.empty() && !embeds_only())) b.hidden = hidden_.data();
    if (snapshots_) {
        b_state_slots_.clear();
        b_state_src_.clear();
        for (const Fed &f : fed) {
            const Request &r = *f.r;
            // A verifying pass forks: it writes the second slot, and the first keeps the state before its
            // drafts in case one is rejected (engine_spec.hpp).
            const bool fork = r.pending >= 0 && !r.drafts.empty();
            for (uint32_t i = 0; i < f.n; ++i) {
                b_state_slots_.push_back(fork ? r.state_spare : r.state_slot);
                b_state_src_.push_back(r.state_zero ? -1 : r.state_slot);
            }
        }
        b.state_slots = b_state_slots_.data();
        b.state_src = b_state_src_.data();
    }
    ctx_->forward(b);
    finish_embed_texts();
    for (const Fed &f : fed) {
        Request &r = *f.r;
        r.seq->commit(b_tokens_.data() + f.row, f.n);
        // After the sequence's commit, whose chain hashes the window blocks are published under.
        if (r.win) r.win->commit(f.n, &r.seq->hashes());
        r.state_zero = false;
        if (r.pending >= 0) continue;   // a generating request's tokens: sample_decode's
        r.n_evaluated += f.n;
        // The multi-token-prediction block's pairs of a prompt chunk: each token follows the position before.
        if (r.mtp)
            for (uint32_t i = 0; i < f.n; ++i) {
                r.mtp->token(b_tokens_[f.row + i]);
                r.mtp->hidden(hidden_.data() + size_t{f.row + i} * width);
            }
        // The prompt's last whole block boundary reached: its state becomes a snapshot (pinned for a
        // pinned prefix). With every slot pinned, none is kept: later prompts recompute it.
        if (snapshots_ && r.n_evaluated == snapshot_point(r) && r.n_evaluated > 0) {
            const uint32_t m = r.n_evaluated;
            const int32_t snap = snapshots_->store(r.seq->hashes()[m / plan_.block_size - 1], m, r.pin);
            if (snap >= 0) ctx_->copy_state(r.state_slot, snap);
        }
    }

    // 4. Sample, emit, and end what is done.
    const size_t n_vocab = model_.desc().hp.n_vocab;
    for (const Fed &f : fed) {
        if (f.n_logits == 0) continue;
        // Whatever fails from here on (its grammar, sampler, stop strings, logprobs, text) is this
        // request's own: it fails alone and the step's others go on.
        try {
            sample_decode(f.r, logits_.data() + size_t{f.logits_row} * n_vocab,
                          width ? hidden_.data() + size_t{f.row} * width : nullptr);
        } catch (const Error &e) {
            finish(f.r, EMBER_REQUEST_FAILED, e.status(), e.what());
        } catch (const std::bad_alloc &) {
            finish(f.r, EMBER_REQUEST_FAILED, EMBER_ERR_OUT_OF_MEMORY, "out of memory");
        }
    }
    // Pinned prefixes leave the active set once evaluated, keeping their blocks.
    for (auto &r : active_)
        if (r->pin && r->n_evaluated == r->prompt.size()) {
            if (const std::string why = pin_refusal(r->seq->blocks().size()); !why.empty()) {
                finish(r, EMBER_REQUEST_FAILED, EMBER_ERR_OUT_OF_MEMORY, why);
                continue;
            }
            pinned_.push_back(r);
            finish(r, EMBER_REQUEST_DONE, EMBER_OK, {}, /*keep_seq=*/true);
        }
    std::erase_if(active_, [](const std::shared_ptr<Request> &r) { return r->finished; });
    const bool busy = publish();
    flush_ended();
    return busy;
}

bool Engine::publish() {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    published_.n_blocks_cached = pool_.n_cached();
    published_.n_blocks_used = pool_.n_blocks() - pool_.n_free();
    if (window_pool_) {
        published_.n_window_blocks_cached = window_pool_->n_cached();
        published_.n_window_blocks_used = window_pool_->n_blocks() - window_pool_->n_free();
    }
    published_.n_embedding = static_cast<uint32_t>(embeds_.size() + embed_queue_.size());
    published_.n_running = static_cast<uint32_t>(active_.size()) + published_.n_embedding;
    published_.n_queued = static_cast<uint32_t>(queue_.size());
    return !active_.empty() || !queue_.empty() || published_.n_embedding > 0;
}

Engine::Stats Engine::stats() {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    Stats s = published_;
    s.n_queued = static_cast<uint32_t>(queue_.size());
    return s;
}

// Pins may hold every block but those one request of a whole context needs (the least the plan
// guarantees), so a request always has room beside them. "" when `blocks` more fit.
std::string Engine::pin_refusal(size_t blocks) const {
    size_t pinned = 0;
    for (const auto &p : pinned_) pinned += p->seq->blocks().size();
    const size_t limit = pool_.n_blocks() - std::min<size_t>(pool_.n_blocks(), (plan_.n_ctx + plan_.block_size - 1) / plan_.block_size + 1);
    if (pinned + blocks <= limit) return {};
    char msg[200];
    std::snprintf(msg, sizeof msg, "pinning %zu more KV blocks would leave requests no room: pins may hold %zu of the %u blocks "
                  "(a context's worth stays free), and hold %zu", blocks, limit, pool_.n_blocks(), pinned);
    return msg;
}

void Engine::pin_prefix(const int32_t *tokens, size_t n) {
    check_prompt(tokens, n);   // before copying: n is the caller's and may be anything
    {
        std::lock_guard<std::mutex> lock(step_mutex_);   // checked again when evaluated (pins may race)
        if (const std::string why = pin_refusal((n + plan_.block_size - 1) / plan_.block_size); !why.empty())
            fail(EMBER_ERR_OUT_OF_MEMORY, "%s", why.c_str());
    }
    auto r = std::make_shared<Request>();
    r->prompt.assign(tokens, tokens + n);
    r->pin = true;
    r->sampler = std::make_unique<Sampler>(SamplerParams{});
    submit(r);
    if (opts_.manual_step) {
        for (;;) {
            step();
            std::lock_guard<std::mutex> lock(r->mutex);
            if (r->ended_locked()) break;
        }
    }
    std::unique_lock<std::mutex> lock(r->mutex);
    r->ended.wait(lock, [&] { return r->ended_locked(); });
    if (r->state != EMBER_REQUEST_DONE)
        fail(r->error ? r->error : EMBER_ERR_CANCELLED, "pinning the prefix failed: %s", r->error_message.c_str());
}

} // namespace ember
