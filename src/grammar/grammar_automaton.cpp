#include "grammar/grammar_automaton.hpp"

#include "core/error.hpp"

#include <algorithm>

namespace ember::grammar {

namespace {
// The closure follows rule references without consuming anything; its recursion is bounded by this
// (beyond GrammarLimits::kMaxStackDepth because tail calls do not deepen stacks).
constexpr uint32_t kMaxClosureDepth = 2048;

// The code points a UTF-8 sequence of `len` bytes may encode: shorter encodings (overlong forms) and
// beyond U+10FFFF are invalid, so a token's bytes cannot smuggle a character past a class.
constexpr uint32_t kMinOfLength[5] = {0, 0, 0x80, 0x800, 0x10000};
constexpr uint32_t kMaxOfLength[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

// What one hash map entry costs on the heap beside its payload (node, next pointer, cached hash,
// bucket slot).
constexpr size_t kMapEntry = 48;

uint64_t hash_nodes(const std::vector<uint32_t> &v) {
    uint64_t h = 1469598103934665603ull;
    for (uint32_t x : v) h = (h ^ x) * 1099511628211ull;
    return h;
}
} // namespace

GrammarAutomaton::GrammarAutomaton(GrammarRules rules, size_t max_bytes) : g_(std::move(rules)), max_bytes_(std::min(max_bytes, kMaxBytes)) {
    nodes_.push_back(Node{kNone, kNone, 0});
    closure_.emplace_back(std::vector<uint32_t>{0});
    closure_state_.push_back(2);
    std::vector<uint32_t> init;
    for (uint32_t a : g_.alts[g_.root]) {
        const uint32_t n = node(a, 0);
        if (n != kNone) closure_into(n, init, 0);
    }
    start_ = state(config(init), 0, 0, 0);
}

uint32_t GrammarAutomaton::node(uint32_t pos, uint32_t parent) {
    const uint64_t key = (uint64_t(pos) << 32) | parent;
    auto it = node_ids_.find(key);
    if (it != node_ids_.end()) return it->second;
    const uint32_t depth = nodes_[parent].depth + 1;
    if (depth > GrammarLimits::kMaxStackDepth) return kNone;   // nesting this deep is not offered
    charge(kMapEntry);
    make_room(nodes_, 1);
    make_room(closure_, 1);
    make_room(closure_state_, 1);
    const uint32_t id = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back(Node{pos, parent, depth});
    closure_.emplace_back();
    closure_state_.push_back(0);
    node_ids_.emplace(key, id);
    return id;
}

// The stacks reachable from node n without consuming a character: those waiting on a character class,
// and node 0 when the whole grammar can end.
void GrammarAutomaton::closure_into(uint32_t n, std::vector<uint32_t> &out, uint32_t depth) {
    if (closure_state_[n] == 2) {
        out.insert(out.end(), closure_[n].begin(), closure_[n].end());
        return;
    }
    if (closure_state_[n] == 1) return;   // an empty cycle (excluded by the parser's left-recursion check)
    if (depth > kMaxClosureDepth)
        fail(EMBER_ERR_INVALID_ARGUMENT, "grammar: rules nest deeper than %u without matching a character", kMaxClosureDepth);
    closure_state_[n] = 1;
    std::vector<uint32_t> mine;
    const Node nd = nodes_[n];
    const Sym s = g_.syms[nd.pos];
    if (s.kind == Sym::CHAR) {
        mine.push_back(n);
    } else if (s.kind == Sym::END) {
        closure_into(nd.parent, mine, depth + 1);
    } else {
        // A call in tail position returns straight to our parent: repetitions (x ::= y x |) stay flat.
        const uint32_t cont = g_.syms[nd.pos + 1].kind == Sym::END ? nd.parent : node(nd.pos + 1, nd.parent);
        if (cont != kNone)
            for (uint32_t a : g_.alts[s.id]) {
                const uint32_t c = node(a, cont);
                if (c != kNone) closure_into(c, mine, depth + 1);
            }
    }
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    charge(mine.capacity() * sizeof(uint32_t));
    out.insert(out.end(), mine.begin(), mine.end());
    closure_[n] = std::move(mine);
    closure_state_[n] = 2;
}

uint32_t GrammarAutomaton::config(std::vector<uint32_t> &nodes) {
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    std::vector<uint32_t> &bucket = config_ids_[hash_nodes(nodes)];
    for (uint32_t c : bucket)
        if (configs_[c] == nodes) return c;
    charge(nodes.size() * sizeof(uint32_t) + sizeof(uint32_t) + (bucket.empty() ? kMapEntry : 0));
    make_room(configs_, 1);
    const uint32_t id = static_cast<uint32_t>(configs_.size());
    configs_.push_back(nodes);
    bucket.push_back(id);
    return id;
}

int32_t GrammarAutomaton::advance(uint32_t c, uint32_t cp) {
    std::vector<uint32_t> next;
    for (uint32_t n : configs_[c]) {
        if (n == 0) continue;
        const Node nd = nodes_[n];
        if (!g_.classes[g_.syms[nd.pos].id].matches(cp)) continue;
        const uint32_t m = node(nd.pos + 1, nd.parent);
        if (m != kNone) closure_into(m, next, 0);
        if (next.size() > GrammarLimits::kMaxStacks) {
            std::sort(next.begin(), next.end());   // duplicates do not count
            next.erase(std::unique(next.begin(), next.end()), next.end());
            if (next.size() > GrammarLimits::kMaxStacks)
                fail(EMBER_ERR_OUT_OF_MEMORY, "grammar: more than %zu parse stacks at once (the grammar is too ambiguous)",
                     GrammarLimits::kMaxStacks);
        }
    }
    if (next.empty()) return kDead;
    return static_cast<int32_t>(config(next));
}

bool GrammarAutomaton::partial_ok(uint32_t c, uint32_t cp, uint8_t remaining, uint8_t len) const {
    const uint32_t shift = 6u * remaining;
    const uint32_t lo = std::max(cp << shift, kMinOfLength[len]), hi = std::min(cp << shift | ((1u << shift) - 1), kMaxOfLength[len]);
    if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return false;   // only overlong forms or surrogates
    for (uint32_t n : configs_[c])
        if (n != 0 && g_.classes[g_.syms[nodes_[n].pos].id].intersects(lo, hi)) return true;
    return false;
}

int32_t GrammarAutomaton::state(uint32_t c, uint32_t cp, uint8_t remaining, uint8_t len) {
    const uint64_t key = (uint64_t(c) << 25) | (uint64_t(len) << 23) | (uint64_t(remaining) << 21) | cp;
    auto it = state_ids_.find(key);
    if (it != state_ids_.end()) return it->second;
    charge(kMapEntry);
    make_room(states_, 1);
    State st{c, cp, remaining, len, false, false};
    const std::vector<uint32_t> &nodes = configs_[c];
    st.accept = remaining == 0 && !nodes.empty() && nodes[0] == 0;
    st.can_continue = remaining > 0 || (!nodes.empty() && nodes.back() != 0);
    const int32_t id = static_cast<int32_t>(states_.size());
    states_.push_back(st);
    state_ids_.emplace(key, id);
    return id;
}

int32_t GrammarAutomaton::step_slow(int32_t s, uint8_t byte) {
    State &st = states_[static_cast<size_t>(s)];
    if (st.remaining && (byte & 0xC0) != 0x80) return kDead;
    if (st.table < 0) {
        const size_t width = st.remaining ? 64 : 256;
        make_room(table_, width);
        st.table = static_cast<int64_t>(table_.size());
        table_.resize(table_.size() + width, kUnknown);
    }
    const size_t slot = static_cast<size_t>(st.table) + (st.remaining ? (byte & 0x3Fu) : byte);
    if (table_[slot] != kUnknown) return table_[slot];
    const int32_t next = compute(s, byte);   // may grow states_ (st is not used after this)
    table_[slot] = next;
    return next;
}

void GrammarAutomaton::charge(size_t bytes) {
    if (bytes > max_bytes_ - bytes_)
        fail(EMBER_ERR_OUT_OF_MEMORY, "grammar: matching needs more than the grammar's limit of %.4g MiB (the grammar is too ambiguous or too large)",
             static_cast<double>(max_bytes_) / (1 << 20));
    bytes_ += bytes;
}

int32_t GrammarAutomaton::compute(int32_t from, uint8_t b) {
    const State st = states_[static_cast<size_t>(from)];
    if (st.remaining == 0) {
        if (b < 0x80) {
            const int32_t c = advance(st.config, b);
            return c == kDead ? kDead : state(static_cast<uint32_t>(c), 0, 0, 0);
        }
        // A lead byte (overlong 0xC0/0xC1 and leads beyond U+10FFFF are invalid).
        uint32_t cp;
        uint8_t rem;
        if (b >= 0xC2 && b <= 0xDF) cp = b & 0x1Fu, rem = 1;
        else if (b >= 0xE0 && b <= 0xEF) cp = b & 0x0Fu, rem = 2;
        else if (b >= 0xF0 && b <= 0xF4) cp = b & 0x07u, rem = 3;
        else return kDead;
        const uint8_t len = static_cast<uint8_t>(rem + 1);
        return partial_ok(st.config, cp, rem, len) ? state(st.config, cp, rem, len) : kDead;
    }
    const uint32_t cp = (st.cp << 6) | (b & 0x3Fu);
    const uint8_t rem = static_cast<uint8_t>(st.remaining - 1);
    if (rem == 0) {
        if (cp < kMinOfLength[st.len] || cp > kMaxOfLength[st.len] || (cp >= 0xD800 && cp <= 0xDFFF)) return kDead;
        const int32_t c = advance(st.config, cp);
        return c == kDead ? kDead : state(static_cast<uint32_t>(c), 0, 0, 0);
    }
    return partial_ok(st.config, cp, rem, st.len) ? state(st.config, cp, rem, st.len) : kDead;
}

} // namespace ember::grammar
