// main.cpp — ember-server: loads one model, creates one engine, and serves the OpenAI API over HTTP
// until SIGINT or SIGTERM. Every HTTP worker submits into that engine, which batches the requests
// running at each step (continuous batching), so concurrent clients share each forward pass: chats and
// embeddings alike.
#include "embeddings.hpp"
#include "generation.hpp"
#include "http_routes.hpp"
#include "http_server.hpp"
#include "server_options.hpp"

#include <ember/ember.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <pthread.h>
#include <thread>

namespace {

void log_to_stderr(ember_log_level level, const char *message, void *) {
    if (level >= EMBER_LOG_WARN) std::fprintf(stderr, "ember: %s\n", message);
}

// Signals are taken by one thread with sigtimedwait (blocked everywhere else), so that the shutdown
// runs as ordinary code: cancel the requests in flight, then stop the listener. stop() is repeated
// until listen returns, since a signal may come before the listener is up.
void watch_signals(const sigset_t *set, const std::atomic<bool> *listen_done, std::atomic<bool> *signalled,
                   server::ServerContext *ctx, server::HttpServer *svr) {
    const timespec tick{0, 100 * 1000 * 1000};
    bool stopping = false;
    while (!listen_done->load()) {
        if (!stopping) {
            const int sig = sigtimedwait(set, nullptr, &tick);
            if (sig <= 0) continue;
            std::fprintf(stderr, "ember-server: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
            stopping = true;
            *signalled = true;
            ctx->shut_down();
        }
        svr->stop();
        nanosleep(&tick, nullptr);
    }
}

} // namespace

int main(int argc, char **argv) {
    server::Options opt;
    bool exit_now = false;
    if (!server::parse_options(argc, argv, &opt, &exit_now)) return 2;
    if (exit_now) return 0;

    // Before any thread exists, so that every thread inherits the mask.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not the end of the server

    ember_log_set(log_to_stderr, nullptr, EMBER_LOG_WARN);
    ember_model *model = nullptr;
    ember_status st = ember_model_load(opt.model_path.c_str(), nullptr, &model);
    if (st != EMBER_OK) {
        std::fprintf(stderr, "ember-server: cannot load %s: %s\n", opt.model_path.c_str(), ember_last_error());
        return 1;
    }
    ember_model_info info;
    ember_model_info_init(&info);
    ember_model_get_info(model, &info);

    // A reranking model gets one embedder behind /v1/rerank instead of the engine; an embedding model an
    // engine that serves /v1/embeddings alone; a generating model an engine that serves both the
    // completions and /v1/embeddings (embeddings.hpp). An embedder is made only where the model has a
    // pooling type, which is how the kinds are told apart.
    ember_embed_params emp;
    ember_embed_params_init(&emp);
    emp.n_threads = opt.n_threads;
    emp.backend = opt.backend;
    server::EmbeddingService embedding;
    embedding.model = model;
    embedding.model_id = opt.model_id;
    bool embedding_model = false;
    if (ember_embedder *embedder = nullptr; ember_embedder_create(model, &emp, &embedder) == EMBER_OK) {
        embedding_model = true;
        if (ember_embedder_is_reranker(embedder)) {
            embedding.reranker = embedder;
            const int rc = server::serve_embeddings(opt, embedding, &sigs);
            ember_embedder_free(embedder);
            ember_model_free(model);
            std::fprintf(stderr, "ember-server: stopped\n");
            return rc;
        }
        ember_embedder_free(embedder);
    }

    ember_engine_params ep;
    ember_engine_params_init(&ep);
    ep.n_seq_max = opt.n_parallel;
    ep.n_ctx = opt.n_ctx;
    ep.n_threads = opt.n_threads;
    ep.backend = opt.backend;
    ep.speculation = embedding_model ? EMBER_SPEC_OFF : opt.speculation;   // (nothing to draft on an embedding model)
    ep.spec_k = opt.spec_k;
    ember_engine *engine = nullptr;
    if ((st = ember_engine_create(model, &ep, &engine)) != EMBER_OK) {
        std::fprintf(stderr, "ember-server: cannot create the engine: %s\n", ember_last_error());
        ember_model_free(model);
        return 1;
    }
    embedding.engine = engine;
    if (embedding_model) {
        const int rc = server::serve_embeddings(opt, embedding, &sigs);
        ember_engine_free(engine);
        ember_model_free(model);
        std::fprintf(stderr, "ember-server: stopped\n");
        return rc;
    }
    embedding.generating = true;
    // The engine's own default, which the prompt-length check must know.
    const uint32_t n_ctx = opt.n_ctx ? opt.n_ctx : (info.n_ctx_train && info.n_ctx_train < 4096 ? info.n_ctx_train : 4096);

    int rc = 0;
    {
        server::ServerContext ctx(model, engine, opt.model_id, n_ctx, opt.max_pending);
        ctx.set_chat_template(opt.chat_template);
        server::HttpServer::Limits limits;
        limits.header_timeout = std::chrono::milliseconds(opt.header_timeout_ms);
        limits.body_timeout = std::chrono::milliseconds(opt.body_timeout_ms);
        limits.max_body = opt.max_body;
        limits.threads = opt.http_threads;
        limits.max_connections = opt.max_connections;
        server::HttpServer svr(limits);
        const size_t n_http = opt.http_threads;
        server::add_routes(svr, ctx, opt.max_body, opt.verbose);
        server::add_embedding_route(svr, embedding);   // embeddings beside the chats, batched by the same engine

        const int port = svr.bind(opt.host, opt.port);
        if (port <= 0) {
            std::fprintf(stderr, "ember-server: cannot listen on %s:%d\n", opt.host.c_str(), opt.port);
            rc = 1;
        } else {
            std::atomic<bool> listen_done{false}, signalled{false};
            std::thread watcher(watch_signals, &sigs, &listen_done, &signalled, &ctx, &svr);
            std::fprintf(stderr, "ember-server: model %s (%s), context %u tokens, %u parallel, %u pending at most, "
                         "%zu HTTP threads, %u connections\n", opt.model_id.c_str(), info.architecture, n_ctx, opt.n_parallel,
                         opt.max_pending, n_http, opt.max_connections);
            std::printf("listening on http://%s:%d\n", opt.host.c_str(), port);
            std::fflush(stdout);
            bool listened = false;
            try {
                listened = svr.listen_after_bind();
            } catch (const std::exception &e) {   // the connection loop could not start (no file descriptors)
                std::fprintf(stderr, "ember-server: %s\n", e.what());
            }
            if (!listened && !signalled) rc = 1;
            // listen returns once the workers are joined: no request is left to use the engine.
            listen_done = true;
            watcher.join();
            ctx.shut_down();
        }
    }
    ember_engine_free(engine);
    ember_model_free(model);
    std::fprintf(stderr, "ember-server: stopped\n");
    return rc;
}
