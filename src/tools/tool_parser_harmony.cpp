// tool_parser_harmony.cpp — gpt-oss's output (OpenAI's harmony format) as reasoning, content and calls.
//
// A reply is a sequence of messages, each a header and a body:
//   <|channel|>analysis<|message|>...<|end|>                                          reasoning
//   <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
//   <|start|>assistant<|channel|>final<|message|>...<|return|>                          content
// (the recipient may also stand before the channel: `<|start|>assistant to=functions.NAME<|channel|>
// commentary json<|message|>`). A commentary message without a recipient is content the user sees (a
// preamble before calls). Text with no header at all is content.
#include "tools/tool_parser.hpp"

#include "core/error.hpp"
#include "tools/tool_call_decode.hpp"

#include <algorithm>

namespace ember::tools {

namespace {

constexpr std::string_view kMessage = "<|message|>", kChannel = "<|channel|>";
// What ends a body: <|start|> is not consumed (it begins the next header).
constexpr std::string_view kEnds[] = {"<|end|>", "<|call|>", "<|return|>", "<|start|>"};

struct Header {
    std::string channel, recipient;
};

Header read_header(std::string_view h) {
    Header out;
    if (const size_t c = h.find(kChannel); c != std::string_view::npos) {
        size_t i = c + kChannel.size(), j = i;
        while (j < h.size() && h[j] != ' ' && h[j] != '<') ++j;
        out.channel = std::string(h.substr(i, j - i));
    }
    if (const size_t t = h.find("to="); t != std::string_view::npos) {
        size_t i = t + 3, j = i;
        while (j < h.size() && h[j] != ' ' && h[j] != '<' && h[j] != '\n') ++j;
        out.recipient = std::string(h.substr(i, j - i));
    }
    return out;
}

} // namespace

bool ToolCallParser::scan_harmony(bool final) {
    const std::string_view s = std::string_view(buf_).substr(pos_);
    if (!harmony_body_) {
        const size_t q = skip_space(s, 0);
        if (q == s.size()) {
            pos_ += final ? s.size() : 0;
            return false;
        }
        // No header (the model wrote plain text): the rest is content.
        if (s[q] != '<' || (s.size() - q >= 2 && s[q + 1] != '|')) {
            harmony_body_ = true;
            harmony_channel_ = "final";
            harmony_recipient_.clear();
            return true;
        }
        const size_t m = s.find(kMessage);
        if (m == std::string_view::npos) {
            if (final) malformed(s);   // a header that never opened its message
            if (final) pos_ += s.size();
            return false;
        }
        const Header h = read_header(s.substr(0, m));
        harmony_channel_ = h.channel;
        harmony_recipient_ = h.recipient;
        harmony_body_ = true;
        segment_start_ = true;
        pos_ += m + kMessage.size();
        return true;
    }
    // The body, up to its end marker.
    size_t end = std::string_view::npos, after = 0;
    for (std::string_view e : kEnds) {
        const size_t f = s.find(e);
        if (f < end) end = f, after = e == "<|start|>" ? f : f + e.size();
    }
    const bool closed = end != std::string_view::npos;
    const bool call = !harmony_recipient_.empty();
    if (call) {
        if (!closed && !final) return false;
        const std::string_view body = closed ? s.substr(0, end) : s;
        std::string name = harmony_recipient_;
        if (name.rfind("functions.", 0) == 0) name.erase(0, 10);
        grammar::JsonValue args;
        bool ok = !name.empty();
        if (ok) {
            try {
                args = grammar::parse_json(body, "arguments");
                ok = args.type == grammar::JsonValue::OBJECT;
            } catch (const Error &) {
                ok = false;
            }
        }
        if (ok && !opt_.tool_names.empty())
            ok = std::find(opt_.tool_names.begin(), opt_.tool_names.end(), name) != opt_.tool_names.end();
        if (ok) add_call(ToolCall{{}, name, args.dump()});
        else malformed(body);
        segment_start_ = true;
        pos_ += closed ? after : s.size();
        harmony_body_ = false;
        return closed;
    }
    const bool reasoning = harmony_channel_ == "analysis";
    std::string_view take = closed ? s.substr(0, end) : s;
    size_t consumed = closed ? after : s.size();
    if (!closed && !final) {
        size_t hold = 0;
        for (std::string_view e : kEnds) hold = std::max(hold, partial_marker_suffix(take, {e}));
        take.remove_suffix(hold);
        consumed = take.size();
    }
    if (reasoning) {
        out_.reasoning.append(take);
    } else {
        emit_content(take);
    }
    pos_ += consumed;
    if (!closed) return false;
    harmony_body_ = false;
    return true;
}

} // namespace ember::tools
