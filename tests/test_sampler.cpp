// test_sampler.cpp — the sampling chain: each stage's effect, seeded repeatability, and that draws follow
// the distribution they should (frequency bounds chosen at > 5 standard deviations for the draw counts).
#include "test_util.h"

#include "core/error.hpp"
#include "sampler/sampler.hpp"
#include "sampler/stop_strings.hpp"

#include <cmath>
#include <vector>

using ember::Sampler;
using ember::SamplerParams;

static std::vector<float> log_probs(const std::vector<double> &p) {
    std::vector<float> l;
    for (double x : p) l.push_back(static_cast<float>(std::log(x)));
    return l;
}

static std::vector<double> frequencies(Sampler &s, const std::vector<float> &logits, int draws) {
    std::vector<double> f(logits.size(), 0.0);
    for (int i = 0; i < draws; ++i) f[static_cast<size_t>(s.sample(logits.data(), logits.size()))] += 1.0 / draws;
    return f;
}

// Logit bias: added after the penalties; -100 or less bans (even every token but one), and a banned
// token is never drawn by seeded sampling; bad biases are refused; ids beyond the vocabulary fail.
static void test_logit_bias(void **) {
    SamplerParams p;
    p.temperature = 0;
    Sampler g(p);
    const std::vector<float> l = {1.0f, 3.0f, 2.9f, -1.0f};
    g.set_logit_bias({{1, -0.5f}});
    assert_int_equal(g.sample(l.data(), l.size()), 2);   // 3.0 - 0.5 < 2.9
    g.set_logit_bias({{3, 5.0f}});
    assert_int_equal(g.sample(l.data(), l.size()), 3);   // -1 + 5 wins
    g.set_logit_bias({{1, -100.0f}, {2, -100.0f}, {0, -1000.0f}});
    assert_int_equal(g.sample(l.data(), l.size()), 3);   // the only token not banned
    g.set_logit_bias({});
    assert_int_equal(g.sample(l.data(), l.size()), 1);
    SamplerParams t;
    t.temperature = 1.0f;
    t.seed = 5;
    Sampler s(t);
    s.set_logit_bias({{1, -100.0f}});
    const std::vector<double> f = frequencies(s, l, 2000);
    assert_true(f[1] == 0.0);
    assert_true(f[2] > 0.5);
    for (float bad : {std::nanf(""), INFINITY}) {
        try {
            s.set_logit_bias({{0, bad}});
            fail_msg("a bias of %g was accepted", static_cast<double>(bad));
        } catch (const ember::Error &e) {
            assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
        }
    }
    s.set_logit_bias({{9, 1.0f}});
    try {
        s.sample(l.data(), l.size());
        fail_msg("a bias beyond the vocabulary was sampled");
    } catch (const ember::Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
    }
}

static void test_greedy_and_penalties(void **) {
    SamplerParams p;
    p.temperature = 0;
    Sampler g(p);
    std::vector<float> l = {1.0f, 3.0f, 2.9f, -1.0f};
    assert_int_equal(g.sample(l.data(), l.size()), 1);

    p.repeat_penalty = 1.5f;  // 3.0 / 1.5 = 2.0 < 2.9
    Sampler r(p);
    r.accept(1);
    assert_int_equal(r.sample(l.data(), l.size()), 2);
    r.reset();  // history cleared
    assert_int_equal(r.sample(l.data(), l.size()), 1);

    SamplerParams f;
    f.temperature = 0;
    f.frequency_penalty = 0.06f;  // twice seen: 3.0 - 0.12 < 2.9
    Sampler fr(f);
    fr.accept(1);
    assert_int_equal(fr.sample(l.data(), l.size()), 1);  // once: 2.94 > 2.9
    fr.accept(1);
    assert_int_equal(fr.sample(l.data(), l.size()), 2);

    SamplerParams pr;
    pr.temperature = 0;
    pr.presence_penalty = 0.2f;
    pr.penalty_last_n = 1;  // only the last token counts
    Sampler ps(pr);
    ps.accept(1);
    assert_int_equal(ps.sample(l.data(), l.size()), 2);
    ps.accept(3);  // 1 falls out of the window
    assert_int_equal(ps.sample(l.data(), l.size()), 1);
}

static void test_distribution(void **) {
    const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
    const auto l = log_probs(probs);
    SamplerParams p;
    p.seed = 42;
    Sampler s(p);
    const int draws = 40000;
    const auto f = frequencies(s, l, draws);
    for (size_t i = 0; i < probs.size(); ++i) {
        const double sd = std::sqrt(probs[i] * (1 - probs[i]) / draws);
        assert_true(std::fabs(f[i] - probs[i]) < 6 * sd);
    }
}

static void test_truncation_stages(void **) {
    const auto l = log_probs({0.5, 0.3, 0.15, 0.05});
    SamplerParams k;
    k.top_k = 2;
    Sampler sk(k);
    auto f = frequencies(sk, l, 20000);
    assert_true(f[2] == 0 && f[3] == 0);
    assert_true(std::fabs(f[0] - 0.625) < 0.03);  // renormalised 0.5 / 0.8

    SamplerParams tp;
    tp.top_p = 0.75f;  // 0.5 + 0.3 reaches it: two survive
    Sampler stp(tp);
    f = frequencies(stp, l, 20000);
    assert_true(f[2] == 0 && f[3] == 0 && f[1] > 0.3);

    SamplerParams mp;
    mp.min_p = 0.25f;  // cut at 0.125: the 0.05 token goes
    Sampler smp(mp);
    f = frequencies(smp, l, 20000);
    assert_true(f[3] == 0 && f[2] > 0.1);

    SamplerParams cold;
    cold.temperature = 0.25f;  // p^4 renormalised: 0.0625 / (0.0625 + 0.0081 + ...) ≈ 0.88
    Sampler sc(cold);
    f = frequencies(sc, l, 20000);
    assert_true(f[0] > 0.85 && f[0] < 0.91);
}

static void test_seed_repeatability(void **) {
    const auto l = log_probs({0.25, 0.25, 0.25, 0.25});
    SamplerParams p;
    p.seed = 7;
    Sampler a(p), b(p);
    std::vector<int> sa, sb;
    for (int i = 0; i < 200; ++i) {
        sa.push_back(a.sample(l.data(), l.size()));
        sb.push_back(b.sample(l.data(), l.size()));
    }
    assert_true(sa == sb);
    a.reset();
    for (int i = 0; i < 200; ++i) assert_int_equal(a.sample(l.data(), l.size()), sa[static_cast<size_t>(i)]);
    p.seed = 8;
    Sampler c(p);
    int same = 0;
    for (int i = 0; i < 200; ++i) same += c.sample(l.data(), l.size()) == sa[static_cast<size_t>(i)];
    assert_true(same < 120);  // independent streams agree ~50 times in 200
}

static void test_invalid(void **) {
    auto bad = [](SamplerParams p) {
        try {
            Sampler s(p);
        } catch (const ember::Error &e) {
            return e.status() == EMBER_ERR_INVALID_ARGUMENT;
        }
        return false;
    };
    SamplerParams p;
    p.top_p = 1.5f;
    assert_true(bad(p));
    p = {};
    p.min_p = -0.1f;
    assert_true(bad(p));
    p = {};
    p.repeat_penalty = 0;
    assert_true(bad(p));
    p = {};
    p.temperature = NAN;
    assert_true(bad(p));
    p = {};
    p.penalty_last_n = -1;
    assert_true(bad(p));
}

// Where some logit is +inf, the +inf tokens share the whole probability: temperature sampling chose a
// -inf token for every seed when it came after the +inf one (exp(inf - inf) is NaN), with and without
// the truncation stages.
static void test_infinite_logits(void **) {
    const float inf = INFINITY;
    for (int variant = 0; variant < 3; ++variant) {
        for (uint64_t seed = 0; seed < 200; ++seed) {
            SamplerParams p;
            p.temperature = 0.7f;
            p.seed = seed;
            if (variant == 1) p.top_p = 0.9f;
            if (variant == 2) p.top_k = 2;
            Sampler s(p);
            const std::vector<float> logits = {0.5f, inf, -inf, 1.0f, inf, -inf};
            const int32_t t = s.sample(logits.data(), logits.size());
            if (t != 1 && t != 4) fail_msg("variant %d seed %llu: token %d drawn, not a +inf one", variant, (unsigned long long)seed, t);
        }
    }
}

// Stop strings match whole UTF-8 characters: one that is not valid UTF-8 (a lone continuation byte,
// half of "é") is refused; before, "\xA9" matched inside "é" and the text out ended in a lone 0xC3.
static void test_stop_strings_utf8(void **) {
    for (const char *bad : {"\xA9", "\xC3", "ab\xC3"}) {
        try {
            ember::StopStrings s({bad});
            fail_msg("stop string '%s' accepted", bad);
        } catch (const ember::Error &e) {
            assert_int_equal(e.status(), EMBER_ERR_INVALID_ARGUMENT);
        }
    }
    ember::StopStrings s({"\xC3\xA9!"});
    std::string out = s.push("caf\xC3\xA9");
    out += s.push("!x");
    assert_true(s.stopped());
    assert_string_equal(out.c_str(), "caf");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_and_penalties), cmocka_unit_test(test_distribution),
        cmocka_unit_test(test_truncation_stages),    cmocka_unit_test(test_seed_repeatability),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_infinite_logits),
        cmocka_unit_test(test_stop_strings_utf8),
        cmocka_unit_test(test_logit_bias),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
