// special_trie.hpp — the texts of a vocabulary's special tokens as a byte trie, for cutting them out of
// a text: the longest one starting at a position is found in at most as many steps as the longest text
// has bytes, however many share a prefix (Gemma 3 has thousands of "<unused...>" tokens; a list per first
// byte made a text of 16 MiB of '<' cost 16M x thousands of comparisons). Private to src/tokenizer.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::tok {

class SpecialTrie {
public:
    // Adds a token's text (not empty). A text added twice keeps its first token.
    void insert(std::string_view text, int32_t id);
    bool empty() const { return nodes_.size() == 1; }

    // The token of the longest text that starts at text[i] and passes keep(id), and its length; {-1, 0}
    // when none does.
    template <class Keep> std::pair<int32_t, size_t> longest(std::string_view text, size_t i, Keep keep) const {
        std::pair<int32_t, size_t> best{-1, 0};
        uint32_t node = 0;
        for (size_t j = i; j < text.size(); ++j) {
            node = child(node, uint8_t(text[j]));
            if (node == 0) break;
            const int32_t id = nodes_[node].token;
            if (id >= 0 && keep(id)) best = {id, j + 1 - i};
        }
        return best;
    }

private:
    struct Node {
        int32_t token = -1;
        std::vector<std::pair<uint8_t, uint32_t>> kids;   // by byte, sorted
    };
    // The child of node for byte b, or 0 (the root is no one's child).
    uint32_t child(uint32_t node, uint8_t b) const;

    std::vector<Node> nodes_{1};
};

} // namespace ember::tok
