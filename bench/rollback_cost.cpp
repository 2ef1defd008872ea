// rollback_cost.cpp — ember-rollback-cost MODEL [K=4] [ROUNDS=5]: what speculative rollback costs on a model
// with recurrent layers (docs/model-families.md, "Speculation"), both ways in one process: a session that
// re-feeds the accepted tokens from the verifying feed's start (kept_states 0, as before per-token states)
// and one whose verifying feed keeps each token's state (kept_states K, what the speculator does now).
// After a 64-token prompt, per round and per session (which goes first alternates between rounds, so both
// see the same load): one decode step; then for each number of accepted drafts, a verifying feed of K + 1
// tokens (every row's logits, as the speculator asks) and a truncation keeping 1 + that many. Besides, the
// price of copying one sequence's state (state_bytes_per_sequence) once. One JSON line of seconds, with the
// load average before and after.
#include "backend/backend.hpp"
#include "model/model.hpp"
#include "session/session.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string loadavg() {
    std::ifstream f("/proc/loadavg");
    double a = 0, b = 0, c = 0;
    f >> a >> b >> c;
    char buf[64];
    std::snprintf(buf, sizeof buf, "[%.2f, %.2f, %.2f]", a, b, c);
    return buf;
}

struct Mode {
    const char *name;
    ember::Session *s;
    bool keep;
    double decode = 0, verify = 0;
    std::vector<double> truncate;
};

} // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: ember-rollback-cost MODEL [K] [ROUNDS]\n");
        return 2;
    }
    const uint32_t K = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 4;
    const int R = argc > 3 ? std::atoi(argv[3]) : 5;
    if (K < 1 || K > 16 || R < 1) {
        std::fprintf(stderr, "K must be 1..16 and ROUNDS at least 1\n");
        return 2;
    }
    try {
        const auto model = ember::Model::load(argv[1], ember::LoadOptions{});
        const size_t sb = ember::state_bytes(model->desc().c);
        ember::SessionOptions o;
        o.n_ctx = 1024, o.n_threads = 2, o.backend = EMBER_BACKEND_CPU;
        o.kept_states = 0;
        ember::Session refeed(*model, o);
        o.kept_states = K;
        o.share_threads_with = &refeed;   // one set of workers for both: they take turns
        ember::Session kept(*model, o);
        const uint32_t nv = model->desc().hp.n_vocab;
        std::vector<int32_t> prompt(64), v(K + 1);
        for (int i = 0; i < 64; ++i) prompt[i] = static_cast<int32_t>((100 + i) % nv);
        for (uint32_t i = 0; i <= K; ++i) v[i] = static_cast<int32_t>((200 + i) % nv);
        std::vector<float> rows(size_t{K + 1} * nv);
        Mode modes[2] = {{"refeed", &refeed, false, 0, 0, std::vector<double>(K + 1)},
                         {"kept", &kept, true, 0, 0, std::vector<double>(K + 1)}};
        for (Mode &m : modes) m.s->feed(prompt.data(), prompt.size());
        const std::string load_before = loadavg();
        for (int r = 0; r < R; ++r) {
            for (int i = 0; i < 2; ++i) {
                Mode &m = modes[(i + r) % 2];
                const int32_t one = 7;
                double a = now();
                m.s->feed(&one, 1);   // a decode step
                m.decode += now() - a;
                for (uint32_t keep = 0; keep <= K; ++keep) {
                    const uint32_t pos = m.s->position();
                    a = now();
                    m.s->feed(v.data(), v.size(), rows.data(), nullptr, m.keep);   // the verifying pass
                    m.verify += now() - a;
                    a = now();
                    m.s->truncate(pos + 1 + keep, rows.data() + size_t{keep} * nv);   // 1 + keep accepted
                    m.truncate[keep] += now() - a;
                    m.s->truncate(pos);
                }
            }
        }
        // One state copied (what keeping a state by copying it would cost per token).
        std::vector<char> src(sb, 1), dst(sb, 2);
        double a = now();
        for (int r = 0; r < 20; ++r) std::memcpy(dst.data(), src.data(), sb);
        const double copy = (now() - a) / 20;
        std::printf("{\"state_bytes\": %zu, \"K\": %u, \"rounds\": %d, \"loadavg_before\": %s, \"loadavg_after\": %s, "
                    "\"state_copy_s\": %.5f",
                    sb, K, R, load_before.c_str(), loadavg().c_str(), copy);
        for (const Mode &m : modes) {
            std::printf(", \"%s\": {\"decode_step_s\": %.4f, \"verify_pass_s\": %.4f, \"truncate_keep_s\": [", m.name,
                        m.decode / R, m.verify / (R * (K + 1)));
            for (uint32_t keep = 0; keep <= K; ++keep) std::printf("%s%.4f", keep ? ", " : "", m.truncate[keep] / R);
            std::printf("]}");
        }
        std::printf("}\n");
        return dst[0] == 1 ? 0 : 1;   // the copies are read, so the compiler keeps them
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
}
