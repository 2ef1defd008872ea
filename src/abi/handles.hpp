// handles.hpp — what the opaque C handles hold, and helpers for struct_size-versioned output structs.
#pragma once

#include "abi/boundary.hpp"
#include "abi/exclusive_use.hpp"
#include "engine/engine.hpp"
#include "grammar/grammar.hpp"
#include "model/model.hpp"
#include "sampler/sampler.hpp"
#include "session/model_fingerprint.hpp"
#include "sampler/stop_strings.hpp"
#include "session/session.hpp"
#include "spec/speculator.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

struct ember_model {
    std::unique_ptr<ember::Model> model;
    // NUL-terminated copies of names that are views into the file, for the C API to hand out.
    std::vector<std::string> meta_keys;
    std::vector<std::string> tensor_names;
    // Identifies the weights in saved session states; computed on the first save or restore of any
    // session on this model, then shared.
    std::shared_ptr<ember::ModelFingerprint> fingerprint = std::make_shared<ember::ModelFingerprint>();
    // The vocabulary as grammars need it (a trie of token bytes), built by the first grammar made for
    // this model and shared by all of them.
    mutable std::mutex grammar_vocab_mutex;
    mutable std::shared_ptr<const ember::grammar::GrammarVocab> grammar_vocab;
};

struct ember_grammar {
    std::shared_ptr<ember::grammar::CompiledGrammar> grammar;
};

struct ember_session {
    std::unique_ptr<ember::Session> session;
    std::string text;   // the text of the last ember_generate_next step (handed out by pointer)
    // ember_session_set_stop's strings for ember_generate_next, and where the last step left the session:
    // a step that finds the session elsewhere (fed, truncated, restored in between) starts the match anew.
    ember::StopStrings next_stop;
    uint32_t next_stop_position = 0;
    std::unique_ptr<ember::spec::Speculator> spec;   // attached speculation, if any
    uint32_t n_threads = 0;                          // from the params, for a draft's session
    std::atomic<bool> cancel{false};                 // ember_session_cancel: stops the call in progress
    // ember_session_cancel_arm was called: calls no longer clear `cancel` at entry (it stays until the
    // next arm), so a cancel that comes before a call still stops it.
    std::atomic<bool> cancel_sticky{false};
    bool free_pending = false;   // ember_session_free from ember_generate's callback: freed when it returns
    ember::abi::HandleOwner owner;   // the thread inside a call on it (exclusive_use.hpp)
};

struct ember_sampler {
    std::unique_ptr<ember::Sampler> sampler;
    bool free_pending = false;   // ember_sampler_free from ember_generate's callback: freed when it returns
    ember::abi::HandleOwner owner;   // the thread inside a call on it (exclusive_use.hpp)
};

struct ember_engine {
    std::unique_ptr<ember::Engine> engine;
    bool free_pending = false;   // ember_engine_free from a callback of ember_engine_step: freed when it returns
};

// A device of ember_devices(): made once per process, never freed.
struct ember_device {
    ember_backend_kind backend;
    ember_device_info info;   // info.index: the device's index within its backend
};

struct ember_request {
    std::shared_ptr<ember::Request> request;   // shared with the engine, which may outlive or predecease it
};

namespace ember::abi {

// The cache type a params struct names; an enumerator this library does not know is refused. By
// reference: copying the field would load a value the enum may not hold (enum_value reads its bytes).
inline DType kv_dtype(const ember_kv_type &t) {
    switch (enum_value(t)) {
    case EMBER_KV_F16: return DType::F16;
    case EMBER_KV_Q8_0: return DType::Q8_0;
    case EMBER_KV_Q4_0: return DType::Q4_0;
    default: fail(EMBER_ERR_INVALID_ARGUMENT, "unknown kv_type %lld", static_cast<long long>(enum_value(t)));
    }
}

// The backend of a device from ember_devices() (EMBER_ERR_INVALID_ARGUMENT for a pointer that is not one).
ember_backend_kind device_backend(const ember_device *device);
// The same, after making the device the one its backend opens (api_backend.cpp; see ember_devices()).
ember_backend_kind use_device(const ember_device *device);
// The handle of ember_devices() that a session or engine on backend `kind` runs on: the CPU's, or the
// device the GPU backend has open; NULL where that is the application's own (not listed).
const ember_device *device_in_use(ember_backend_kind kind);

// Writes `full` into the caller's struct, only as many bytes as its struct_size covers (an older caller's
// smaller struct gets the fields it knows). struct_size below the first version's size is an error.
template <class T>
void write_out(T *user, const T &full, size_t v1_size, const char *what) {
    if (user->struct_size < v1_size)
        fail(EMBER_ERR_INVALID_ARGUMENT, "%s.struct_size is %u, smaller than any version of the struct (%zu); "
             "call %s_init() first", what, user->struct_size, v1_size, what);
    const uint32_t size = user->struct_size;
    std::memcpy(static_cast<void *>(user), &full, size < sizeof(T) ? size : sizeof(T));
    user->struct_size = size;
}

// The C sampler params as the core's (api_sampler.cpp).
SamplerParams sampler_params_from(const ember_sampler_params &p);
// A caller's sampler params (any version) over the defaults (api_sampler.cpp).
ember_sampler_params read_sampler_params(const ember_sampler_params *params);
// Logprobs into the caller's buffers (api_grammar.cpp).
void request_logprobs_out(const TokenLogprob &s, const std::vector<TokenLogprob> &t, ember_token_logprob *sampled,
                          ember_token_logprob *top, size_t capacity, size_t *out_count);
// Stop strings from the C params (api_generate.cpp).
StopStrings stop_strings_from(const char *const *stop, size_t n_stop);

// Two-call idiom for byte output: reports the length and copies when the buffer is large enough.
// with_nul: the buffer must also hold a terminating NUL.
ember_status copy_out(std::string_view s, void *buf, size_t capacity, size_t *out_len, bool with_nul);

} // namespace ember::abi

namespace ember::abi {
// The entry of a call that uses a session or sampler: refused from a callback of a call still using it
// (refuse_reentry), and while another thread is inside a call on it (ExclusiveUse, held until the
// returned object goes). `claim` is the second check alone, for calls a callback may make.
inline ExclusiveUse claim(const ember_session *s, const char *fn) { return ExclusiveUse(s->owner, fn, "session"); }
inline ExclusiveUse claim(const ember_sampler *s, const char *fn) { return ExclusiveUse(s->owner, fn, "sampler"); }
template <class Handle> ExclusiveUse enter(const Handle *h, const char *fn) {
    refuse_reentry(h, fn);
    return claim(h, fn);
}

// Where a feed or generation starts: a plain session forgets an earlier cancel (it affects only a call
// in progress); an armed one keeps it. Returns whether the call is cancelled before it starts.
inline bool cancel_at_entry(ember_session &s) {
    if (!s.cancel_sticky.load(std::memory_order_relaxed)) {
        s.cancel.store(false, std::memory_order_relaxed);
        return false;
    }
    return s.cancel.load(std::memory_order_relaxed);
}
} // namespace ember::abi
