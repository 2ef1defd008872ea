// family_logits.cpp — `ember-family-logits`: one model's full-vocabulary logits for bench/compare_logits.mjs,
// teacher-forced on given tokens: the fp64 reference's (src/testing/reference_forward.cpp), Ember's CPU
// prefill (every position's logits from one batch) and decode (one token per step), and Ember's greedy
// continuation. Prints one JSON object.
//
//   ember-family-logits MODEL.gguf TOKEN,TOKEN,... [--greedy N] [--threads N]
#include "core/error.hpp"
#include "model/model.hpp"
#include "session/session.hpp"
#include "testing/reference_forward.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace ember;

namespace {

template <class T>
void print_rows(const char *key, const std::vector<std::vector<T>> &rows) {
    std::printf("\"%s\":[", key);
    for (size_t r = 0; r < rows.size(); ++r) {
        std::printf("%s[", r ? "," : "");
        for (size_t i = 0; i < rows[r].size(); ++i) std::printf("%s%.9g", i ? "," : "", static_cast<double>(rows[r][i]));
        std::printf("]");
    }
    std::printf("]");
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: ember-family-logits MODEL.gguf TOKEN,TOKEN,... [--greedy N] [--threads N]\n");
        return 2;
    }
    std::vector<int32_t> tokens;
    for (const char *p = argv[2]; *p;) {
        char *end;
        tokens.push_back(static_cast<int32_t>(std::strtol(p, &end, 10)));
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p) break;
    }
    int greedy = 0, threads = 2;
    for (int i = 3; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "--greedy") greedy = std::atoi(argv[i + 1]);
        else if (k == "--threads") threads = std::atoi(argv[i + 1]);
    }
    try {
        auto model = Model::load(argv[1], LoadOptions{});
        const auto ref = reference_logits(*model, tokens);
        SessionOptions o;
        o.n_ctx = static_cast<uint32_t>(tokens.size() + greedy + 16);
        o.n_threads = threads;
        Session s(*model, o);
        const size_t nv = s.n_vocab();
        std::vector<float> all(tokens.size() * nv);
        s.feed(tokens.data(), tokens.size(), all.data());
        std::vector<std::vector<float>> prefill(tokens.size());
        for (size_t t = 0; t < tokens.size(); ++t) prefill[t].assign(all.begin() + t * nv, all.begin() + (t + 1) * nv);
        std::vector<int32_t> gen;
        for (int g = 0; g < greedy; ++g) {
            const float *l = s.logits();
            const int32_t next = static_cast<int32_t>(std::max_element(l, l + nv) - l);
            gen.push_back(next);
            s.feed(&next, 1);
        }
        Session d(*model, o);
        std::vector<std::vector<float>> decode(tokens.size());
        for (size_t t = 0; t < tokens.size(); ++t) {
            d.feed(&tokens[t], 1);
            decode[t].assign(d.logits(), d.logits() + nv);
        }
        std::printf("{");
        print_rows("ref", ref);
        std::printf(",");
        print_rows("prefill", prefill);
        std::printf(",");
        print_rows("decode", decode);
        std::printf(",\"greedy\":[");
        for (size_t i = 0; i < gen.size(); ++i) std::printf("%s%d", i ? "," : "", gen[i]);
        std::printf("]}\n");
    } catch (const Error &e) {
        std::fprintf(stderr, "ember-family-logits: %s\n", e.what());
        return 1;
    }
    return 0;
}
