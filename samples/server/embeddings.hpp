// embeddings.hpp — ember-server for an embedding or reranking model (docs/embeddings.md): instead of the
// engine and the completion routes, one embedder behind POST /v1/embeddings (OpenAI's shape) and
// POST /v1/rerank (the shape Jina, Cohere and llama.cpp's server share), and GET /v1/models.
#pragma once

#include "server_options.hpp"

#include <ember/ember.h>

#include <csignal>

namespace server {

// Serves until SIGINT or SIGTERM (blocked in every thread, taken from `sigs`); returns the exit status.
// The embedder is used by one request at a time.
int serve_embeddings(const Options &opt, ember_model *model, ember_embedder *embedder, const sigset_t *sigs);

} // namespace server
