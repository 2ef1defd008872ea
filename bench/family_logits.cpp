// family_logits.cpp — `ember-family-logits`: one model's full-vocabulary logits for bench/compare_logits.mjs,
// teacher-forced on given tokens: the fp64 reference's (src/testing/reference_forward.cpp), Ember's CPU
// prefill (position t's logits from one batch of tokens 0..t) and decode (one token per step), and
// Ember's greedy continuation. Ember runs through its public API, as an application would; prints one
// JSON object. --reference-only: the reference's logits alone (for a family Ember does not run).
//
//   ember-family-logits MODEL.gguf TOKEN,TOKEN,... [--greedy N] [--threads N] [--precision default|high]
//                       [--reference-only 1]
#include "ember/ember.h"
#include "testing/reference_forward.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

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

void check(ember_status s, const char *what) {
    if (s != EMBER_OK) {
        std::fprintf(stderr, "ember-family-logits: %s: %s\n", what, ember_last_error());
        std::exit(1);
    }
}

std::vector<float> logits(ember_session *s) {
    const float *l = nullptr;
    size_t n = 0;
    check(ember_session_logits(s, &l, &n), "logits");
    return std::vector<float>(l, l + n);
}

} // namespace

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: ember-family-logits MODEL.gguf TOKEN,TOKEN,... [--greedy N] [--threads N] "
                             "[--precision default|high] [--reference-only 1]\n");
        return 2;
    }
    std::vector<ember_token> tokens;
    for (const char *p = argv[2]; *p;) {
        char *end;
        tokens.push_back(static_cast<ember_token>(std::strtol(p, &end, 10)));
        if (end == p) break;
        p = *end == ',' ? end + 1 : end;
    }
    int greedy = 0, threads = 2;
    bool reference_only = false;
    ember_precision precision = EMBER_PRECISION_DEFAULT;
    for (int i = 3; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "--greedy") greedy = std::atoi(argv[i + 1]);
        else if (k == "--threads") threads = std::atoi(argv[i + 1]);
        else if (k == "--precision") precision = std::string(argv[i + 1]) == "high" ? EMBER_PRECISION_HIGH : EMBER_PRECISION_DEFAULT;
        else if (k == "--reference-only") reference_only = std::atoi(argv[i + 1]) != 0;
    }
    std::vector<std::vector<double>> ref;
    try {
        ref = ember::reference_logits_file(argv[1], std::vector<int32_t>(tokens.begin(), tokens.end()));
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ember-family-logits: reference: %s\n", e.what());
        return 1;
    }
    if (reference_only) {
        std::printf("{");
        print_rows("ref", ref);
        std::printf("}\n");
        return 0;
    }
    ember_model_params mp;
    ember_model_params_init(&mp);
    ember_model *model = nullptr;
    check(ember_model_load(argv[1], &mp, &model), "load");
    ember_session_params sp;
    ember_session_params_init(&sp);
    sp.n_ctx = static_cast<uint32_t>(tokens.size() + greedy + 16);
    sp.n_threads = static_cast<uint32_t>(threads);
    sp.backend = EMBER_BACKEND_CPU;
    ember_session *s = nullptr;
    check(ember_session_create(model, &sp, &s), "session");
    check(ember_session_set_precision(s, precision), "precision");
    // Prefill: tokens 0..t in one batch, for each t.
    std::vector<std::vector<float>> prefill, decode;
    for (size_t t = 0; t < tokens.size(); ++t) {
        check(ember_session_truncate(s, 0), "truncate");
        check(ember_session_feed(s, tokens.data(), t + 1), "feed");
        prefill.push_back(logits(s));
    }
    std::vector<ember_token> gen;
    for (int g = 0; g < greedy; ++g) {
        const std::vector<float> l = logits(s);
        const ember_token next = static_cast<ember_token>(std::max_element(l.begin(), l.end()) - l.begin());
        gen.push_back(next);
        check(ember_session_feed(s, &next, 1), "feed");
    }
    check(ember_session_truncate(s, 0), "truncate");
    for (size_t t = 0; t < tokens.size(); ++t) {
        check(ember_session_feed(s, &tokens[t], 1), "feed");
        decode.push_back(logits(s));
    }
    ember_session_free(s);
    ember_model_free(model);
    std::printf("{");
    print_rows("ref", ref);
    std::printf(",");
    print_rows("prefill", prefill);
    std::printf(",");
    print_rows("decode", decode);
    std::printf(",\"greedy\":[");
    for (size_t i = 0; i < gen.size(); ++i) std::printf("%s%d", i ? "," : "", gen[i]);
    std::printf("]}\n");
    return 0;
}
