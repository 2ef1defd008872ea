// test_engine_spec.cpp — speculative decoding in the engine (ember_engine_params.speculation), through the
// public API, on the CPU or on the backend named by the first argument ("vulkan"), on a synthetic qwen35
// file (recurrent layers) with a multi-token-prediction block whose heads are concentrated
// (mtp_model.hpp), so that drafts are kept now and then and refused now and then:
//   - several requests at once, some drafting and some not (ember_request_params.speculate), each gets
//     the tokens it gets from an engine without speculation, greedy and sampled with a seed, with the
//     MTP draft and with n-gram lookup; drafting requests count drafts and accepted ones, the others none;
//   - a request cancelled in the middle ends CANCELLED and the others' tokens are unchanged;
//   - a file without MTP layers, or a draft model, is refused at create with a message saying why.
// Random weights make the drafts poor, so no acceptance rate is asserted beyond "some, not all".
#include "test_util.h"

#include "ember/ember.h"
#include "mtp_model.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

ember_backend_kind g_backend = EMBER_BACKEND_CPU;
bool g_short = false;   // Vulkan (lavapipe with the validation layer): shorter generations

ember_model *load(const std::string &path) {
    ember_model *m = nullptr;
    if (ember_model_load(path.c_str(), nullptr, &m) != EMBER_OK) fail_msg("load: %s", ember_last_error());
    return m;
}

ember_engine *engine(ember_model *m, ember_spec_mode mode, uint32_t k) {
    ember_engine_params p;
    ember_engine_params_init(&p);
    p.n_ctx = 256;
    p.n_seq_max = 4;
    p.n_threads = 2;
    p.backend = g_backend;
    p.manual_step = true;
    p.speculation = mode;
    p.spec_k = k;
    ember_engine *e = nullptr;
    if (ember_engine_create(m, &p, &e) != EMBER_OK) fail_msg("engine: %s", ember_last_error());
    return e;
}

// Prompts of several lengths (past a block boundary, within one block) with repeats in them, so that
// n-gram lookup finds something to propose.
std::vector<std::vector<ember_token>> prompts(uint32_t n_vocab) {
    std::vector<std::vector<ember_token>> out;
    for (uint32_t salt = 0; salt < 4; ++salt) {
        std::vector<ember_token> t(7 + salt * 11);
        for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<ember_token>((i % 6 * 7 + 3 + salt * 13) % n_vocab);
        out.push_back(t);
    }
    return out;
}

struct Run {
    std::vector<std::vector<ember_token>> tokens;
    std::vector<ember_request_stats> stats;
    std::vector<ember_request_state> states;
};

// Submits every prompt at once (speculate[i] for request i), steps until all end, collects.
Run run(ember_engine *e, const std::vector<std::vector<ember_token>> &ps, const std::vector<bool> &speculate, bool sampled,
        uint32_t n_gen, int cancel_at_step = -1, size_t cancel_which = 0) {
    ember_sampler_params sp;
    ember_sampler_params_init(&sp);
    sp.temperature = sampled ? 0.9f : 0.0f;
    sp.top_k = 40;
    std::vector<ember_request *> rs(ps.size());
    for (size_t i = 0; i < ps.size(); ++i) {
        sp.seed = 1234 + static_cast<uint32_t>(i);
        ember_request_params rp;
        ember_request_params_init(&rp);
        assert_true(rp.speculate);   // the default
        rp.prompt = ps[i].data();
        rp.n_prompt = ps[i].size();
        rp.max_tokens = n_gen;
        rp.sampling = &sp;
        rp.speculate = speculate[i];
        if (ember_request_submit(e, &rp, &rs[i]) != EMBER_OK) fail_msg("submit: %s", ember_last_error());
    }
    bool busy = true;
    for (int step = 0; busy; ++step) {
        if (step == cancel_at_step) assert_int_equal(ember_request_cancel(rs[cancel_which]), EMBER_OK);
        if (ember_engine_step(e, &busy) != EMBER_OK) fail_msg("step: %s", ember_last_error());
        assert_true(step < 10000);
    }
    Run out;
    for (ember_request *r : rs) {
        std::vector<ember_token> t(n_gen + 1);
        size_t n = 0;
        ember_request_state st;
        assert_int_equal(ember_request_poll(r, t.data(), t.size(), &n, &st), EMBER_OK);
        t.resize(n);
        out.tokens.push_back(t);
        out.states.push_back(st);
        ember_request_stats s;
        ember_request_stats_init(&s);
        assert_int_equal(ember_request_get_stats(r, &s), EMBER_OK);
        assert_int_equal(s.n_tokens, n);
        out.stats.push_back(s);
        ember_request_free(r);
    }
    return out;
}

void expect_same(const char *what, size_t i, const std::vector<ember_token> &got, const std::vector<ember_token> &want) {
    if (got == want) return;
    size_t j = 0;
    while (j < got.size() && j < want.size() && got[j] == want[j]) ++j;
    fail_msg("%s, request %zu: tokens differ from the plain engine's at %zu (%zu vs %zu tokens)", what, i, j, got.size(), want.size());
}

void check_mode(ember_spec_mode mode, const char *family = "qwen35") {
    const bool qwen35 = std::strcmp(family, "qwen35") == 0;   // (concentrated heads make it repeat itself too)
    TempModelFile f{write_mtp_model(qwen35 ? mtp_spec(family) : ember::synthetic_family(family), qwen35)};
    ember_model *m = load(f.path);
    ember_model_info info;
    ember_model_info_init(&info);
    assert_int_equal(ember_model_get_info(m, &info), EMBER_OK);
    const auto ps = prompts(info.n_vocab);
    const uint32_t n_gen = g_short ? 8 : 24;
    const std::vector<bool> mixed = {true, false, true, true}, none(ps.size(), false);
    const std::string name = std::string(mode == EMBER_SPEC_MTP ? "mtp" : "lookup") + " " + family;
    // The plain engine's tokens, greedy and sampled.
    ember_engine *plain = engine(m, EMBER_SPEC_OFF, 4);
    const Run wants[2] = {run(plain, ps, none, false, n_gen), run(plain, ps, none, true, n_gen)};
    ember_engine_free(plain);
    for (uint32_t k : g_short ? std::vector<uint32_t>{3} : std::vector<uint32_t>{1, 3}) {
        ember_engine *e = engine(m, mode, k);
        for (bool sampled : {false, true}) {
            const Run &want = wants[sampled];
            char what[64];
            std::snprintf(what, sizeof what, "%s k %u %s", name.c_str(), k, sampled ? "sampled" : "greedy");
            const Run got = run(e, ps, mixed, sampled, n_gen);
            uint64_t drafted = 0, accepted = 0;
            for (size_t i = 0; i < ps.size(); ++i) {
                expect_same(what, i, got.tokens[i], want.tokens[i]);
                assert_int_equal(got.states[i], EMBER_REQUEST_DONE);
                const ember_request_stats &s = got.stats[i];
                assert_true(s.accepted <= s.drafted);
                if (!mixed[i]) assert_int_equal(s.drafted, 0);
                else if (s.drafted == 0 && mode == EMBER_SPEC_MTP) fail_msg("%s, request %zu: nothing drafted", what, i);
                assert_true(s.decode_steps > 0);
                drafted += s.drafted;
                accepted += s.accepted;
            }
            if (drafted == 0) fail_msg("%s: nothing drafted", what);
            std::printf("%s: %llu drafted, %llu accepted\n", what, (unsigned long long)drafted, (unsigned long long)accepted);
            // Greedy with concentrated heads (MTP: some drafts kept, most refused) or a model that repeats
            // itself (lookup: drafts kept).
            if (!sampled && (accepted == 0 || (mode == EMBER_SPEC_MTP && accepted == drafted)))
                fail_msg("%s: %llu of %llu drafts accepted: acceptance and rejection are not both exercised", what,
                         (unsigned long long)accepted, (unsigned long long)drafted);
            // A request cancelled after a few steps: it ends cancelled, the others as before.
            const Run cut = run(e, ps, mixed, sampled, n_gen, 6, 2);
            assert_int_equal(cut.states[2], EMBER_REQUEST_CANCELLED);
            assert_true(cut.tokens[2].size() < want.tokens[2].size());
            for (size_t i = 0; i < ps.size(); ++i)
                if (i != 2) expect_same("after a cancellation", i, cut.tokens[i], want.tokens[i]);
        }
        ember_engine_free(e);
    }
    ember_model_free(m);
}

void test_mtp(void **) { check_mode(EMBER_SPEC_MTP); }
void test_lookup(void **) { check_mode(EMBER_SPEC_LOOKUP); }
// A model of attention layers only: a rollback is a truncation alone.
void test_lookup_llama(void **) { check_mode(EMBER_SPEC_LOOKUP, "llama"); }

void test_refusals(void **) {
    ember::SyntheticSpec spec = ember::synthetic_family("qwen35");
    spec.n_nextn = 0;   // no MTP layers
    TempModelFile f{write_mtp_model(spec)};
    ember_model *m = load(f.path);
    ember_engine_params p;
    ember_engine_params_init(&p);
    assert_int_equal(p.speculation, EMBER_SPEC_OFF);
    assert_int_equal(p.spec_k, 4);
    p.n_ctx = 64;
    p.n_seq_max = 2;
    p.backend = g_backend;
    p.manual_step = true;
    p.speculation = EMBER_SPEC_MTP;
    ember_engine *e = nullptr;
    assert_int_equal(ember_engine_create(m, &p, &e), EMBER_ERR_INVALID_ARGUMENT);
    if (!std::strstr(ember_last_error(), "multi-token-prediction")) fail_msg("the refusal does not say why: %s", ember_last_error());
    p.speculation = EMBER_SPEC_DRAFT;
    assert_int_equal(ember_engine_create(m, &p, &e), EMBER_ERR_UNSUPPORTED);
    p.speculation = EMBER_SPEC_LOOKUP;
    p.spec_k = 0;
    assert_int_equal(ember_engine_create(m, &p, &e), EMBER_ERR_INVALID_ARGUMENT);
    p.spec_k = 99;
    assert_int_equal(ember_engine_create(m, &p, &e), EMBER_ERR_INVALID_ARGUMENT);
    assert_null(e);
    ember_model_free(m);
}

// The estimate counts what speculation adds: the second state slots (kv_bytes) and the MTP layer's
// context (compute_bytes); NULL arguments of the stats call are refused.
void test_estimate(void **) {
    TempModelFile f{write_mtp_model(mtp_spec("qwen35"))};
    ember_model *m = load(f.path);
    ember_engine_params p;
    ember_engine_params_init(&p);
    p.n_ctx = 128;
    p.n_seq_max = 4;
    p.backend = g_backend;
    ember_memory_estimate plain, spec;
    ember_memory_estimate_init(&plain);
    ember_memory_estimate_init(&spec);
    assert_int_equal(ember_estimate_memory(m, &p, &plain), EMBER_OK);
    p.speculation = EMBER_SPEC_MTP;
    assert_int_equal(ember_estimate_memory(m, &p, &spec), EMBER_OK);
    assert_true(spec.kv_bytes > plain.kv_bytes);
    assert_true(spec.compute_bytes > plain.compute_bytes);
    ember_request_stats st;
    ember_request_stats_init(&st);
    assert_int_equal(ember_request_get_stats(nullptr, &st), EMBER_ERR_INVALID_ARGUMENT);
    ember_model_free(m);
}

} // namespace

int main(int argc, char **argv) {
    if (const int rc = mtp_test_backend(argc, argv, &g_backend, &g_short); rc >= 0) return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mtp),
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_lookup_llama),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_estimate),
    };
    // On Vulkan (lavapipe with the validation layer: many times slower) the MTP draft alone: lookup's
    // part of a step runs on the host, the same on every backend.
    const struct CMUnitTest short_tests[] = {
        cmocka_unit_test(test_mtp),
    };
    return g_short ? cmocka_run_group_tests(short_tests, nullptr, nullptr) : cmocka_run_group_tests(tests, nullptr, nullptr);
}
