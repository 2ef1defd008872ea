// generation.cpp — one HTTP request's life on the shared engine.
//
// Text arrives on the engine's thread (on_token) and is read by the HTTP worker that owns the request.
// Stop sequences, the JSON Schema of response_format and logprobs are the library's (ember_request_params
// stop and grammar, ember_sampler_params.n_logprobs): the engine ends a request at a stop sequence and
// never hands out its text, holding back what could still become one until the next token decides.
#include "generation.hpp"
#include "tool_calls.hpp"

#include "prompt.hpp"

#include <algorithm>
#include <random>

namespace server {

ServerContext::ServerContext(ember_model *model, ember_engine *engine, std::string model_id, uint32_t n_ctx,
                             size_t max_pending)
    : model_(model), engine_(engine), model_id_(std::move(model_id)), n_ctx_(n_ctx),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()),
      max_pending_(max_pending), grammars_(model, GrammarCache::Limits{}) {}

bool ServerContext::reserve() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pending_ >= max_pending_) return false;
    ++pending_;
    return true;
}

void ServerContext::release() {
    std::lock_guard<std::mutex> lock(mutex_);
    --pending_;
}

bool ServerContext::enroll(Generation *g) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    live_.insert(g);
    return true;
}

void ServerContext::withdraw(Generation *g) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(g);
}

void ServerContext::shut_down() {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (Generation *g : live_) g->cancel();
}

namespace {
ApiError engine_error(ember_status st, const std::string &what, const char *message) {
    ApiError e;
    e.code = ember_status_string(st);
    e.message = what + ": " + (message && *message ? message : ember_status_string(st));
    if (st == EMBER_ERR_INVALID_ARGUMENT) {
        e.http_status = 400;
    } else if (st == EMBER_ERR_INVALID_STATE) {
        e.http_status = 503;  // the engine is shutting down
        e.type = "server_error";
    } else {
        e.http_status = 500;
        e.type = "server_error";
    }
    return e;
}
} // namespace

Generation::Generation(ServerContext &ctx, uint32_t max_tokens, size_t n_prompt, int32_t top_logprobs)
    : ctx_(ctx), max_tokens_(max_tokens), n_prompt_(n_prompt), top_logprobs_(top_logprobs) {}

Generation::~Generation() {
    if (enrolled_) ctx_.withdraw(this);
    // Waits out a callback in flight and cancels the request if it still runs.
    ember_request_free(request_);
    if (!schema_.empty()) ctx_.grammars().used(schema_);
    if (reserved_) ctx_.release();
}

std::shared_ptr<Generation> Generation::start(ServerContext &ctx, const CompletionRequest &req, ApiError *err) {
    // A place first, before any work (the prompt's tokenization included) is done for the request.
    if (!ctx.reserve()) {
        err->http_status = 503;
        err->type = "server_error";
        err->code = "server_busy";
        err->message = "the server holds as many requests as it takes (--max-pending); retry later";
        return nullptr;
    }
    struct Place {   // handed to the Generation once it exists
        ServerContext &ctx;
        bool held = true;
        ~Place() { if (held) ctx.release(); }
    } place{ctx};
    std::vector<ember_token> prompt;
    if (auto e = build_prompt(ctx.model(), req, &prompt, ctx.chat_template())) return *err = *e, nullptr;
    if (prompt.size() >= ctx.n_ctx()) {
        err->http_status = 400;
        err->code = "context_length_exceeded";
        err->message = "the prompt has " + std::to_string(prompt.size()) + " tokens, but the context holds " +
                       std::to_string(ctx.n_ctx()) + " (prompt and output together; the server's -c option)";
        return nullptr;
    }
    // OpenAI's defaults: chat generates until the end (0 for the engine), completions 16 tokens.
    const uint32_t max_tokens = req.max_tokens ? *req.max_tokens : (req.endpoint == Endpoint::chat ? 0u : 16u);
    std::shared_ptr<Generation> g(new Generation(ctx, max_tokens, prompt.size(), req.logprobs ? req.top_logprobs : -1));
    g->reserved_ = true;
    place.held = false;
    if (req.max_tokens && *req.max_tokens == 0) {
        // Nothing to generate (the engine would read 0 as "no limit"): an empty, finished output.
        g->ending_ = Ending::length;
        return g;
    }

    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = req.temperature;
    sp.top_p = req.top_p;
    sp.top_k = req.top_k;
    sp.seed = req.seed ? *req.seed : std::random_device{}();
    sp.n_logprobs = req.logprobs ? std::max<int32_t>(req.top_logprobs, 1) : 0;
    std::shared_ptr<ember_grammar> grammar;
    if (!req.json_schema.empty()) {
        std::string why;
        if (!(grammar = ctx.grammars().get(req.json_schema, &why))) {
            err->http_status = 400;
            err->code = "invalid_response_format";
            err->message = "response_format: " + why;
            return nullptr;
        }
    }
    // tool_choice: a grammar of the family's calls, and the opener to put in the prompt where it is a
    // control token. The request takes its own reference to the grammar.
    ToolConstraint tools;
    if (auto e = tool_constraint(ctx.model(), req.tools, ctx.chat_template(), ctx.grammars(), &tools)) return *err = *e, nullptr;
    const std::shared_ptr<ember_grammar> &tool_grammar = tools.grammar;
    if (tool_grammar && grammar) {
        err->http_status = 400;
        err->code = "invalid_value";
        err->message = "response_format and a tool_choice that constrains the reply cannot be combined";
        return nullptr;
    }
    if (!tools.prefix.empty()) {
        std::vector<ember_token> more;
        size_t n = 0;
        ember_tokenize(ctx.model(), tools.prefix.data(), tools.prefix.size(), EMBER_TOKENIZE_PARSE_SPECIAL, nullptr, 0, &n);
        more.resize(n);
        if (ember_tokenize(ctx.model(), tools.prefix.data(), tools.prefix.size(), EMBER_TOKENIZE_PARSE_SPECIAL,
                           more.data(), more.size(), &n) != EMBER_OK)
            return *err = engine_error(EMBER_ERR_INVALID_ARGUMENT, "tokenizing the tool prefix", ember_last_error()), nullptr;
        prompt.insert(prompt.end(), more.begin(), more.begin() + static_cast<long>(n));
        g->tool_prefix_ = tools.prefix;
    }
    std::vector<const char *> stops;
    for (const std::string &s : req.stop) stops.push_back(s.c_str());
    ember_request_params rp;
    ember_request_params_init(&rp);
    rp.prompt = prompt.data();
    rp.n_prompt = prompt.size();
    rp.max_tokens = max_tokens;
    rp.sampling = &sp;
    rp.on_token = &Generation::on_token;
    rp.user_data = g.get();
    rp.grammar = tool_grammar ? tool_grammar.get() : grammar.get();
    g->schema_ = tool_grammar ? tools.key : grammar ? req.json_schema : std::string();
    rp.stop = stops.data();
    rp.n_stop = stops.size();
    const ember_status st = ember_request_submit(ctx.engine(), &rp, &g->request_);   // takes its own grammar reference
    if (st != EMBER_OK) return *err = engine_error(st, "submitting the request", ember_last_error()), nullptr;
    // Enrolled after the submit, so that a shutdown either sees the request (and cancels it) or refuses it here.
    if (!(g->enrolled_ = ctx.enroll(g.get()))) {
        *err = engine_error(EMBER_ERR_INVALID_STATE, "refused", "the server is shutting down");
        return nullptr;  // g's destructor cancels and frees the request
    }
    return g;
}

bool Generation::on_token(ember_request *, ember_token, const char *text, size_t len, void *user_data) {
    Generation &g = *static_cast<Generation *>(user_data);
    bool go_on;
    {
        std::lock_guard<std::mutex> lock(g.mutex_);
        ++g.n_tokens_;
        go_on = g.absorb(text, len);
    }
    g.changed_.notify_all();
    return go_on;
}

bool Generation::absorb(const char *text, size_t len) {
    text_.append(text, len);
    released_ = text_.size();   // the engine already held back what a stop sequence may claim
    return true;
}

void Generation::settle() {
    if (ending_ != Ending::running) return;
    ember_request_state state = EMBER_REQUEST_QUEUED;
    if (ember_request_poll(request_, nullptr, 0, nullptr, &state) != EMBER_OK) state = EMBER_REQUEST_FAILED;
    if (state == EMBER_REQUEST_QUEUED || state == EMBER_REQUEST_RUNNING) return;
    if (state == EMBER_REQUEST_DONE) {
        // Bytes of a character the last token left incomplete come only with the final text.
        size_t len = 0;
        ember_request_text(request_, nullptr, 0, &len);
        if (len > text_.size()) {
            std::string all(len + 1, '\0');
            if (ember_request_text(request_, all.data(), all.size(), &len) == EMBER_OK && len > text_.size())
                absorb(all.data() + text_.size(), len - text_.size());
        }
        const bool length = (max_tokens_ && n_tokens_ >= max_tokens_) || n_prompt_ + n_tokens_ >= ctx_.n_ctx();
        // A stop sequence or end of generation is "stop"; the token limit or a full context "length".
        ending_ = length ? Ending::length : Ending::stop;
    } else if (state == EMBER_REQUEST_CANCELLED) {
        ending_ = Ending::cancelled;
    } else {
        const char *message = nullptr;
        if (ember_request_error(request_, &error_status_, &message) != EMBER_OK || error_status_ == EMBER_OK)
            error_status_ = EMBER_ERR_INTERNAL;
        error_message_ = message && *message ? message : ember_status_string(error_status_);
        ending_ = Ending::failed;
    }
    released_ = text_.size();  // nothing more comes: held-back text is output after all
}

Ending Generation::next(std::string *piece, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (ending_ == Ending::running && released_ == taken_)
        changed_.wait_for(lock, timeout, [&] { return released_ > taken_; });
    if (ending_ == Ending::running && released_ == taken_) {
        // No text came: the request may have ended (end of generation or cancelled: no callback says so).
        lock.unlock();
        const bool ended = ember_request_wait(request_, 0) == EMBER_OK;
        lock.lock();
        if (ended) settle();
    }
    piece->append(text_, taken_, released_ - taken_);
    taken_ = released_;
    return taken_ == text_.size() ? ending_ : Ending::running;
}

Ending Generation::wait_all(std::string *text, bool (*abandoned)()) {
    if (request_) {
        bool cancelled = false;
        while (ember_request_wait(request_, abandoned ? 100 : UINT32_MAX) != EMBER_OK)
            if (!cancelled && abandoned()) {
                cancel();
                cancelled = true;
            }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (request_) settle();
    *text = text_;
    taken_ = text_.size();
    return ending_;
}

void Generation::cancel() {
    if (request_) ember_request_cancel(request_);
}

Usage Generation::usage() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return Usage{n_prompt_, n_tokens_};
}

std::vector<TokenLogprobs> Generation::logprobs() const {
    std::vector<TokenLogprobs> out;
    if (top_logprobs_ < 0 || !request_) return out;
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<ember_token_logprob> top(static_cast<size_t>(std::max<int32_t>(top_logprobs_, 1)));
    auto piece = [&](ember_token id) {
        size_t len = 0;
        ember_token_to_piece(ctx_.model(), id, 0, nullptr, 0, &len);
        std::string p(len, '\0');
        if (len) ember_token_to_piece(ctx_.model(), id, 0, p.data(), p.size(), &len);
        return p;
    };
    for (size_t i = 0;; ++i) {
        ember_token_logprob sampled;
        size_t n = 0;
        if (ember_request_logprobs(request_, i, &sampled, top.data(), top.size(), &n) != EMBER_OK) break;
        TokenLogprobs t{piece(sampled.token), sampled.logprob, {}};
        for (size_t k = 0; k < std::min<size_t>(n, static_cast<size_t>(top_logprobs_)); ++k)
            t.top.emplace_back(piece(top[k].token), top[k].logprob);
        out.push_back(std::move(t));
    }
    return out;
}

ApiError Generation::failure() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return engine_error(error_status_, "generation failed", error_message_.c_str());
}

} // namespace server
