// embeddings.hpp — ember-server's embedding routes (docs/embeddings.md). POST /v1/embeddings (OpenAI's
// shape) submits embedding requests to the server's engine, which batches the texts of every client with
// the running chats in its forward passes: on an embedding model the engine serves embeddings alone, on a
// generating model beside the completion routes (the final hidden states pooled, "pooling": "mean" by
// default or "last"). A reranking model is served by one embedder here, POST /v1/rerank (the shape Jina,
// Cohere and llama.cpp's server share), one request at a time; the library's engine could batch its
// pairs too (ember_embed_request_params.query), which this sample does not use yet.
#pragma once

#include "http_server.hpp"
#include "server_options.hpp"

#include <ember/ember.h>

#include <csignal>
#include <mutex>
#include <string>

namespace server {

struct EmbeddingService {
    ember_model *model = nullptr;
    ember_engine *engine = nullptr;       // embeddings (NULL on a reranking model)
    ember_embedder *reranker = nullptr;   // a reranking model's (else NULL)
    std::string model_id;
    bool generating = false;              // the engine's model generates: requests name a pooling or get mean
    std::mutex rerank_mutex;              // one request at a time uses the reranker
};

// POST /v1/embeddings on the service's engine (the server on a generating model adds it beside its routes).
void add_embedding_route(HttpServer &svr, EmbeddingService &s);

// The server of an embedding or reranking model: GET /v1/models and the embedding or rerank route. Serves
// until SIGINT or SIGTERM (blocked in every thread, taken from `sigs`); returns the exit status.
int serve_embeddings(const Options &opt, EmbeddingService &s, const sigset_t *sigs);

} // namespace server
