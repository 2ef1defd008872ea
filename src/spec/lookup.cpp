// lookup.cpp — see lookup.hpp.
#include "spec/lookup.hpp"

#include <algorithm>

namespace ember::spec {

std::vector<int32_t> lookup_proposal(const std::vector<int32_t> &history, uint32_t k, uint32_t ngram_min,
                                     uint32_t ngram_max) {
    std::vector<int32_t> out;
    const size_t len = history.size();
    for (uint32_t n = std::min<uint32_t>(ngram_max, static_cast<uint32_t>(len > 0 ? len - 1 : 0)); n >= ngram_min && n > 0;
         --n) {
        const int32_t *suffix = history.data() + len - n;
        // Most recent earlier occurrence first: the latest context is the likeliest to repeat.
        for (size_t start = len - n; start-- > 0;) {
            if (!std::equal(suffix, suffix + n, history.data() + start)) continue;
            for (size_t j = start + n; j < len && out.size() < k; ++j) out.push_back(history[j]);
            return out;
        }
    }
    return out;
}

} // namespace ember::spec
