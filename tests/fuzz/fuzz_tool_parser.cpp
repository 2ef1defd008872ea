// fuzz_tool_parser.cpp — libFuzzer target: arbitrary model output through the tool-call parser
// (src/tools/). A model's output is untrusted: a small or confused model writes anything.
//
// Input: byte 0 picks the format, byte 1 the size of the pieces the text is fed in (1 to 16 bytes),
// the rest is the text. Promises checked: nothing throws; the text fed whole and fed in pieces parses to
// the same content, reasoning, calls and malformed flag; the pieces taken while streaming add up to the
// result; every call has a name, a 9-character id when the text gave none, and arguments that parse as
// a JSON object.
#include "fuzz_util.hpp"

#include "core/error.hpp"
#include "grammar/json_value.hpp"
#include "tools/tool_parser.hpp"

#include <string>

using namespace ember;

namespace {

tools::ParseResult parse(tools::Format f, std::string_view text, size_t piece, std::string *content,
                         std::string *reasoning, size_t *n_calls) {
    tools::ToolCallParser p(f, {});
    for (size_t i = 0; i <= text.size(); i += piece) {
        if (i < text.size()) p.feed(text.substr(i, piece));
        const tools::ParseDelta d = p.take();
        *content += d.content;
        *reasoning += d.reasoning;
        if (d.first_call != *n_calls) fuzz::broken("a delta's calls do not follow the last take's");
        *n_calls += d.n_calls;
    }
    p.finish();
    const tools::ParseDelta d = p.take();
    *content += d.content;
    *reasoning += d.reasoning;
    *n_calls += d.n_calls;
    return p.result();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const auto format = static_cast<tools::Format>(1 + data[0] % (tools::kFormatCount - 1));
    const size_t piece = 1 + data[1] % 16;
    const std::string_view text(reinterpret_cast<const char *>(data + 2), size - 2);
    try {
        std::string c1, r1, c2, r2;
        size_t n1 = 0, n2 = 0;
        const tools::ParseResult whole = parse(format, text, text.size() + 1, &c1, &r1, &n1);
        const tools::ParseResult pieces = parse(format, text, piece, &c2, &r2, &n2);
        if (whole.content != pieces.content) fuzz::broken("content differs fed whole and in pieces", (whole.content + "\n---\n" + pieces.content).c_str());
        if (whole.reasoning != pieces.reasoning) fuzz::broken("reasoning differs fed whole and in pieces");
        if (whole.malformed != pieces.malformed) fuzz::broken("the malformed flag differs fed whole and in pieces");
        if (whole.calls.size() != pieces.calls.size()) fuzz::broken("the calls differ fed whole and in pieces");
        if (c2 != pieces.content || r2 != pieces.reasoning || n2 != pieces.calls.size())
            fuzz::broken("the streamed takes do not add up to the result");
        for (size_t i = 0; i < whole.calls.size(); ++i) {
            const tools::ToolCall &c = whole.calls[i];
            if (c.name != pieces.calls[i].name || c.arguments != pieces.calls[i].arguments || c.id != pieces.calls[i].id)
                fuzz::broken("a call differs fed whole and in pieces");
            if (c.name.empty() || c.id.empty()) fuzz::broken("a call without a name or an id");
            if (grammar::parse_json(c.arguments).type != grammar::JsonValue::OBJECT)
                fuzz::broken("a call's arguments are not a JSON object", c.arguments.c_str());
        }
    } catch (const Error &e) {
        fuzz::broken("the parser threw", e.what());
    }
    return 0;
}
