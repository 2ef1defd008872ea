// tokenizer_common.cpp — vocabulary loading, special tokens, and the tokenize/detokenize skeleton shared
// by the SPM and BPE tokenizers.
#include "core/error.hpp"
#include "core/log.hpp"
#include "tokenizer/tokenizer_impl.hpp"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstring>
#include <limits>

namespace ember {

bool Tokenizer::is_eog(int32_t id) const {
    return std::find(eog_ids_.begin(), eog_ids_.end(), id) != eog_ids_.end();
}

namespace tok {

namespace {

const gguf::Value &require_array(const gguf::File &file, const char *key) {
    const gguf::Value *v = file.get_array(key);
    if (!v) fail(EMBER_ERR_INVALID_MODEL, "missing %s", key);
    return *v;
}

void check_count(const gguf::Value &v, const char *key, size_t n_tokens) {
    if (v.count != n_tokens)
        fail(EMBER_ERR_INVALID_MODEL, "%s has %" PRIu64 " entries but tokenizer.ggml.tokens has %zu", key, v.count,
             n_tokens);
}

bool is_integer_elem(gguf::ValueType t) {
    using T = gguf::ValueType;
    return t == T::U8 || t == T::I8 || t == T::U16 || t == T::I16 || t == T::U32 || t == T::I32 || t == T::U64 ||
           t == T::I64;
}

// Tokens known by their text, beyond what eos/eot name: they are control tokens whatever their GGUF type
// says (Phi-3 types "</s>" user-defined, Qwen's BPE vocabulary has "</s>" as a normal token), and all but
// the first fill-in-the-middle ones end generation. llama.cpp recognizes the same texts the same way
// (checked through tests/data/tokenizer_pre/probe.gpt-2.out), so parse_special and is_eog agree with it.
struct KnownToken {
    const char *text;
    bool ends_generation;
};
constexpr KnownToken kKnownTokens[] = {
    {"<|eot_id|>", true},      {"<|im_end|>", true},       {"<|endoftext|>", true},    {"<|end|>", true},
    {"</s>", true},            {"<eos>", true},            {"<|end_of_text|>", true},  {"<end_of_turn>", true},
    {"<|eom_id|>", true},      {"<EOT>", true},            {"_<EOT>", true},           {"<end_of_utterance>", true},
    {"<|return|>", true},      {"<|call|>", true},         {"<|flush|>", true},        {"<|calls|>", true},
    {"<|fim_prefix|>", false}, {"<|fim_suffix|>", false},  {"<|fim_middle|>", false},  {"<|fim_pad|>", true},
    {"<|repo_name|>", true},   {"<|file_sep|>", true},     {"<turn|>", true},          {"<|tool_response>", true},
};

// gpt-oss's chat format (o200k_harmony) writes these between the parts of a message; they are text the
// caller parses, so they are always rendered and always recognized (user-defined), as in llama.cpp.
constexpr const char *kHarmonyTexts[] = {"<|start|>", "<|message|>", "<|channel|>", "<|constrain|>"};

// general.name, lower-cased, names a Phi-3 model: llama.cpp strips the whitespace after its special
// tokens (all but these) when it cuts them out of a text, as Phi-3's own tokenizer does.
bool is_phi3_name(std::string name) {
    for (char &c : name) c = char(std::tolower(uint8_t(c)));
    return name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;
}
constexpr const char *kPhi3NoStripTexts[] = {"<unk>", "<s>", "<|endoftext|>"};

} // namespace

void TokenizerBase::load_vocab(const gguf::File &file, std::string_view model, bool add_bos_default) {
    model_ = std::string(model);

    const gguf::Value &toks = require_array(file, "tokenizer.ggml.tokens");
    if (toks.elem_type != gguf::ValueType::STRING)
        fail(EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.tokens is an array of %s, expected strings",
             gguf::value_type_name(toks.elem_type));
    if (toks.strs.empty()) fail(EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.tokens is empty");
    if (toks.strs.size() > size_t(std::numeric_limits<int32_t>::max()))
        fail(EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.tokens has too many entries (%zu)", toks.strs.size());
    const size_t n = toks.strs.size();
    tokens_.reserve(n);
    for (std::string_view s : toks.strs) tokens_.emplace_back(s);

    types_.assign(n, TokenType::NORMAL);
    if (const gguf::Value *tt = file.get_array("tokenizer.ggml.token_type")) {
        check_count(*tt, "tokenizer.ggml.token_type", n);
        if (!is_integer_elem(tt->elem_type))
            fail(EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.token_type is an array of %s, expected integers",
                 gguf::value_type_name(tt->elem_type));
        for (size_t i = 0; i < n; ++i) {
            int64_t t;
            if (tt->elem_type == gguf::ValueType::I32) {
                int32_t v;
                std::memcpy(&v, tt->elems + 4 * i, 4);
                t = v;
            } else {
                t = tt->array_int(i);
            }
            if (t < 0 || t > int64_t(TokenType::BYTE))
                fail(EMBER_ERR_INVALID_MODEL, "tokenizer.ggml.token_type: token %zu has type %" PRId64 " (valid: 0..6)",
                     i, t);
            types_[i] = TokenType(t);
        }
    }

    // A later duplicate text wins, as in llama.cpp (real vocabularies have none).
    ids_.build(tokens_);

    auto special_id = [&](const char *key) -> int32_t {
        const std::optional<int64_t> v = file.get_int(key);
        if (!v || *v == 0xFFFFFFFF || *v == -1) return -1;
        if (*v < 0 || *v >= int64_t(n)) {
            log_msg(nullptr, EMBER_LOG_WARN, "tokenizer: %s = %" PRId64 " is outside the vocabulary (%zu tokens); ignored",
                    key, *v, n);
            return -1;
        }
        return int32_t(*v);
    };
    bos_ = special_id("tokenizer.ggml.bos_token_id");
    eos_ = special_id("tokenizer.ggml.eos_token_id");
    unk_ = special_id("tokenizer.ggml.unknown_token_id");
    eot_ = special_id("tokenizer.ggml.eot_token_id");
    pad_ = special_id("tokenizer.ggml.padding_token_id");
    add_bos_ = file.get_bool("tokenizer.ggml.add_bos_token").value_or(add_bos_default) && bos_ >= 0;
    add_eos_ = file.get_bool("tokenizer.ggml.add_eos_token").value_or(false) && eos_ >= 0;

    auto add_eog = [&](int32_t id) {
        if (id >= 0 && std::find(eog_ids_.begin(), eog_ids_.end(), id) == eog_ids_.end()) eog_ids_.push_back(id);
    };
    add_eog(eos_);
    add_eog(eot_);
    for (const KnownToken &k : kKnownTokens) {
        const int32_t id = find(k.text);
        if (id < 0) continue;
        types_[size_t(id)] = TokenType::CONTROL;
        if (k.ends_generation) add_eog(id);
    }
    // In gpt-oss's format "<|end|>" ends a message, which "<|start|>" follows, while "<|return|>" and
    // "<|call|>" end the turn: there "<|end|>" is text to render and generation goes on.
    const int32_t end = find("<|end|>");
    if (end >= 0 && find("<|return|>") >= 0 && find("<|call|>") >= 0) {
        types_[size_t(end)] = TokenType::USER_DEFINED;
        if (end != eos_ && end != eot_) eog_ids_.erase(std::remove(eog_ids_.begin(), eog_ids_.end(), end), eog_ids_.end());
    }
    for (const char *t : kHarmonyTexts)
        if (const int32_t id = find(t); id >= 0) types_[size_t(id)] = TokenType::USER_DEFINED;
    // Gemma 4 (recognized by "<|tool_response>") has "</s>" as ordinary text: neither special nor an end of
    // generation, as llama.cpp treats it.
    const int32_t s_end = find("</s>");
    if (s_end >= 0 && find("<|tool_response>") >= 0) {
        types_[size_t(s_end)] = TokenType::NORMAL;
        eog_ids_.erase(std::remove(eog_ids_.begin(), eog_ids_.end(), s_end), eog_ids_.end());
    }

    // UNKNOWN is included because some vocabularies (Phi-3's [PADn]) mark added tokens that way.
    const bool phi3 = is_phi3_name(std::string(file.get_string("general.name").value_or("")));
    if (phi3) rstrip_.assign(n, false);
    for (size_t i = 0; i < n; ++i) {
        const TokenType t = types_[i];
        if ((t == TokenType::CONTROL || t == TokenType::USER_DEFINED || t == TokenType::UNKNOWN) && !tokens_[i].empty()) {
            specials_.insert(tokens_[i], int32_t(i));
            has_user_defined_ = has_user_defined_ || t == TokenType::USER_DEFINED;
            if (phi3) rstrip_[i] = true;
        }
    }
    if (phi3) {
        if (const int32_t id = find("</s>"); id >= 0) rstrip_[size_t(id)] = true;
        for (const char *t : kPhi3NoStripTexts)
            if (const int32_t id = find(t); id >= 0) rstrip_[size_t(id)] = false;
    }
}

std::vector<Fragment> TokenizerBase::split_special(std::string_view text, bool parse_special) const {
    std::vector<Fragment> frags;
    auto eligible = [&](int32_t id) { return parse_special || types_[size_t(id)] == TokenType::USER_DEFINED; };
    size_t start = 0, i = 0;
    while (i < text.size()) {
        const auto [hit, len] = specials_.longest(text, i, eligible);
        if (hit < 0) {
            ++i;
            continue;
        }
        if (i > start) frags.push_back({text.substr(start, i - start)});
        frags.push_back({{}, hit});
        i += len;
        if (!rstrip_.empty() && rstrip_[size_t(hit)])
            while (i < text.size() && (text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) ++i;
        start = i;
    }
    if (start < text.size()) frags.push_back({text.substr(start)});
    return frags;
}

std::vector<int32_t> TokenizerBase::tokenize(std::string_view text, bool add_special, bool parse_special) const {
    if (text.size() > kMaxTextBytes)
        fail(EMBER_ERR_INVALID_ARGUMENT, "a text of %zu bytes is over the tokenizer's limit of %zu: tokenize it in parts",
             text.size(), kMaxTextBytes);
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (add_special && add_bos_) out.push_back(bos_);
    // USER_DEFINED tokens are vocabulary entries for literal text (Gemma's "<h1>" or runs of spaces and
    // tabs, for instance), not control tokens: like Hugging Face's added tokens and llama.cpp, they are
    // cut out of the text before it is tokenized whether or not special tokens are parsed.
    if (!parse_special && !has_user_defined_) {
        if (!text.empty()) encode(text, true, out);
    } else {
        bool first_or_after_special = true;
        for (const Fragment &f : split_special(text, parse_special)) {
            if (f.special >= 0) {
                out.push_back(f.special);
                first_or_after_special = true;
            } else {
                encode(f.text, first_or_after_special, out);
                first_or_after_special = false;
            }
        }
    }
    if (add_special && add_eos_) out.push_back(eos_);
    return out;
}

std::string TokenizerBase::detokenize(const int32_t *ids, size_t n, bool render_special,
                                      bool keep_leading_space) const {
    std::string out;
    size_t i = 0;
    if (n > 0 && bos_ >= 0 && ids[0] == bos_) {
        out += token_to_piece(bos_, render_special);
        i = 1;
    }
    // The space SentencePiece put before the text lives in the first token after BOS.
    if (i < n && strip_leading_space_ && !keep_leading_space) {
        std::string piece = token_to_piece(ids[i], render_special);
        out.append(piece, !piece.empty() && piece[0] == ' ' ? 1 : 0);
        ++i;
    }
    for (; i < n; ++i) out += token_to_piece(ids[i], render_special);
    return out;
}

bool TokenizerBase::special_piece(int32_t id, bool render_special, std::string &out) const {
    switch (types_[size_t(id)]) {
    case TokenType::CONTROL:
    case TokenType::UNKNOWN:
    case TokenType::UNUSED:
        out = render_special ? tokens_[size_t(id)] : std::string();
        return true;
    case TokenType::USER_DEFINED:
        out = tokens_[size_t(id)];
        return true;
    default:
        return false;
    }
}

} // namespace tok
} // namespace ember
