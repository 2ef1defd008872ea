// acceptance.cpp — see acceptance.hpp. Why the output is distributed as p: x is kept with probability
// sum_x q(x) min(1, p(x)/q(x)) = sum_x min(q(x), p(x)) = 1 - R, R = sum_x max(0, p(x) - q(x)), and token
// y comes out of a rejection with probability R * max(0, p(y) - q(y)) / R; the two add to
// min(q(y), p(y)) + max(0, p(y) - q(y)) = p(y).
#include "spec/acceptance.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace ember::spec {

Verdict accept_or_replace(const TokenDist &p, const TokenDist *q, int32_t x, size_t n_vocab, Sampler &sampler,
                          AcceptScratch &scratch) {
    if (x < 0 || static_cast<size_t>(x) >= n_vocab) fail(EMBER_ERR_INTERNAL, "speculation: drafted token %d out of range", x);
    const double px = p.prob(x);
    const double qx = q ? q->prob(x) : 1.0;
    Verdict v;
    // Certain acceptance (p(x) >= q(x)) draws no random number, so greedy decoding stays deterministic.
    if (px > 0 && (px >= qx || sampler.uniform() * qx < px)) {
        v.accepted = true;
        v.token = x;
        return v;
    }
    // Rejected: draw from norm(max(0, p - q)). q's mass is spread into a dense array for O(1) lookups.
    std::vector<double> &qd = scratch.q_dense;
    if (qd.size() < n_vocab) qd.assign(n_vocab, 0.0);
    if (q)
        for (size_t i = 0; i < q->ids.size(); ++i) qd[static_cast<size_t>(q->ids[i])] = q->w[i] / q->total;
    else
        qd[static_cast<size_t>(x)] = 1.0;
    TokenDist &r = scratch.residual;
    r.clear();
    for (size_t i = 0; i < p.ids.size(); ++i) {
        const double w = p.w[i] / p.total - qd[static_cast<size_t>(p.ids[i])];
        if (w > 0) {
            r.ids.push_back(p.ids[i]);
            r.w.push_back(w);
            r.total += w;
        }
    }
    if (q)
        for (int32_t id : q->ids) qd[static_cast<size_t>(id)] = 0.0;
    else
        qd[static_cast<size_t>(x)] = 0.0;
    // R > 0 whenever x was rejected (p(x) < q(x) means q has mass p lacks, so p has mass q lacks); only
    // rounding could empty it, and then p itself is the right fallback.
    v.token = r.ids.empty() ? sampler.draw(p) : sampler.draw(r);
    return v;
}

} // namespace ember::spec
