// fuzz_session_state.cpp — libFuzzer target: arbitrary bytes as a saved session state
// (ember_session_restore), into sessions on models/stories260K.gguf with an f16, a Q8_0 and a Q4_0 cache.
//
// A checksum guards the format, so random bytes stop at it. To get past it, the input's first byte says
// what to repair in the rest before restoring: bit 0 the trailing checksum, bit 1 the model fingerprint,
// bit 2 picks the Q8_0 session, bit 3 the Q4_0 one (over bit 2). The repairs mirror src/session/session_state.cpp; the initializer checks
// them on a real save, so a format change that leaves them stale stops the fuzzer instead of weakening it.
// Promises checked: restore gives EMBER_OK, EMBER_ERR_CORRUPT_DATA, EMBER_ERR_CONTEXT_FULL or
// EMBER_ERR_OUT_OF_MEMORY; a refused state leaves the session as it was (its own saved bytes do not
// change); an accepted one can be used (fed, generated from when it has logits, saved again).
#include "fuzz_util.hpp"
#include "session/state_checksum.hpp"

#include <ember/ember.h>

#include <cstdint>
#include <cstring>
#include <vector>

using namespace ember;

namespace {

constexpr size_t kFingerprintAt = 16;

ember_model *g_model;
ember_session *g_session[3];   // f16, Q8_0, Q4_0
ember_sampler *g_sampler;
uint8_t g_fingerprint[8];

std::vector<uint8_t> save(const ember_session *s) {
    size_t len = 0;
    if (ember_session_save(s, nullptr, 0, &len) != EMBER_OK) fuzz::broken("ember_session_save (size) failed");
    std::vector<uint8_t> out(len);
    if (ember_session_save(s, out.data(), out.size(), &len) != EMBER_OK) fuzz::broken("ember_session_save failed");
    return out;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    const std::string path = fuzz::repo_model("stories260K.gguf");
    if (path.empty()) fuzz::broken("models/stories260K.gguf not found (set EMBER_REPO_MODELS)");
    if (ember_model_load(path.c_str(), nullptr, &g_model) != EMBER_OK) fuzz::broken("cannot load", path.c_str());
    const ember_kv_type types[3] = {EMBER_KV_F16, EMBER_KV_Q8_0, EMBER_KV_Q4_0};
    for (int i = 0; i < 3; ++i) {
        ember_session_params sp;
        ember_session_params_init(&sp);
        sp.n_ctx = 64;
        sp.n_threads = 1;
        sp.kv_type = types[i];
        if (ember_session_create(g_model, &sp, &g_session[i]) != EMBER_OK) fuzz::broken("cannot create a session");
    }
    ember_sampler_params smp;
    ember_sampler_params_init(&smp);
    smp.temperature = 0;
    ember_sampler_create(&smp, &g_sampler);
    // The repairs must match the format: check them on a real state.
    const ember_token prompt[3] = {1, 403, 407};
    ember_session_feed(g_session[0], prompt, 3);
    const std::vector<uint8_t> real = save(g_session[0]);
    uint64_t stored;
    std::memcpy(&stored, real.data() + real.size() - 8, 8);
    if (ember::state_checksum(real.data(), real.size() - 8) != stored)
        fuzz::broken("the fuzzer's checksum no longer matches src/session/session_state.cpp: update it");
    std::memcpy(g_fingerprint, real.data() + kFingerprintAt, 8);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const uint8_t mode = data[0];
    std::vector<uint8_t> state(data + 1, data + size);
    if ((mode & 2) && state.size() >= kFingerprintAt + 8) std::memcpy(state.data() + kFingerprintAt, g_fingerprint, 8);
    if ((mode & 1) && state.size() >= 8) {
        const uint64_t sum = ember::state_checksum(state.data(), state.size() - 8);
        std::memcpy(state.data() + state.size() - 8, &sum, 8);
    }
    ember_session *s = g_session[(mode & 8) ? 2 : (mode >> 2) & 1];
    const std::vector<uint8_t> before = save(s);
    const ember_status st = ember_session_restore(s, state.data(), state.size());
    if (st != EMBER_OK) {
        if (st != EMBER_ERR_CORRUPT_DATA && st != EMBER_ERR_CONTEXT_FULL && st != EMBER_ERR_OUT_OF_MEMORY)
            fuzz::broken("ember_session_restore gave an undocumented status", ember_last_error());
        if (save(s) != before) fuzz::broken("a refused state changed the session");
        return 0;
    }
    // Accepted: the session must be usable, and saving it again gives a state that restores.
    const float *logits = nullptr;
    size_t n_vocab = 0;
    if (ember_session_logits(s, &logits, &n_vocab) == EMBER_OK) {
        ember_token t;
        const ember_status g = ember_generate_next(s, g_sampler, &t, nullptr, nullptr);
        if (g != EMBER_OK && g != EMBER_END_OF_GENERATION && g != EMBER_ERR_CONTEXT_FULL)
            fuzz::broken("generation after an accepted restore failed", ember_last_error());
    }
    uint32_t pos = 0;
    ember_session_position(s, &pos);
    if (pos < 64) {
        const ember_token one = 1;
        if (ember_session_feed(s, &one, 1) != EMBER_OK) fuzz::broken("feeding after an accepted restore failed");
    }
    const std::vector<uint8_t> again = save(s);
    if (ember_session_restore(s, again.data(), again.size()) != EMBER_OK)
        fuzz::broken("a state saved after an accepted restore does not restore");
    ember_session_truncate(s, 0);
    return 0;
}
