// test_spec_accept.cpp — the pieces of speculative decoding that need no model: the acceptance rule
// gives tokens distributed exactly as the target's p whatever the draft's q (checked by chi-square over
// many draws, for q close to p, far from p, with support p lacks, and a point mass), greedy acceptance
// is deterministic, the sampler's pending-history penalties equal accepting first, and n-gram lookup
// proposes what followed the latest earlier occurrence of the suffix.
#include "test_util.h"

#include "spec/acceptance.hpp"
#include "spec/lookup.hpp"

#include <cmath>
#include <random>
#include <vector>

using ember::Sampler;
using ember::SamplerParams;
using ember::TokenDist;
using ember::spec::AcceptScratch;
using ember::spec::Verdict;
using ember::spec::accept_or_replace;

namespace {

TokenDist dist(const std::vector<std::pair<int32_t, double>> &entries) {
    TokenDist d;
    for (auto [id, w] : entries) {
        d.ids.push_back(id);
        d.w.push_back(w);
        d.total += w;
    }
    return d;
}

// Upper critical value of chi-square with df degrees of freedom at significance 1e-4 (Wilson-Hilferty:
// ((X/df)^(1/3) - (1 - 2/(9 df))) / sqrt(2/(9 df)) is close to a standard normal; z(1e-4) = 3.719).
double chi2_critical(int df) {
    const double a = 2.0 / (9.0 * df), z = 3.719;
    const double c = 1 - a + z * std::sqrt(a);
    return df * c * c * c;
}

// Draws x ~ q (with its own generator, as a draft would) n times, applies the rule, and checks the
// outputs against p with a chi-square test over p's support (a token outside it is an outright failure).
void check_lossless(const TokenDist &p, const TokenDist *q, int32_t point, size_t n_vocab, uint64_t seed, const char *what) {
    SamplerParams sp;
    sp.temperature = 1.0f;
    sp.seed = seed;
    Sampler s(sp);
    std::mt19937_64 draft_rng(seed * 7 + 1);
    AcceptScratch scratch;
    std::vector<double> count(n_vocab, 0.0);
    const int n = 60000;
    int accepted = 0;
    for (int i = 0; i < n; ++i) {
        int32_t x = point;
        if (q) {
            double r = std::uniform_real_distribution<double>(0.0, q->total)(draft_rng), acc = 0;
            x = q->ids.back();
            for (size_t j = 0; j < q->ids.size(); ++j)
                if (r < (acc += q->w[j])) { x = q->ids[j]; break; }
        }
        const Verdict v = accept_or_replace(p, q, x, n_vocab, s, scratch);
        accepted += v.accepted;
        count[static_cast<size_t>(v.token)] += 1;
    }
    double chi2 = 0;
    double in_support = 0;
    for (size_t j = 0; j < p.ids.size(); ++j) {
        const double e = n * p.w[j] / p.total;
        const double o = count[static_cast<size_t>(p.ids[j])];
        chi2 += (o - e) * (o - e) / e;
        in_support += o;
    }
    const double crit = chi2_critical(static_cast<int>(p.ids.size()) - 1);
    print_message("%s: acceptance %.3f, chi2 %.2f (critical %.2f, df %zu)\n", what, accepted / double(n), chi2, crit,
                  p.ids.size() - 1);
    if (in_support != n) fail_msg("%s: %.0f of %d tokens outside p's support", what, n - in_support, n);
    if (!(chi2 < crit)) fail_msg("%s: chi2 %.2f >= %.2f: the output is not distributed as p", what, chi2, crit);
}

} // namespace

static void test_lossless_acceptance(void **) {
    const size_t V = 12;
    const TokenDist p = dist({{0, 0.30}, {1, 0.25}, {2, 0.15}, {3, 0.12}, {5, 0.08}, {7, 0.06}, {9, 0.04}});
    // q close to p; q far from p; q with mass on tokens p lacks (10, 11) and none on some p has; a point mass
    // on p's top token and on a token p lacks.
    const TokenDist near = dist({{0, 0.28}, {1, 0.27}, {2, 0.14}, {3, 0.13}, {5, 0.07}, {7, 0.07}, {9, 0.04}});
    const TokenDist far = dist({{9, 0.5}, {7, 0.3}, {0, 0.1}, {1, 0.1}});
    const TokenDist odd = dist({{10, 0.4}, {11, 0.2}, {2, 0.3}, {3, 0.1}});
    check_lossless(p, &near, -1, V, 1, "q near p");
    check_lossless(p, &far, -1, V, 2, "q far from p");
    check_lossless(p, &odd, -1, V, 3, "q off p's support");
    check_lossless(p, nullptr, 0, V, 4, "point mass on p's mode");
    check_lossless(p, nullptr, 11, V, 5, "point mass outside p");
    check_lossless(p, nullptr, 7, V, 6, "point mass on a rare token");
}

// Greedy p is a point mass: x is kept iff it is p's token, otherwise p's token replaces it, and no
// random number is drawn either way (the generator's next output is unchanged).
static void test_greedy_acceptance(void **) {
    SamplerParams sp;
    sp.temperature = 0;
    Sampler s(sp), fresh(sp);
    AcceptScratch scratch;
    const TokenDist p = dist({{4, 1.0}});
    const TokenDist q = dist({{4, 0.2}, {6, 0.8}});
    Verdict v = accept_or_replace(p, &q, 4, 8, s, scratch);
    assert_true(v.accepted && v.token == 4);
    v = accept_or_replace(p, &q, 6, 8, s, scratch);
    assert_true(!v.accepted && v.token == 4);
    v = accept_or_replace(p, nullptr, 2, 8, s, scratch);
    assert_true(!v.accepted && v.token == 4);
    assert_true(s.uniform() == fresh.uniform());
}

// distribution() with pending tokens equals accepting them first, penalties included.
static void test_pending_history(void **) {
    SamplerParams sp;
    sp.temperature = 0.9f;
    sp.repeat_penalty = 1.3f;
    sp.frequency_penalty = 0.2f;
    sp.penalty_last_n = 3;
    Sampler a(sp), b(sp);
    std::vector<float> l = {0.5f, 2.0f, 1.5f, -0.5f, 1.0f, 0.0f};
    for (int32_t t : {1, 4}) a.accept(t), b.accept(t);
    const int32_t pending[] = {2, 1};
    TokenDist da, db;
    a.distribution(l.data(), l.size(), pending, 2, da);
    for (int32_t t : pending) b.accept(t);
    b.distribution(l.data(), l.size(), nullptr, 0, db);
    assert_int_equal(da.ids.size(), db.ids.size());
    for (size_t i = 0; i < da.ids.size(); ++i) {
        assert_int_equal(da.ids[i], db.ids[i]);
        assert_true(da.w[i] == db.w[i]);
    }
}

static void test_lookup(void **) {
    using ember::spec::lookup_proposal;
    // ... 5 6 7 8 9 ... 5 6 7 | the suffix 5 6 7 recurs: propose 8 9 ...
    const std::vector<int32_t> h = {1, 5, 6, 7, 8, 9, 2, 3, 5, 6, 7};
    std::vector<int32_t> got = lookup_proposal(h, 3, 1, 3);
    assert_int_equal(got.size(), 3);
    assert_int_equal(got[0], 8);
    assert_int_equal(got[1], 9);
    assert_int_equal(got[2], 2);
    // The most recent earlier occurrence wins: 4 follows the later "3".
    const std::vector<int32_t> h2 = {3, 1, 0, 3, 4, 0, 3};
    got = lookup_proposal(h2, 1, 1, 1);
    assert_int_equal(got.size(), 1);
    assert_int_equal(got[0], 4);
    // Proposals stop at the end of the history; a suffix that never recurred proposes nothing.
    got = lookup_proposal({7, 8, 7}, 5, 1, 2);
    assert_int_equal(got.size(), 2);
    assert_int_equal(got[0], 8);
    assert_int_equal(got[1], 7);
    assert_int_equal(lookup_proposal({1, 2, 3}, 4, 1, 3).size(), 0);
    assert_int_equal(lookup_proposal({}, 4, 1, 3).size(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lossless_acceptance),
        cmocka_unit_test(test_greedy_acceptance),
        cmocka_unit_test(test_pending_history),
        cmocka_unit_test(test_lookup),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
