#include "sampler/sampler.hpp"

#include "core/error.hpp"
#include "grammar/grammar.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace ember {

namespace {
// A token's softmax weight relative to the largest logit. Where the largest is +inf, the tokens at +inf
// share all the weight and every other token has none (exp(x - inf) with x = +inf is NaN, which made
// the draw fall through to whatever came last, a -inf token included).
double softmax_weight(double logit, double max_l, double temperature) {
    if (max_l == HUGE_VAL) return logit == HUGE_VAL ? 1.0 : 0.0;
    return std::exp((logit - max_l) / temperature);
}
} // namespace

Sampler::Sampler(const SamplerParams &p) : p_(p), rng_(p.seed) {
    if (!std::isfinite(p.temperature)) fail(EMBER_ERR_INVALID_ARGUMENT, "temperature must be finite");
    if (p.top_k < 0) fail(EMBER_ERR_INVALID_ARGUMENT, "top_k must be >= 0 (0 = off), got %d", p.top_k);
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) fail(EMBER_ERR_INVALID_ARGUMENT, "top_p must be in (0, 1], got %g", p.top_p);
    if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) fail(EMBER_ERR_INVALID_ARGUMENT, "min_p must be in [0, 1], got %g", p.min_p);
    if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty))
        fail(EMBER_ERR_INVALID_ARGUMENT, "repeat_penalty must be > 0 (1 = off), got %g", p.repeat_penalty);
    if (!std::isfinite(p.frequency_penalty) || !std::isfinite(p.presence_penalty))
        fail(EMBER_ERR_INVALID_ARGUMENT, "frequency_penalty and presence_penalty must be finite");
    if (p.penalty_last_n < 0) fail(EMBER_ERR_INVALID_ARGUMENT, "penalty_last_n must be >= 0, got %d", p.penalty_last_n);
    if (p.n_logprobs < 0 || p.n_logprobs > kMaxLogprobs)
        fail(EMBER_ERR_INVALID_ARGUMENT, "n_logprobs must be in [0, %d], got %d", kMaxLogprobs, p.n_logprobs);
}

void Sampler::reset() {
    history_.clear();
    rng_.seed(p_.seed);
    if (matcher_) matcher_->reset();
}

void Sampler::set_grammar(std::shared_ptr<grammar::CompiledGrammar> g) {
    matcher_ = g ? std::make_shared<grammar::GrammarMatcher>(std::move(g)) : nullptr;
}

bool Sampler::constrained() const { return matcher_ && matcher_->constraining(); }

void Sampler::accept(int32_t token) {
    if (matcher_) matcher_->accept(token);   // first: a refused token changes nothing
    if (p_.penalty_last_n == 0) return;
    history_.push_back(token);
    while (history_.size() > static_cast<size_t>(p_.penalty_last_n)) history_.pop_front();
}

double TokenDist::prob(int32_t id) const {
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == id) return w[i] / total;
    return 0.0;
}

int32_t Sampler::sample(const float *logits, size_t n_vocab) {
    int32_t token;
    if (draws_by_rejection(n_vocab)) {
        token = sample_rejecting(logits, n_vocab);
    } else {
        distribution(logits, n_vocab, nullptr, 0, dist_);
        token = draw(dist_);
    }
    if (p_.n_logprobs > 0) record_logprobs(logits, n_vocab, token);
    return token;
}

bool Sampler::draws_by_rejection(size_t n_vocab) const {
    return constrained() && !greedy() && (p_.top_k == 0 || static_cast<size_t>(p_.top_k) >= n_vocab) && p_.top_p >= 1.0f &&
           p_.min_p <= 0.0f;
}

// Without top-k, top-p and min-p the chain's distribution under a grammar is the whole distribution
// renormalized over the allowed tokens (penalties come before the grammar and apply alike). Drawing
// from the whole distribution and drawing again while the grammar refuses the token is exactly a draw
// from that (rejection sampling), and needs no mask: checking a token's bytes costs next to nothing,
// while the mask of a state that allows most tokens (inside a JSON string) walks the whole vocabulary's
// trie (~3.5 ms at 152k tokens) — and there the first draw is nearly always allowed. Where draws keep
// being refused the state allows few tokens (whose mask is cheap): after kMaxRejections the masked
// chain draws instead, which keeps the result exact (it is the same conditional distribution that every
// earlier draw would have given). The draws differ from masking first's for the same seed; their
// distribution does not (test_grammar's test_sampler_rejection_exact). The whole distribution needs no
// order to be drawn from: its cumulative weights in token order and a binary search per draw (the
// chain's sort of all tokens is what plain sampling without top-k spends most on).
int32_t Sampler::sample_rejecting(const float *logits, size_t n_vocab) {
    check_grammar_vocab(n_vocab);
    const float *l = penalized(logits, n_vocab, nullptr, 0);
    const float max_l = *std::max_element(l, l + n_vocab);
    cumulative_.resize(n_vocab);
    double total = 0;
    for (size_t i = 0; i < n_vocab; ++i)
        cumulative_[i] = total += softmax_weight(l[i], max_l, p_.temperature);
    std::uniform_real_distribution<double> u(0.0, total);
    for (int i = 0; i < kMaxRejections; ++i) {
        // The first weight above the draw: a token of zero weight (-inf) is never chosen.
        const size_t at = static_cast<size_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), u(rng_)) - cumulative_.begin());
        const int32_t token = static_cast<int32_t>(std::min(at, n_vocab - 1));
        if (matcher_->allows(token)) return token;
    }
    distribution(logits, n_vocab, nullptr, 0, dist_);
    return draw(dist_);
}

void Sampler::record_logprobs(const float *logits, size_t n_vocab, int32_t token) {
    double max_l = logits[0];
    for (size_t i = 1; i < n_vocab; ++i) max_l = std::max(max_l, static_cast<double>(logits[i]));
    double sum = 0;
    for (size_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_l);
    const double log_z = max_l + std::log(sum);
    auto lp = [&](size_t id) { return static_cast<float>(static_cast<double>(logits[id]) - log_z); };
    last_logprob_ = {token, lp(static_cast<size_t>(token))};
    const size_t n = std::min(static_cast<size_t>(p_.n_logprobs), n_vocab);
    cand_.resize(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) cand_[i] = {static_cast<int32_t>(i), logits[i]};
    std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(n), cand_.end(), logit_before);
    top_logprobs_.clear();
    for (size_t i = 0; i < n; ++i) top_logprobs_.push_back({cand_[i].id, lp(static_cast<size_t>(cand_[i].id))});
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::draw(const TokenDist &d) { return draw(d, rng_); }

int32_t Sampler::draw(const TokenDist &d, std::mt19937_64 &rng) const {
    if (d.ids.empty()) fail(EMBER_ERR_INTERNAL, "sampler: empty distribution");
    if (greedy()) return d.ids[0];   // a greedy chain draws no random number
    std::uniform_real_distribution<double> u(0.0, d.total);
    double r = u(rng), acc = 0;
    for (size_t i = 0; i < d.ids.size(); ++i) {
        acc += d.w[i];
        if (r < acc) return d.ids[i];
    }
    return d.ids.back();
}

void Sampler::check_grammar_vocab(size_t n_vocab) const {
    if (n_vocab == 0) fail(EMBER_ERR_INVALID_ARGUMENT, "n_vocab is 0");
    if (matcher_ && n_vocab != static_cast<size_t>(matcher_->grammar().vocab().n_vocab))
        fail(EMBER_ERR_INVALID_ARGUMENT, "the grammar was made for a vocabulary of %d tokens, the logits have %zu",
             matcher_->grammar().vocab().n_vocab, n_vocab);
}

// 1. Penalties over the recent history (and the tokens after it that the caller passes), on a copy;
// without them the logits are used as they are (greedy speculation asks for a distribution per drafted
// position, so copying nothing matters there).
const float *Sampler::penalized(const float *logits, size_t n_vocab, const int32_t *extra, size_t n_extra) {
    const bool penalize = (!history_.empty() || n_extra > 0) &&
        (p_.repeat_penalty != 1.0f || p_.frequency_penalty != 0.0f || p_.presence_penalty != 0.0f) &&
        p_.penalty_last_n > 0;
    if (!penalize && bias_.empty()) return logits;
    penalized_.assign(logits, logits + n_vocab);
    apply_penalties(n_vocab, extra, n_extra, penalize);
    for (const auto &[id, b] : bias_) {
        if (static_cast<size_t>(id) >= n_vocab)
            fail(EMBER_ERR_INVALID_ARGUMENT, "logit bias for token %d, outside the vocabulary of %zu", id, n_vocab);
        float &x = penalized_[static_cast<size_t>(id)];
        x = b <= kBan ? std::numeric_limits<float>::lowest() : x + b;
    }
    return penalized_.data();
}

void Sampler::set_logit_bias(std::vector<std::pair<int32_t, float>> bias) {
    for (const auto &[id, b] : bias)
        if (id < 0 || !std::isfinite(b))
            fail(EMBER_ERR_INVALID_ARGUMENT, "logit bias: token %d, bias %g (tokens are >= 0, biases finite)", id,
                 static_cast<double>(b));
    bias_ = std::move(bias);
}

void Sampler::apply_penalties(size_t n_vocab, const int32_t *extra, size_t n_extra, bool penalize) {
    if (!penalize) return;
    std::unordered_map<int32_t, int> counts;
    // The window is the last penalty_last_n tokens of history + extra.
    const size_t total = history_.size() + n_extra, window = static_cast<size_t>(p_.penalty_last_n);
    const size_t skip = total > window ? total - window : 0;
    for (size_t i = skip; i < total; ++i) ++counts[i < history_.size() ? history_[i] : extra[i - history_.size()]];
    for (const auto &[id, count] : counts) {
        if (id < 0 || static_cast<size_t>(id) >= n_vocab) continue;
        float &x = penalized_[static_cast<size_t>(id)];
        x = x > 0 ? x / p_.repeat_penalty : x * p_.repeat_penalty;
        x -= static_cast<float>(count) * p_.frequency_penalty + p_.presence_penalty;
    }
}

namespace {
// The highest logit among the listed tokens (ascending ids), the lowest id on ties: what masking the
// others first and taking the highest logit gives.
size_t best_listed(const float *l, const std::vector<int32_t> &ids) {
    size_t best = static_cast<size_t>(ids[0]);
    for (int32_t id : ids)
        if (l[id] > l[best]) best = static_cast<size_t>(id);
    return best;
}

// The same over the tokens a mask's bits allow (it allows at least one).
size_t best_masked(const float *l, const grammar::TokenMask &m) {
    size_t best = SIZE_MAX;
    for (size_t w = 0; w < m.bits.size(); ++w)
        for (uint64_t b = m.bits[w]; b; b &= b - 1) {
            const size_t i = w * 64 + static_cast<size_t>(std::countr_zero(b));
            if (best == SIZE_MAX || l[i] > l[best]) best = i;
        }
    return best;
}
} // namespace

void Sampler::distribution(const float *logits, size_t n_vocab, const int32_t *extra, size_t n_extra, TokenDist &out) {
    check_grammar_vocab(n_vocab);
    out.clear();
    // 0. The grammar's mask: disallowed tokens take no part in any stage. A mask computed before (a state
    // seen before) is at hand and used as it is; one not computed yet is fetched only where needed below
    // (greedy decoding and top-k often need none). A mask that lists its tokens (few allowed) makes every
    // stage cost O(allowed tokens) instead of O(vocabulary).
    // A lazy grammar waiting for its trigger takes no part: the chain is the one without a grammar.
    const bool constrain = constrained();
    std::shared_ptr<const grammar::TokenMask> mask = constrain ? matcher_->cached_mask() : nullptr;
    auto fetch_mask = [&] {
        if (!constrain) return;
        if (!mask) mask = matcher_->mask();
        if (mask->n_allowed == 0) fail(EMBER_ERR_GRAMMAR_DEAD_END, "the grammar allows no token here and is not complete");
    };
    if (mask) fetch_mask();   // its dead-end check
    const bool listed = mask && mask->listed();
    auto allowed = [&](size_t i) { return !mask || mask->test(static_cast<int32_t>(i)); };
    auto grammar_allows = [&](int32_t id) { return mask ? mask->test(id) : matcher_->allows(id); };
    const float *l = penalized(logits, n_vocab, extra, n_extra);

    // 2. Greedy: the highest logit, lowest id on ties.
    if (p_.temperature <= 0.0f) {
        size_t best = 0;
        if (listed) {
            best = best_listed(l, mask->ids);
        } else {
            for (size_t i = 1; i < n_vocab; ++i)
                if (l[i] > l[best]) best = i;
            // With a grammar, the best token overall is the answer when the grammar allows it (it is then
            // also the best allowed one, ties included): checking its bytes spares computing the mask, which
            // is what a new grammar state costs (llama.cpp's common sampler checks first the same way).
            if (constrain && !grammar_allows(static_cast<int32_t>(best))) {
                fetch_mask();
                best = mask->listed() ? best_listed(l, mask->ids) : best_masked(l, *mask);
            }
        }
        out.ids.push_back(static_cast<int32_t>(best));
        out.w.push_back(1.0);
        out.total = 1.0;
        return;
    }

    auto gather = [&] {   // the allowed tokens, in ascending id order as sort_by_logit wants them
        cand_.clear();
        if (mask && mask->listed()) {
            for (int32_t id : mask->ids) cand_.push_back({id, l[id]});
            return;
        }
        for (size_t i = 0; i < n_vocab; ++i)
            if (allowed(i)) cand_.push_back({static_cast<int32_t>(i), l[i]});
    };
    // 3. top-k: only the k best need ordering. With a grammar whose mask is not at hand as a list, the k
    // best allowed tokens are the first k allowed ones in the order of all tokens: looked for among the
    // best k of all tokens, then (when most of those were allowed) among the best 4k, checking each
    // one's bytes, they spare the mask (an exact shortcut, like greedy's above). Where fewer are allowed
    // (a state that allows few tokens, whose mask is cheap to compute and then listed), the mask is used.
    auto before = [](const Cand &a, const Cand &b) { return logit_before(a, b); };   // inlined, unlike a pointer
    const size_t k = p_.top_k > 0 ? static_cast<size_t>(p_.top_k) : 0;
    bool top_k_done = false;
    if (k > 0 && k < n_vocab && !constrain) {
        top_by_logit(l, n_vocab, k, cand_);
        top_k_done = true;
    } else if (k > 0 && k < n_vocab && !listed) {
        for (size_t window = k; !top_k_done; window = 4 * k) {
            top_by_logit(l, n_vocab, std::min(n_vocab, window), cand_);
            size_t found = 0;
            for (size_t i = 0; i < cand_.size() && found < k; ++i)
                if (grammar_allows(cand_[i].id)) cand_[found++] = cand_[i];   // keeps their order
            top_k_done = found == k;
            if (window > k || 2 * found < k) break;
        }
    }
    size_t n;
    if (top_k_done) {
        n = k;
    } else {
        fetch_mask();
        gather();
        n = cand_.size();
        if (k > 0 && k < n) {
            n = k;
            std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(n), cand_.end(), before);
        } else {
            sort_by_logit(cand_, sort_keys_);   // the order std::sort gave, in linear time
        }
    }
    // Probabilities at temperature 1 for the truncation stages (as the chain order says); without those
    // stages they are not needed (each weight is computed alone, so skipping them changes no weight).
    std::vector<double> &prob = out.w;
    prob.resize(n);
    const double max_l = cand_[0].logit;
    const bool truncating = p_.top_p < 1.0f || p_.min_p > 0.0f;
    if (truncating) {
        double sum = 0;
        for (size_t i = 0; i < n; ++i) sum += prob[i] = softmax_weight(cand_[i].logit, max_l, 1.0);
        // 4. top-p: smallest prefix reaching top_p.
        if (p_.top_p < 1.0f) {
            double acc = 0;
            for (size_t i = 0; i < n; ++i) {
                acc += prob[i] / sum;
                if (acc >= p_.top_p) { n = i + 1; break; }
            }
        }
        // 5. min-p relative to the top token (prob[0] / sum is the top probability).
        if (p_.min_p > 0.0f) {
            const double cut = p_.min_p * prob[0];
            size_t keep = 1;
            while (keep < n && prob[keep] >= cut) ++keep;
            n = keep;
        }
    }
    // 6. temperature, softmax weights over the survivors (at temperature 1 they are the probabilities
    // above: x / 1.0 is x).
    prob.resize(n);
    out.ids.resize(n);
    const bool reuse = truncating && p_.temperature == 1.0f;
    for (size_t i = 0; i < n; ++i) {
        out.ids[i] = cand_[i].id;
        if (!reuse) prob[i] = softmax_weight(cand_[i].logit, max_l, p_.temperature);
        out.total += prob[i];
    }
}

} // namespace ember
