// api_tokenizer.cpp — tokenize, detokenize and special tokens through the C ABI.
#include "abi/handles.hpp"

#include <algorithm>

using namespace ember;
using ember::abi::guard;

namespace {
void check_token(const Tokenizer &tok, ember_token t) {
    if (t < 0 || t >= tok.n_vocab())
        fail(EMBER_ERR_INVALID_ARGUMENT, "token %d is outside the vocabulary (0..%d)", t, tok.n_vocab() - 1);
}
} // namespace

extern "C" {

ember_status ember_tokenize(const ember_model *model, const char *text, size_t text_len, uint32_t flags,
                            ember_token *tokens, size_t capacity, size_t *out_count) {
    return guard("ember_tokenize", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out_count);
        if (!text && text_len) fail(EMBER_ERR_INVALID_ARGUMENT, "text is NULL but text_len is %zu", text_len);
        if (flags & ~(EMBER_TOKENIZE_ADD_SPECIAL | EMBER_TOKENIZE_PARSE_SPECIAL))
            fail(EMBER_ERR_INVALID_ARGUMENT, "unknown flags 0x%x", flags);
        const std::vector<int32_t> ids = model->model->tokenizer().tokenize(
            std::string_view(text ? text : "", text_len), flags & EMBER_TOKENIZE_ADD_SPECIAL,
            flags & EMBER_TOKENIZE_PARSE_SPECIAL);
        *out_count = ids.size();
        if (!tokens && capacity == 0) return EMBER_OK;
        if (!tokens) fail(EMBER_ERR_INVALID_ARGUMENT, "tokens is NULL but capacity is %zu", capacity);
        if (capacity < ids.size())
            fail(EMBER_ERR_BUFFER_TOO_SMALL, "room for %zu tokens, %zu needed", capacity, ids.size());
        std::copy(ids.begin(), ids.end(), tokens);
        return EMBER_OK;
    });
}

ember_status ember_token_to_piece(const ember_model *model, ember_token token, uint32_t flags, char *buf,
                                  size_t capacity, size_t *out_len) {
    return guard("ember_token_to_piece", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out_len);
        const Tokenizer &tok = model->model->tokenizer();
        check_token(tok, token);
        return abi::copy_out(tok.token_to_piece(token, flags & EMBER_DETOKENIZE_RENDER_SPECIAL), buf, capacity,
                             out_len, false);
    });
}

ember_status ember_detokenize(const ember_model *model, const ember_token *tokens, size_t n_tokens, uint32_t flags,
                              char *buf, size_t capacity, size_t *out_len) {
    return guard("ember_detokenize", [&] {
        EMBER_REQUIRE_ARG(model);
        EMBER_REQUIRE_ARG(out_len);
        if (!tokens && n_tokens) fail(EMBER_ERR_INVALID_ARGUMENT, "tokens is NULL but n_tokens is %zu", n_tokens);
        const Tokenizer &tok = model->model->tokenizer();
        for (size_t i = 0; i < n_tokens; ++i) check_token(tok, tokens[i]);
        const std::string text = utf8_sanitize(tok.detokenize(tokens, n_tokens, flags & EMBER_DETOKENIZE_RENDER_SPECIAL,
                                                              flags & EMBER_DETOKENIZE_KEEP_LEADING_SPACE));
        return abi::copy_out(text, buf, capacity, out_len, true);
    });
}

// These three return no status: a model without a tokenizer (a metadata-only load) answers "none".
ember_token ember_token_bos(const ember_model *model) {
    return model && model->model->has_tokenizer() ? model->model->tokenizer().bos() : -1;
}

ember_token ember_token_eos(const ember_model *model) {
    return model && model->model->has_tokenizer() ? model->model->tokenizer().eos() : -1;
}

bool ember_token_is_eog(const ember_model *model, ember_token token) {
    if (!model || !model->model->has_tokenizer()) return false;
    const Tokenizer &tok = model->model->tokenizer();
    return token >= 0 && token < tok.n_vocab() && tok.is_eog(token);
}

} // extern "C"
