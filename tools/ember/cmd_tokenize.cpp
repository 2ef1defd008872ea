// cmd_tokenize.cpp — `ember tokenize`: token ids as a JSON array. Works on any GGUF with a tokenizer
// (vocab-only files and unsupported architectures too: only the vocabulary is loaded).
#include "cli.hpp"

#include <cstdio>

namespace cli {

int cmd_tokenize(int argc, char **argv) {
    const Args a = parse(argc, argv, 2, {"-m", "--model"}, {"--no-bos", "--special"});
    const std::string model_path = a.has("--model") ? a.str("--model", "") : a.str("-m", "");
    if (model_path.empty()) return usage_error("tokenize: -m MODEL is required");
    if (a.positional.size() != 1) return usage_error("tokenize: exactly one TEXT argument is expected");
    ember_model *model = load_model(model_path, true, false);
    if (!model) return 1;
    std::vector<ember_token> ids;
    const uint32_t flags = (a.flag("--no-bos") ? 0u : EMBER_TOKENIZE_ADD_SPECIAL) |
                           (a.flag("--special") ? EMBER_TOKENIZE_PARSE_SPECIAL : 0u);
    const bool ok = tokenize(model, a.positional[0], flags, ids);
    if (ok) {
        std::printf("[");
        for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? ", %d" : "%d", ids[i]);
        std::printf("]\n");
    }
    ember_model_free(model);
    return ok ? 0 : 1;
}

} // namespace cli
