// model_fingerprint.hpp — what identifies a model in a saved session state.
//
// A state restored into another model would run with a KV cache the weights never produced (a copy of
// stories260K with three tensors negated restored its original's state with logits off by 23.5), so the
// fingerprint covers the shapes and every byte of every tensor: XXH3-64 (xxHash, header-only) over the
// tensor data, computed once per model on first use (the first save or restore) and shared by every
// session on it. Its cost is one read of the weights (docs/reliability.md measures it).
#pragma once

#include "model/model.hpp"

#include <cstdint>
#include <mutex>

namespace ember {

// The full fingerprint (hashes every tensor now; callers go through ModelFingerprint to do it once).
uint64_t fingerprint_model(const Model &model);

// The fingerprint of one model, computed on first use. The ember_model handle owns one and hands it to
// each session made on it (SessionOptions::fingerprint), so the weights are read once per model.
class ModelFingerprint {
public:
    uint64_t get(const Model &model) {
        std::call_once(once_, [&] { value_ = fingerprint_model(model); });
        return value_;
    }

private:
    std::once_flag once_;
    uint64_t value_ = 0;
};

} // namespace ember
