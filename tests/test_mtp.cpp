// test_mtp.cpp — a model's own multi-token-prediction layers as the speculative draft (EMBER_SPEC_MTP),
// through the public API, on the CPU or on the backend named by the first argument ("vulkan"):
//   - greedy and seeded sampled generation with the MTP draft give the tokens of plain generation, on
//     synthetic qwen35 and qwen35moe files (src/testing/synthetic.cpp) that carry an MTP block, with a
//     fixed k of 1 and 3 and with adaptive k, and again after a second prompt in the same session, and
//     when the draft is attached after the prompt was fed;
//   - the draft proposes (drafted > 0), and its acceptance is reported in the spec stats;
//   - a file without MTP layers asked for the draft gets EMBER_ERR_INVALID_ARGUMENT naming them.
// Random weights make the block's guesses poor, so no acceptance rate is asserted: the output must be the
// plain run's whatever the draft proposes, which is what losslessness means.
#include "test_util.h"

#include "ember/ember.h"
#include "mtp_model.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

ember_backend_kind g_backend = EMBER_BACKEND_CPU;
// On Vulkan (lavapipe in CI, with the validation layer: many times slower than the CPU) fewer cases run:
// one draft length and shorter generations.
bool g_short = false;

ember_model *load(const std::string &path) {
    ember_model *m = nullptr;
    if (ember_model_load(path.c_str(), nullptr, &m) != EMBER_OK) fail_msg("load: %s", ember_last_error());
    return m;
}

ember_session *session(ember_model *m) {
    ember_session_params p;
    ember_session_params_init(&p);
    p.n_ctx = 256;
    p.n_threads = 2;
    p.backend = g_backend;
    ember_session *s = nullptr;
    if (ember_session_create(m, &p, &s) != EMBER_OK) fail_msg("session: %s", ember_last_error());
    return s;
}

// Greedy (temperature 0), or sampled with a seed (top-k 40, temperature 0.9).
ember_sampler *sampler(bool sampled) {
    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = sampled ? 0.9f : 0.0f;
    sp.top_k = 40;
    sp.seed = 1234;
    ember_sampler *s = nullptr;
    assert_int_equal(ember_sampler_create(&sp, &s), EMBER_OK);
    return s;
}

bool collect(ember_token t, const char *, size_t, void *user) {
    static_cast<std::vector<ember_token> *>(user)->push_back(t);
    return true;
}

// Generates n tokens with ember_generate (speculating when speculation is attached).
std::vector<ember_token> generate(ember_session *s, bool sampled, uint32_t n) {
    ember_sampler *g = sampler(sampled);
    std::vector<ember_token> out;
    ember_generate_params gp;
    ember_generate_params_init(&gp);
    gp.max_tokens = n;
    gp.on_token = collect;
    gp.user_data = &out;
    const ember_status st = ember_generate(s, g, &gp, nullptr);
    if (st != EMBER_OK && st != EMBER_END_OF_GENERATION) fail_msg("generate: %s", ember_last_error());
    ember_sampler_free(g);
    return out;
}

// Feeds `prompt`, then generate().
std::vector<ember_token> run(ember_session *s, bool sampled, const std::vector<ember_token> &prompt, uint32_t n) {
    assert_int_equal(ember_session_feed(s, prompt.data(), prompt.size()), EMBER_OK);
    return generate(s, sampled, n);
}

std::vector<ember_token> prompt_tokens(size_t n, uint32_t n_vocab, uint32_t salt) {
    std::vector<ember_token> t(n);
    for (size_t i = 0; i < n; ++i) t[i] = static_cast<ember_token>((i * 7 + 3 + salt * 13 + (i / 5) % 3) % n_vocab);
    return t;
}

void expect_tokens(const char *family, const char *what, const std::vector<ember_token> &got,
                   const std::vector<ember_token> &want) {
    if (got == want) return;
    size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
    fail_msg("%s, %s: tokens differ from the plain run's at %zu of %zu", family, what, i, want.size());
}

void check_family(const char *family, bool concentrated) {
    TempModelFile f{write_mtp_model(mtp_spec(family), concentrated)};
    ember_model *m = load(f.path);
    int64_t n_mtp = 0;
    assert_int_equal(ember_model_meta_int(m, (std::string(family) + ".nextn_predict_layers").c_str(), &n_mtp), EMBER_OK);
    assert_int_equal(n_mtp, 1);
    ember_model_info info;
    ember_model_info_init(&info);
    assert_int_equal(ember_model_get_info(m, &info), EMBER_OK);
    const std::vector<ember_token> p1 = prompt_tokens(29, info.n_vocab, 0), p2 = prompt_tokens(7, info.n_vocab, 1);
    const uint32_t n_gen = g_short ? 10 : 24;

    for (bool sampled : {false, true}) {
        // The plain runs: a prompt, its continuation, a second prompt after it and its continuation.
        ember_session *a = session(m);
        const std::vector<ember_token> plain1 = run(a, sampled, p1, n_gen), plain2 = run(a, sampled, p2, n_gen);
        ember_session_free(a);

        struct Mode {
            uint32_t k;
            bool adaptive;
        };
        const std::vector<Mode> modes = g_short ? std::vector<Mode>{{3, false}} : std::vector<Mode>{{1, false}, {3, false}, {4, true}};
        for (const Mode mode : modes) {
            ember_session *s = session(m);
            ember_spec_params sp;
            ember_spec_params_init(&sp);
            sp.mode = EMBER_SPEC_MTP;
            sp.k = mode.k;
            sp.adaptive = mode.adaptive;
            if (ember_session_set_speculation(s, &sp) != EMBER_OK) fail_msg("%s: speculation: %s", family, ember_last_error());
            char what[64];
            std::snprintf(what, sizeof what, "%s, k %u%s", sampled ? "sampled" : "greedy", mode.k, mode.adaptive ? " adaptive" : "");
            expect_tokens(family, what, run(s, sampled, p1, n_gen), plain1);
            expect_tokens(family, what, run(s, sampled, p2, n_gen), plain2);
            ember_spec_stats st;
            ember_spec_stats_init(&st);
            assert_int_equal(ember_session_spec_stats(s, &st), EMBER_OK);
            if (st.drafted == 0) fail_msg("%s, %s: the MTP draft proposed nothing", family, what);
            // Concentrated heads: some drafts are kept and some refused (greedy: both happen).
            if (concentrated && !sampled && (st.accepted == 0 || st.accepted == st.drafted))
                fail_msg("%s, %s: %llu of %llu drafts accepted: the rounds do not mix acceptance and rejection", family,
                         what, (unsigned long long)st.accepted, (unsigned long long)st.drafted);
            assert_true(st.accepted <= st.drafted);
            assert_true(st.acceptance_rate >= 0 && st.acceptance_rate <= 1);
            std::printf("%s %s: %llu drafted, %llu accepted, %.2f tokens per target pass\n", family, what,
                        (unsigned long long)st.drafted, (unsigned long long)st.accepted, st.tokens_per_pass);
            // Detached: plain decoding goes on from where it was.
            assert_int_equal(ember_session_set_speculation(s, nullptr), EMBER_OK);
            ember_session_free(s);
        }
        if (g_short) continue;
        // Attached after the prompt was fed: the block starts from the first hidden row the session
        // records (the first round drafts nothing), and the output is still the plain run's.
        ember_session *late = session(m);
        assert_int_equal(ember_session_feed(late, p1.data(), p1.size()), EMBER_OK);
        ember_spec_params sp;
        ember_spec_params_init(&sp);
        sp.mode = EMBER_SPEC_MTP;
        sp.k = 2;
        sp.adaptive = false;
        assert_int_equal(ember_session_set_speculation(late, &sp), EMBER_OK);
        expect_tokens(family, "attached after the prompt", generate(late, sampled, n_gen), plain1);
        ember_spec_stats ss;
        ember_spec_stats_init(&ss);
        assert_int_equal(ember_session_spec_stats(late, &ss), EMBER_OK);
        assert_true(ss.drafted > 0);
        ember_session_free(late);
    }
    ember_model_free(m);
}

void test_qwen35(void **) { check_family("qwen35", false); }
void test_qwen35_concentrated(void **) { check_family("qwen35", true); }
void test_qwen35moe_concentrated(void **) { check_family("qwen35moe", true); }

// A file without MTP layers: a clear refusal, and the session keeps working without speculation.
void test_no_mtp_layers(void **) {
    ember::SyntheticSpec spec = ember::synthetic_family("qwen35");
    spec.n_nextn = 0;
    TempModelFile f{write_mtp_model(spec)};
    ember_model *m = load(f.path);
    ember_session *s = session(m);
    ember_spec_params sp;
    ember_spec_params_init(&sp);
    sp.mode = EMBER_SPEC_MTP;
    assert_int_equal(ember_session_set_speculation(s, &sp), EMBER_ERR_INVALID_ARGUMENT);
    if (!std::strstr(ember_last_error(), "multi-token-prediction"))
        fail_msg("the refusal does not say what is missing: %s", ember_last_error());
    ember_spec_stats st;
    ember_spec_stats_init(&st);
    assert_int_equal(ember_session_spec_stats(s, &st), EMBER_ERR_INVALID_STATE);
    ember_session_free(s);
    ember_model_free(m);
}

} // namespace

int main(int argc, char **argv) {
    if (const int rc = mtp_test_backend(argc, argv, &g_backend, &g_short); rc >= 0) return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen35),
        cmocka_unit_test(test_qwen35_concentrated),
        cmocka_unit_test(test_qwen35moe_concentrated),
        cmocka_unit_test(test_no_mtp_layers),
    };
    const struct CMUnitTest short_tests[] = {
        cmocka_unit_test(test_qwen35_concentrated),
        cmocka_unit_test(test_no_mtp_layers),
    };
    return g_short ? cmocka_run_group_tests(short_tests, nullptr, nullptr) : cmocka_run_group_tests(tests, nullptr, nullptr);
}
