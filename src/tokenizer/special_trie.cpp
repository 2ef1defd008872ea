// special_trie.cpp — building and walking the special-token trie.
#include "tokenizer/special_trie.hpp"

#include <algorithm>

namespace ember::tok {

namespace {
bool byte_less(const std::pair<uint8_t, uint32_t> &kid, uint8_t b) { return kid.first < b; }
} // namespace

uint32_t SpecialTrie::child(uint32_t node, uint8_t b) const {
    const auto &kids = nodes_[node].kids;
    const auto it = std::lower_bound(kids.begin(), kids.end(), b, byte_less);
    return it != kids.end() && it->first == b ? it->second : 0;
}

void SpecialTrie::insert(std::string_view text, int32_t id) {
    uint32_t node = 0;
    for (char c : text) {
        const uint8_t b = uint8_t(c);
        uint32_t next = child(node, b);
        if (next == 0) {
            next = uint32_t(nodes_.size());
            nodes_.emplace_back();   // may move nodes_: the parent is looked up again below
            auto &kids = nodes_[node].kids;
            kids.insert(std::lower_bound(kids.begin(), kids.end(), b, byte_less), {b, next});
        }
        node = next;
    }
    if (nodes_[node].token < 0) nodes_[node].token = id;
}

} // namespace ember::tok
