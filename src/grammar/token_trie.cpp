#include "grammar/token_trie.hpp"

#include <algorithm>
#include <numeric>

namespace ember::grammar {

// Built from the pieces in sorted order: each piece shares a prefix with the previous one, so the
// current path is a stack, and every new node is appended in preorder. A token always lands on the
// node created last (equal pieces are adjacent; a prefix sorts before its extensions), so each node's
// tokens are contiguous.
TokenTrie TokenTrie::build(const std::vector<std::string> &pieces) {
    std::vector<int32_t> order;
    for (size_t i = 0; i < pieces.size(); ++i)
        if (!pieces[i].empty() && pieces[i].size() < UINT16_MAX) order.push_back(static_cast<int32_t>(i));
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)] || (pieces[static_cast<size_t>(a)] == pieces[static_cast<size_t>(b)] && a < b);
    });
    TokenTrie t;
    std::vector<uint32_t> path;   // node index at each depth - 1
    const std::string *prev = nullptr;
    for (int32_t id : order) {
        const std::string &p = pieces[static_cast<size_t>(id)];
        size_t common = 0;
        if (prev) {
            const size_t limit = std::min(prev->size(), p.size());
            while (common < limit && (*prev)[common] == p[common]) ++common;
        }
        while (path.size() > common) {   // leave the subtrees the new piece is not in
            t.skip[path.back()] = static_cast<uint32_t>(t.byte.size());
            path.pop_back();
        }
        for (size_t d = common; d < p.size(); ++d) {
            path.push_back(static_cast<uint32_t>(t.byte.size()));
            t.byte.push_back(static_cast<uint8_t>(p[d]));
            t.depth.push_back(static_cast<uint16_t>(d + 1));
            t.skip.push_back(0);
            t.tok_begin.push_back(static_cast<uint32_t>(t.toks.size()));
            t.max_depth = std::max(t.max_depth, static_cast<uint16_t>(d + 1));
        }
        t.toks.push_back(id);
        prev = &p;
    }
    while (!path.empty()) {
        t.skip[path.back()] = static_cast<uint32_t>(t.byte.size());
        path.pop_back();
    }
    t.tok_begin.push_back(static_cast<uint32_t>(t.toks.size()));
    return t;
}

} // namespace ember::grammar
