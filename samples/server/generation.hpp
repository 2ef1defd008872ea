// generation.hpp — the bridge between HTTP requests and the one ember engine they all share: prompt
// tokens in, text out (as it comes, for streaming; stop sequences and response_format applied by the
// library), requests cancelled on disconnect or shutdown.
#pragma once

#include "grammar_cache.hpp"
#include "openai_json.hpp"

#include <ember/ember.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace server {

class Generation;

// What every request handler shares: the model, the engine and the requests in flight (so that a
// shutdown can cancel them all).
class ServerContext {
public:
    // max_pending: generations held at once (running or waiting for a slot of the engine); more are
    // refused with 503 and Retry-After rather than queued without bound.
    ServerContext(ember_model *model, ember_engine *engine, std::string model_id, uint32_t n_ctx, size_t max_pending);

    const ember_model *model() const { return model_; }
    ember_engine *engine() const { return engine_; }
    const std::string &model_id() const { return model_id_; }
    // The chat template of --chat-template-file, or NULL for the model's own.
    const char *chat_template() const { return chat_template_.empty() ? nullptr : chat_template_.c_str(); }
    void set_chat_template(std::string t) { chat_template_ = std::move(t); }
    uint32_t n_ctx() const { return n_ctx_; }
    int64_t created() const { return created_; }

    // Refuses new requests and cancels those in flight (their handlers then finish quickly).
    void shut_down();

    // The grammars of response_format schemas (grammar_cache.hpp).
    GrammarCache &grammars() { return grammars_; }

private:
    friend class Generation;
    bool enroll(Generation *g);   // false once shutting down
    void withdraw(Generation *g);
    bool reserve();               // a place among max_pending, false when all are taken
    void release();

    ember_model *model_;
    ember_engine *engine_;
    std::string model_id_;
    std::string chat_template_;
    uint32_t n_ctx_;
    int64_t created_;
    std::mutex mutex_;
    std::set<Generation *> live_;
    bool stopping_ = false;
    const size_t max_pending_;
    size_t pending_ = 0;   // reserved places (under mutex_)
    GrammarCache grammars_;
};

// Why a generation ended.
enum class Ending { running, stop, length, cancelled, failed };

// One request on the engine. Created by start(); the handler (or the stream provider) that holds it
// reads text with next() or wait_all(); destroying it frees (and so cancels) the engine request.
class Generation {
public:
    // Builds the prompt (chat template or text) and submits it. On failure returns nullptr and *err
    // says why (400 for a prompt that does not fit, 500 for an engine error, 503 when shutting down, or
    // 503 with code "server_busy" when max_pending generations are held already).
    static std::shared_ptr<Generation> start(ServerContext &ctx, const CompletionRequest &req, ApiError *err);
    ~Generation();
    Generation(const Generation &) = delete;
    Generation &operator=(const Generation &) = delete;

    // Streaming: waits up to `timeout` for text beyond what was taken already and appends it to *piece.
    // Returns the ending once the request has ended and all of its text has been taken (Ending::running
    // while more may come).
    Ending next(std::string *piece, std::chrono::milliseconds timeout);
    // Non-streaming: waits for the end; *text receives the whole output. `abandoned` (may be null) is
    // asked every 100 ms: when it says true, the request is cancelled (its client has gone).
    Ending wait_all(std::string *text, bool (*abandoned)() = nullptr);
    // Cancels the engine request (a client that went away).
    void cancel();

    Usage usage() const;
    // When the request asked for logprobs: each generated token's (after the request ended).
    std::vector<TokenLogprobs> logprobs() const;
    bool wants_logprobs() const { return top_logprobs_ >= 0; }
    // The text tool_choice appended to the prompt (a control-token opener the reply continues), "" mostly.
    const std::string &tool_prefix() const { return tool_prefix_; }
    // For Ending::failed: the engine's status and message.
    ApiError failure() const;

private:
    Generation(ServerContext &ctx, uint32_t max_tokens, size_t n_prompt, int32_t top_logprobs);
    static bool on_token(ember_request *, ember_token, const char *text, size_t len, void *user_data);
    // With mutex_ held: appends engine text (already cut at a stop sequence by the engine).
    bool absorb(const char *text, size_t len);
    // With mutex_ held: once the engine request has ended, records how (and flushes its held-back tail).
    void settle();

    ServerContext &ctx_;
    ember_request *request_ = nullptr;
    const uint32_t max_tokens_;
    const size_t n_prompt_;
    const int32_t top_logprobs_;   // -1: no logprobs asked for
    bool enrolled_ = false;
    bool reserved_ = false;   // holds a place of ServerContext's max_pending
    std::string schema_;      // the cache key of its grammar (a schema's text, a tool set's key; "" for none): measured at the end
    std::string tool_prefix_;

    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::string text_;        // output so far, cut at a stop sequence if one matched
    size_t released_ = 0;     // bytes of text_ ready to hand out
    size_t taken_ = 0;        // bytes of text_ handed out by next()
    size_t n_tokens_ = 0;     // tokens generated (the end-of-generation token is not counted)
    Ending ending_ = Ending::running;
    ember_status error_status_ = EMBER_OK;
    std::string error_message_;
};

} // namespace server
