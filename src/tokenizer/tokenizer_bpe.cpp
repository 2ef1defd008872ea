// tokenizer_bpe.cpp — the BPE tokenizer: byte-level (tokenizer.ggml.model "gpt2") and Gemma 4's
// SentencePiece-style variant ("gemma4").
//
// The pre-tokenizer regex cuts the text into pieces; each piece starts as one symbol per byte (the token
// of that byte's character in GPT-2's byte alphabet) and adjacent pairs are merged by rank, lowest
// first and leftmost on ties, until no listed merge applies. Merges are looked up by token-id pairs,
// so the hot loop never builds strings. Gemma 4's variant writes spaces as "▁" first, starts from one
// symbol per UTF-8 character, and spells a character that has no token (and is never merged) with
// <0xAB> byte tokens.
#include "core/error.hpp"
#include "core/log.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/unicode.hpp"

#include <algorithm>
#include <cstdio>
#include <queue>

namespace ember::tok {

struct BpeSymbol {
    int32_t id;   // -1: a byte or character that is not in the vocabulary (never merges)
    int32_t prev, next;
    uint32_t begin, len;   // its bytes in the piece (for the byte tokens of a character without one)
    bool dead;    // merged into the symbol on its left
};

namespace {

struct Candidate {
    int32_t rank;
    int32_t left, right;
    int32_t left_id, right_id;   // the pair when queued: a later mismatch means it is stale
    int32_t result;
};

struct CandidateOrder {
    bool operator()(const Candidate &a, const Candidate &b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

} // namespace

BpeTokenizer::BpeTokenizer(const gguf::File &file, std::string_view model, std::string_view pre) {
    // Checked before the vocabulary is read: an unknown pre-tokenizer should fail fast and say so.
    const PreTokenizerSpec *spec = find_pre_tokenizer(pre);
    if (!spec) {
        std::string names;
        for (const PreTokenizerSpec &s : pre_tokenizer_specs()) names += std::string(names.empty() ? "" : ", ") + s.name;
        fail(EMBER_ERR_UNSUPPORTED, "unsupported pre-tokenizer '%.*s' (tokenizer.ggml.pre; supported: %s)",
             int(std::min<size_t>(pre.size(), 100)), pre.data(), names.c_str());
    }
    pre_kind_ = spec->kind;
    ignore_merges_ = spec->ignore_merges;
    pre_ = std::string(pre);
    // Without an explicit tokenizer.ggml.add_bos_token, some families start with BOS (Llama 3, Tekken:
    // that is how the models were trained, and what llama.cpp does); GPT-2, Qwen2 and most others do not.
    load_vocab(file, model, spec->add_bos);
    spm_style_ = spec->spm_style;
    if (spm_style_) add_bos_ = bos_ >= 0;

    std::string buf;
    for (int b = 0; b < 256; ++b) {
        buf.clear();
        utf8_append(buf, byte_to_cp(uint8_t(b)));
        byte_tokens_[b] = find(buf);
        char hex[8];
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        byte_fallback_[b] = find(hex);
    }

    const gguf::Value *merges = file.get_array("tokenizer.ggml.merges");
    if (!merges) fail(EMBER_ERR_INVALID_MODEL, "missing tokenizer.ggml.merges");
    if (merges->elem_type != gguf::ValueType::STRING)
        fail(EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.merges is an array of %s, expected strings",
             gguf::value_type_name(merges->elem_type));
    merges_.reserve(merges->strs.size());
    // Three vocabulary lookups per merge, each a likely cache miss: done in blocks, hashing and
    // prefetching the whole block first so the misses overlap.
    constexpr size_t kBlock = 32;
    struct Lookup {
        std::string_view a, b;
        size_t ab_offset;
        uint64_t ha, hb, hab;
        int32_t ia, ib, iab;
    };
    Lookup block[kBlock];
    size_t unusable = 0;
    const size_t n_merges = merges->strs.size();
    for (size_t first = 0; first < n_merges; first += kBlock) {
        const size_t count = std::min(kBlock, n_merges - first);
        buf.clear();
        for (size_t k = 0; k < count; ++k) {
            const std::string_view m = merges->strs[first + k];
            // Search from 1: a part is never empty, and a first part that is a space itself stays intact.
            const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
            if (sp == std::string_view::npos)
                fail(EMBER_ERR_INVALID_MODEL,
                     "tokenizer.ggml.merges: entry %zu ('%.*s') is not two tokens separated by a space", first + k,
                     int(std::min<size_t>(m.size(), 100)), m.data());
            Lookup &l = block[k];
            l.a = m.substr(0, sp);
            l.b = m.substr(sp + 1);
            l.ab_offset = buf.size();
            buf.append(l.a);
            buf.append(l.b);
            l.ha = hash_bytes(l.a);
            l.hb = hash_bytes(l.b);
            l.hab = hash_bytes(std::string_view(buf).substr(l.ab_offset));
            ids_prefetch(l.ha);
            ids_prefetch(l.hb);
            ids_prefetch(l.hab);
        }
        for (size_t k = 0; k < count; ++k) {
            Lookup &l = block[k];
            const std::string_view ab = std::string_view(buf).substr(l.ab_offset, l.a.size() + l.b.size());
            l.ia = find(l.a, l.ha);
            l.ib = find(l.b, l.hb);
            l.iab = find(ab, l.hab);
            if (l.ia >= 0 && l.ib >= 0) merges_.prefetch(l.ia, l.ib);
        }
        for (size_t k = 0; k < count; ++k) {
            const Lookup &l = block[k];
            // A merge whose parts or result are not tokens can never take part in an id-based merge.
            if (l.ia < 0 || l.ib < 0 || l.iab < 0) {
                ++unusable;
                continue;
            }
            merges_.insert(l.ia, l.ib, {int32_t(first + k), l.iab});
        }
    }
    if (unusable)
        log_msg(nullptr, EMBER_LOG_WARN, "tokenizer: %zu of %zu merges name text that is not in the vocabulary; ignored",
                unusable, merges->strs.size());
}

void BpeTokenizer::encode(std::string_view text, bool, std::vector<int32_t> &out) const {
    std::string escaped;
    if (spm_style_) {
        escaped.reserve(text.size() + text.size() / 2);
        for (char c : text) {
            if (c == ' ') escaped += "\xE2\x96\x81";   // U+2581
            else escaped += c;
        }
        text = escaped;
    }
    std::vector<std::string_view> pieces;
    pretokenize(pre_kind_, text, pieces);
    for (std::string_view piece : pieces) encode_piece(piece, out);
}

void BpeTokenizer::initial_symbols(std::string_view piece, std::vector<BpeSymbol> &syms) const {
    syms.clear();
    if (!spm_style_) {
        syms.resize(piece.size());
        for (size_t i = 0; i < piece.size(); ++i)
            syms[i] = {byte_tokens_[uint8_t(piece[i])], int32_t(i) - 1, i + 1 < piece.size() ? int32_t(i) + 1 : -1,
                       uint32_t(i), 1, false};
        return;
    }
    for (size_t i = 0; i < piece.size();) {
        // A character is as long as its lead byte announces (llama.cpp's split, which does not check the
        // continuation bytes), cut short at the end of the piece.
        const uint8_t lead = uint8_t(piece[i]);
        const size_t len = std::min<size_t>(lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4, piece.size() - i);
        const int32_t n = int32_t(syms.size());
        syms.push_back({find(piece.substr(i, len)), n - 1, -1, uint32_t(i), uint32_t(len), false});
        if (n > 0) syms[size_t(n) - 1].next = n;
        i += len;
    }
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t> &out) const {
    // A piece is merged with a priority queue as large as the piece: a giant one (4 MB of one letter took
    // 8 s and 250 MB) is cut into kMaxPieceBytes parts at character boundaries, each merged alone, which
    // bounds time per byte and memory. Pieces of natural text are far shorter and stay exact.
    if (piece.size() > kMaxPieceBytes) {
        while (!piece.empty()) {
            size_t cut = std::min(piece.size(), kMaxPieceBytes);
            while (cut < piece.size() && cut > 1 && (uint8_t(piece[cut]) & 0xC0) == 0x80) --cut;
            encode_piece(piece.substr(0, cut), out);
            piece.remove_prefix(cut);
        }
        return;
    }
    // Gemma 4: a run of line breaks that is a token is taken whole (llama.cpp's rule for that family).
    if (spm_style_ && piece.find_first_not_of('\n') == std::string_view::npos) {
        if (const int32_t id = find(piece); id >= 0) {
            out.push_back(id);
            return;
        }
    }
    if (ignore_merges_ && piece.size() > 1) {
        std::string chars;
        for (char c : piece) utf8_append(chars, byte_to_cp(uint8_t(c)));
        if (const int32_t id = find(chars); id >= 0) {
            out.push_back(id);
            return;
        }
    }

    std::vector<BpeSymbol> syms;
    initial_symbols(piece, syms);

    std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
    auto try_pair = [&](int32_t l, int32_t r) {
        if (l < 0 || r < 0 || syms[l].id < 0 || syms[r].id < 0) return;
        if (const PairIndex::Entry *m = merges_.find(syms[l].id, syms[r].id))
            queue.push({m->rank, l, r, syms[l].id, syms[r].id, m->result});
    };
    for (int32_t i = 1; i < int32_t(syms.size()); ++i) try_pair(i - 1, i);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        BpeSymbol &left = syms[c.left], &right = syms[c.right];
        // A merged symbol's token is longer than before, so equal ids mean the pair is unchanged.
        if (left.dead || right.dead || left.next != c.right || left.id != c.left_id || right.id != c.right_id)
            continue;
        left.id = c.result;
        left.len += right.len;
        right.dead = true;
        left.next = right.next;
        if (right.next >= 0) syms[right.next].prev = c.left;
        try_pair(left.prev, c.left);
        try_pair(c.left, left.next);
    }

    for (int32_t i = piece.empty() ? -1 : 0; i != -1; i = syms[i].next) {
        const BpeSymbol &sym = syms[i];
        if (sym.id >= 0) {
            out.push_back(sym.id);
        } else if (spm_style_) {
            // Bytes without a <0xAB> token are dropped, as llama.cpp drops them.
            for (uint32_t k = sym.begin; k < sym.begin + sym.len; ++k)
                if (const int32_t b = byte_fallback_[uint8_t(piece[k])]; b >= 0) out.push_back(b);
        } else if (unk_ >= 0) {
            out.push_back(unk_);
        }
    }
}

std::string BpeTokenizer::token_to_piece(int32_t id, bool render_special) const {
    std::string piece;
    if (special_piece(id, render_special, piece)) return piece;
    const std::string &t = tokens_[size_t(id)];
    if (spm_style_) {
        int byte = -1;
        if (types_[size_t(id)] == TokenType::BYTE && t.size() == 6 && std::sscanf(t.c_str(), "<0x%2X>", &byte) == 1)
            return std::string(1, char(byte));
        for (size_t i = 0; i < t.size(); ++i) {
            if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
                piece += ' ';
                i += 2;
            } else {
                piece += t[i];
            }
        }
        return piece;
    }
    piece.reserve(t.size());
    const auto *p = reinterpret_cast<const uint8_t *>(t.data());
    for (size_t i = 0; i < t.size();) {
        const Utf8Decoded d = utf8_decode(p + i, t.size() - i);
        const int b = d.kind == Utf8Decoded::Valid ? cp_to_byte(d.cp) : -1;
        // Characters outside the byte alphabet (not expected in a byte-level vocabulary) pass through.
        if (b >= 0) piece += char(b);
        else piece.append(t, i, d.len);
        i += d.len;
    }
    return piece;
}

} // namespace ember::tok
