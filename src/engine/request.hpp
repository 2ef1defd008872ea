// request.hpp — one generation or embedding request: what the app submitted, what the engine produced so
// far, and the engine-side state (its KV sequence, how much of the prompt is evaluated).
//
// Shared between the app's handle and the engine (shared_ptr), so either side may go first. The output
// fields are guarded by `mutex`, held only for short copies: a poll never waits for a forward pass.
#pragma once

#include "embed/pooling.hpp"
#include "engine/mtp_stream.hpp"
#include "kv/kv_sequence.hpp"
#include "kv/window_table.hpp"
#include "sampler/sampler.hpp"
#include "sampler/stop_strings.hpp"
#include "tokenizer/tokenizer.hpp"

#include <ember/ember.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ember {

// An embedding request's texts and results (Engine::submit_embed). Its texts go into the engine's passes
// whole, in order, each in a sequence of its own whose KV blocks live for that pass only.
struct EmbedWork {
    std::vector<std::vector<int32_t>> texts;   // fitted (pooling.hpp's fit_text)
    TextPooling pooling;
    size_t next = 0;             // engine thread: texts whose vectors are written
    std::vector<float> vectors;  // texts.size() * pooling.per_text(); read by the app once the request is DONE
};

struct Request {
    // Fixed at submit.
    std::vector<int32_t> prompt;
    uint32_t max_tokens = 0;          // 0: until end of generation or a full context
    std::unique_ptr<Sampler> sampler;
    bool pin = false;                 // a pinned prefix: keep the sequence after the prompt, generate nothing
    StopStrings stop;                 // engine thread only: holds back text that may start a stop string

    // The streaming callback. cb_mutex is held while it runs and while the app's handle detaches, so a
    // callback never sees a freed handle (recursive: the callback may free its own request).
    std::recursive_mutex cb_mutex;
    ember_request_token_fn on_token = nullptr;
    void *user_data = nullptr;
    ember_request *handle = nullptr;

    // Output, shared with pollers.
    std::mutex mutex;
    std::condition_variable ended;    // notified when state leaves QUEUED/RUNNING
    std::vector<int32_t> tokens;
    struct Logprobs {
        TokenLogprob sampled;
        std::vector<TokenLogprob> top;
    };
    std::vector<Logprobs> logprobs;   // per token in `tokens`, when the sampler records them
    size_t polled = 0;
    std::string text;
    ember_request_state state = EMBER_REQUEST_QUEUED;
    ember_status error = EMBER_OK;
    std::string error_message;
    // Speculation's counters (engine_spec.hpp): tokens drafted, of those accepted, and the steps whose
    // forward pass evaluated this request's generated tokens.
    uint64_t spec_drafted = 0, spec_accepted = 0, decode_steps = 0;

    std::atomic<bool> cancel{false};

    // Engine thread only.
    bool finished = false;            // ended; its state becomes visible when the step publishes
    std::unique_ptr<kv::KvSequence> seq;
    std::unique_ptr<kv::WindowTable> win;   // the window layers' blocks, when the engine has a window pool
    uint32_t n_evaluated = 0;         // prompt tokens whose K/V rows are in the cache
    int32_t pending = -1;             // sampled token still to be fed (-1: none)
    int32_t state_slot = -1;          // a recurrent model's: the context's state slot of this sequence
    bool state_zero = true;           // its state is still the zero state of position 0
    uint32_t generated = 0;
    Utf8Stream utf8;
    // Speculation (engine_spec.hpp), with an engine that drafts and a request that asked for it: this
    // step's drafts (after `pending`), the accepted tokens a rollback on a recurrent model left to
    // evaluate again (before `pending`), the second state slot a verifying pass writes (state_slot keeps
    // the state before it), and the multi-token-prediction block's rows.
    bool speculate = false;
    uint32_t draft_len = ~0u;   // the most it drafts next: one more than its last round kept (engine_spec.hpp)
    std::vector<int32_t> drafts, replay;
    int32_t state_spare = -1;
    std::unique_ptr<MtpStream> mtp;
    // An embedding request (no prompt, no sampler): its texts and vectors.
    std::unique_ptr<EmbedWork> embed;

    // Gives the request's blocks back to the engine's pools (the window table first: it is the newer).
    void release_kv() {
        mtp.reset();
        win.reset();
        seq.reset();
    }

    bool ended_locked() const { return state != EMBER_REQUEST_QUEUED && state != EMBER_REQUEST_RUNNING; }
};

} // namespace ember
