// token_trie.hpp — the vocabulary's token bytes as a trie, laid out for one linear walk.
//
// Nodes are stored in depth-first preorder; each knows its byte, its depth and where its subtree ends,
// so a walk that finds a node's prefix impossible jumps past its whole subtree. The grammar's token mask
// walks this once per new grammar state: tokens sharing a prefix share the work for it (XGrammar and
// llguidance walk the vocabulary the same way).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::grammar {

struct TokenTrie {
    std::vector<uint8_t> byte;        // per node: the byte on the edge into it
    std::vector<uint16_t> depth;      // per node: 1 for children of the (implicit) root
    std::vector<uint32_t> skip;       // per node: the index just past its subtree
    std::vector<uint32_t> tok_begin;  // per node (plus one): its tokens are toks[tok_begin[i], tok_begin[i+1])
    std::vector<int32_t> toks;
    uint16_t max_depth = 0;

    // pieces[id]: the bytes of token id; empty pieces (control tokens) are left out.
    static TokenTrie build(const std::vector<std::string> &pieces);
    size_t size() const { return byte.size(); }
};

} // namespace ember::grammar
