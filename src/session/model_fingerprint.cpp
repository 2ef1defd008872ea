#include "session/model_fingerprint.hpp"

#define XXH_INLINE_ALL   // header-only: libember gains no run-time dependency
#include <xxhash.h>

namespace ember {

uint64_t fingerprint_model(const Model &m) {
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    auto add = [&](const void *p, size_t n) { XXH3_64bits_update(&state, p, n); };
    const HParams &hp = m.desc().hp;
    for (uint64_t v : {uint64_t{hp.n_vocab}, uint64_t{hp.n_embd}, uint64_t{hp.n_layer}, uint64_t{hp.n_head},
                       uint64_t{hp.n_head_kv}, uint64_t{hp.head_dim}, uint64_t{hp.n_ff}, m.n_params(), m.size_bytes()})
        add(&v, sizeof v);
    // Every tensor of the file: its name, type and shape, then its bytes.
    for (const gguf::TensorInfo &t : m.gguf().tensors()) {
        const uint64_t name_len = t.name.size(), type = static_cast<uint64_t>(t.type);
        add(&name_len, sizeof name_len);
        add(t.name.data(), t.name.size());
        add(&type, sizeof type);
        add(t.ne, sizeof t.ne);
        add(&t.n_bytes, sizeof t.n_bytes);
        if (t.data && t.n_bytes) add(t.data, t.n_bytes);
    }
    return XXH3_64bits_digest(&state);
}

} // namespace ember
