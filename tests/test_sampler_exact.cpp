// test_sampler_exact.cpp — the sampling chain's fast paths draw exactly what the chain did when it
// sorted every candidate (std::sort / std::partial_sort): the same survivors, the same weights bit for
// bit, and so the same token for the same seed. The reference below is that earlier chain, kept as it
// was; it runs on stories15M's real logits (a generation's positions) for many seeds, temperatures,
// top-k, top-p, min-p and penalty settings, and the orderings alone run on made-up logits full of ties,
// signed zeros and -inf.
#include "test_util.h"

#include "model/model.hpp"
#include "sampler/logit_order.hpp"
#include "sampler/sampler.hpp"
#include "session/session.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <random>
#include <unordered_map>
#include <vector>

using namespace ember;

namespace {

// The chain as it was (sampler.cpp before the linear-time orderings), without a grammar: penalties,
// greedy or sort → top-k → top-p → min-p → temperature, then the draw.
class ReferenceSampler {
public:
    explicit ReferenceSampler(const SamplerParams &p) : p_(p), rng_(p.seed) {}
    void accept(int32_t t) {
        if (p_.penalty_last_n == 0) return;
        history_.push_back(t);
        while (history_.size() > static_cast<size_t>(p_.penalty_last_n)) history_.pop_front();
    }
    void distribution(const float *logits, size_t n_vocab, TokenDist &out) {
        out.clear();
        std::vector<float> pen(logits, logits + n_vocab);
        if (!history_.empty() && (p_.repeat_penalty != 1.0f || p_.frequency_penalty != 0.0f || p_.presence_penalty != 0.0f)) {
            std::unordered_map<int32_t, int> counts;
            for (int32_t t : history_) ++counts[t];
            for (const auto &[id, count] : counts) {
                float &x = pen[static_cast<size_t>(id)];
                x = x > 0 ? x / p_.repeat_penalty : x * p_.repeat_penalty;
                x -= static_cast<float>(count) * p_.frequency_penalty + p_.presence_penalty;
            }
        }
        const float *l = pen.data();
        if (p_.temperature <= 0.0f) {
            size_t best = 0;
            for (size_t i = 1; i < n_vocab; ++i)
                if (l[i] > l[best]) best = i;
            out.ids.push_back(static_cast<int32_t>(best));
            out.w.push_back(1.0);
            out.total = 1.0;
            return;
        }
        struct Cand { int32_t id; float logit; };
        auto by_logit = [](const Cand &a, const Cand &b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
        std::vector<Cand> cand;
        for (size_t i = 0; i < n_vocab; ++i) cand.push_back({static_cast<int32_t>(i), l[i]});
        size_t n = cand.size();
        const size_t k = p_.top_k > 0 ? static_cast<size_t>(p_.top_k) : 0;
        if (k > 0 && k < n) {
            n = k;
            std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(n), cand.end(), by_logit);
        } else {
            std::sort(cand.begin(), cand.end(), by_logit);
        }
        std::vector<double> &prob = out.w;
        prob.resize(n);
        const double max_l = cand[0].logit;
        double sum = 0;
        for (size_t i = 0; i < n; ++i) sum += prob[i] = std::exp(static_cast<double>(cand[i].logit) - max_l);
        if (p_.top_p < 1.0f) {
            double acc = 0;
            for (size_t i = 0; i < n; ++i) {
                acc += prob[i] / sum;
                if (acc >= p_.top_p) { n = i + 1; break; }
            }
        }
        if (p_.min_p > 0.0f) {
            const double cut = p_.min_p * prob[0];
            size_t keep = 1;
            while (keep < n && prob[keep] >= cut) ++keep;
            n = keep;
        }
        prob.resize(n);
        out.ids.resize(n);
        for (size_t i = 0; i < n; ++i) {
            out.ids[i] = cand[i].id;
            out.total += prob[i] = std::exp((static_cast<double>(cand[i].logit) - max_l) / p_.temperature);
        }
    }
    int32_t sample(const float *logits, size_t n_vocab) {
        distribution(logits, n_vocab, d_);
        if (p_.temperature <= 0.0f) return d_.ids[0];
        std::uniform_real_distribution<double> u(0.0, d_.total);
        double r = u(rng_), acc = 0;
        for (size_t i = 0; i < d_.ids.size(); ++i) {
            acc += d_.w[i];
            if (r < acc) return d_.ids[i];
        }
        return d_.ids.back();
    }
    const TokenDist &last() const { return d_; }

private:
    SamplerParams p_;
    std::mt19937_64 rng_;
    std::deque<int32_t> history_;
    TokenDist d_;
};

// The logits of a stories15M generation's positions (sampled, so that they vary), or none without
// the model.
std::vector<std::vector<float>> g_positions;

int setup(void **) {
    const char *path = test_find_model("stories15M-q8_0.gguf", "stories15M/stories15M-q8_0.gguf");
    test_require(path, "stories15M-q8_0.gguf");
    auto model = Model::load(path, LoadOptions{});
    SessionOptions o;
    o.n_ctx = 256;
    Session s(*model, o);
    const auto prompt = model->tokenizer().tokenize("Once upon a time", true, false);
    s.feed(prompt.data(), prompt.size());
    SamplerParams p;
    p.temperature = 1.0f;
    p.top_k = 40;
    p.seed = 4;
    Sampler sampler(p);
    for (int i = 0; i < 24; ++i) {
        g_positions.emplace_back(s.logits(), s.logits() + s.n_vocab());
        const int32_t t = sampler.sample(s.logits(), s.n_vocab());
        sampler.accept(t);
        s.feed(&t, 1);
    }
    return 0;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

} // namespace

// For every setting and seed: at every position the same distribution (ids, weights and total bit for
// bit) and the same drawn token; the history (penalties) and the generator move on alike.
static void test_same_tokens_as_sorting_everything(void **) {
    struct Setting { float temp; int32_t top_k; float top_p, min_p, repeat; };
    std::vector<Setting> settings;
    for (float temp : {0.0f, 0.3f, 1.0f, 1.5f})
        for (int32_t top_k : {0, 1, 40, 1000})
            for (float top_p : {1.0f, 0.95f, 0.5f})
                for (float min_p : {0.0f, 0.05f, 1e-30f}) settings.push_back({temp, top_k, top_p, min_p, 1.0f});
    settings.push_back({1.0f, 0, 1.0f, 0.0f, 1.3f});
    settings.push_back({0.7f, 0, 0.9f, 0.0f, 0.8f});
    size_t draws = 0;
    for (const Setting &st : settings)
        for (uint64_t seed : {1ull, 123456789ull}) {
            SamplerParams p;
            p.temperature = st.temp;
            p.top_k = st.top_k;
            p.top_p = st.top_p;
            p.min_p = st.min_p;
            p.repeat_penalty = st.repeat;
            p.seed = seed;
            // sample() is distribution() then draw() (no grammar, no logprobs): called apart, so that the
            // distributions can be compared too.
            Sampler fast(p);
            ReferenceSampler ref(p);
            TokenDist a;
            for (size_t pos = 0; pos < g_positions.size(); ++pos) {
                const std::vector<float> &l = g_positions[pos];
                fast.distribution(l.data(), l.size(), nullptr, 0, a);
                const int32_t got = fast.draw(a), want = ref.sample(l.data(), l.size());
                const TokenDist &b = ref.last();
                if (a.ids != b.ids || a.w.size() != b.w.size() || !same_bits(a.total, b.total))
                    fail_msg("temp %g top_k %d top_p %g min_p %g seed %llu position %zu: %zu survivors (total %.17g), "
                             "sorting everything gives %zu (total %.17g)", st.temp, st.top_k, st.top_p, st.min_p,
                             static_cast<unsigned long long>(seed), pos, a.ids.size(), a.total, b.ids.size(), b.total);
                for (size_t i = 0; i < a.w.size(); ++i)
                    if (!same_bits(a.w[i], b.w[i])) fail_msg("position %zu: weight %zu differs", pos, i);
                if (got != want)
                    fail_msg("temp %g top_k %d top_p %g min_p %g seed %llu position %zu: token %d, sorting everything draws %d",
                             st.temp, st.top_k, st.top_p, st.min_p, static_cast<unsigned long long>(seed), pos, got, want);
                fast.accept(got);
                ref.accept(want);
                ++draws;
            }
        }
    print_message("%zu draws over %zu settings equal\n", draws, settings.size());
}

// sort_by_logit and top_by_logit give std::sort's and std::partial_sort's order on logits with many
// ties, -0 beside +0, -inf, and extreme magnitudes.
static void test_orderings_with_ties(void **) {
    auto before = [](const LogitCand &a, const LogitCand &b) { return logit_before(a, b); };
    std::mt19937 rng(3);
    const float specials[] = {0.0f, -0.0f, -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                              -std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(), 1.0f, -1.0f};
    std::vector<uint64_t> keys;
    for (int round = 0; round < 300; ++round) {
        const size_t n = 1 + rng() % (round < 200 ? 64 : 40000);
        std::vector<float> l(n);
        for (float &x : l) {
            switch (rng() % 4) {
            case 0: x = specials[rng() % 8]; break;
            case 1: x = static_cast<float>(static_cast<int>(rng() % 9) - 4); break;   // ties
            default: x = std::normal_distribution<float>(0.0f, 5.0f)(rng); break;
            }
        }
        std::vector<LogitCand> want, got;
        for (size_t i = 0; i < n; ++i) want.push_back({static_cast<int32_t>(i), l[i]});
        got = want;
        if (round % 3 == 0) std::shuffle(got.begin(), got.end(), rng);   // any input order
        std::sort(want.begin(), want.end(), before);
        sort_by_logit(got, keys);
        for (size_t i = 0; i < n; ++i)
            if (got[i].id != want[i].id) fail_msg("n %zu: sort_by_logit places %d at %zu, std::sort %d", n, got[i].id, i, want[i].id);
        for (size_t k : {size_t(1), size_t(3), size_t(40), n / 2 + 1, n}) {
            top_by_logit(l.data(), n, k, got);
            assert_int_equal(got.size(), std::min(k, n));
            for (size_t i = 0; i < got.size(); ++i)
                if (got[i].id != want[i].id) fail_msg("n %zu k %zu: top_by_logit places %d at %zu, std::sort %d", n, k, got[i].id, i, want[i].id);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orderings_with_ties),
        cmocka_unit_test_setup(test_same_tokens_as_sorting_everything, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
