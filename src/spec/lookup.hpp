// lookup.hpp — draft-free proposals (prompt lookup decoding): the text so far often repeats itself
// (code being edited, a document being summarised, names), so the tokens that followed the last
// earlier occurrence of the current suffix are a cheap guess at what comes next.
#pragma once

#include <cstdint>
#include <vector>

namespace ember::spec {

// Up to k tokens that followed the most recent earlier occurrence of the last n tokens of `history`,
// trying n = ngram_max down to ngram_min; empty if no suffix recurs. O(len(history) * ngram_max).
std::vector<int32_t> lookup_proposal(const std::vector<int32_t> &history, uint32_t k, uint32_t ngram_min,
                                     uint32_t ngram_max);

} // namespace ember::spec
