// tool_parser.cpp — the families whose output is reasoning, then content with calls set off by an
// opener (tool_parser.hpp). gpt-oss's channels are tool_parser_harmony.cpp's.
//
// The parser keeps the text since the last decided position (pos_) and scans it again after each feed;
// a scan advances pos_ only over text whose meaning is settled, so a long output costs O(length) and
// only an unfinished call (short) is rescanned.
#include "tools/tool_parser.hpp"

#include "core/error.hpp"
#include "tools/tool_call_decode.hpp"

#include <algorithm>

namespace ember::tools {

namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t trailing_space(std::string_view s) {
    size_t n = 0;
    while (n < s.size() && is_space(s[s.size() - 1 - n])) ++n;
    return n;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Whether s is a proper prefix of p (the rest may still arrive).
bool prefix_of(std::string_view s, std::string_view p) { return s.size() < p.size() && p.substr(0, s.size()) == s; }

std::string_view opener(Format f) {
    switch (f) {
    case Format::Hermes: return "<tool_call>";
    case Format::Llama3: return "<|python_tag|>";
    case Format::Mistral: return "[TOOL_CALLS]";
    case Format::Granite:
    case Format::Phi4: return "<|tool_call|>";
    default: return {};
    }
}

// The outcome of reading a call at an opener.
struct CallScan {
    enum Kind { Complete, Incomplete, Malformed } kind = Incomplete;
    size_t end = 0;                 // Complete and Malformed: where the call's text ends
    std::vector<ToolCall> calls;
};

CallScan incomplete() { return {}; }
CallScan malformed_until(size_t end) { return {CallScan::Malformed, end, {}}; }

// After a complete JSON span: an optional closer, then the decoded calls.
CallScan finish_json(std::string_view s, JsonSpan span, std::string_view closer, bool final) {
    size_t end = span.end;
    if (!closer.empty()) {
        const size_t q = skip_space(s, end);
        if (starts_with(s.substr(q), closer)) end = q + closer.size();
        else if (!final && prefix_of(s.substr(q), closer)) return incomplete();
        // Otherwise the closer is missing: the call stands without it.
    }
    auto calls = decode_calls(s.substr(span.begin, span.end - span.begin));
    if (!calls) return malformed_until(end);
    return {CallScan::Complete, end, std::move(*calls)};
}

// The JSON body of a call after its opener (at p).
CallScan scan_json_body(std::string_view s, size_t p, std::string_view closer, bool final) {
    const JsonSpan span = json_span(s, p);
    if (span.kind == JsonSpan::Incomplete) return incomplete();
    if (span.kind == JsonSpan::Invalid) {
        // Not JSON: with a closer, everything up to it is the bad call; without one, only the opener.
        if (closer.empty()) return malformed_until(p);
        const size_t c = s.find(closer, p);
        if (c == std::string_view::npos) return final ? malformed_until(s.size()) : incomplete();
        return malformed_until(c + closer.size());
    }
    return finish_json(s, span, closer, final);
}

// Qwen3-Coder / Qwen3.5's XML body: <function=NAME> <parameter=P>VALUE</parameter>... </function>.
// A value that parses as JSON (a number, an object) is that value; anything else is a string.
std::optional<ToolCall> decode_xml_call(std::string_view body) {
    constexpr std::string_view kFn = "<function=", kParam = "<parameter=", kParamEnd = "</parameter>";
    size_t p = skip_space(body, 0);
    if (!starts_with(body.substr(p), kFn)) return std::nullopt;
    const size_t name_end = body.find('>', p);
    if (name_end == std::string_view::npos) return std::nullopt;
    ToolCall c;
    c.name = std::string(body.substr(p + kFn.size(), name_end - p - kFn.size()));
    if (c.name.empty()) return std::nullopt;
    grammar::JsonValue args;
    args.type = grammar::JsonValue::OBJECT;
    p = name_end + 1;
    for (;;) {
        p = skip_space(body, p);
        if (!starts_with(body.substr(p), kParam)) break;
        const size_t key_end = body.find('>', p);
        const size_t value_end = key_end == std::string_view::npos ? key_end : body.find(kParamEnd, key_end);
        if (value_end == std::string_view::npos) return std::nullopt;
        std::string key(body.substr(p + kParam.size(), key_end - p - kParam.size()));
        std::string_view value = body.substr(key_end + 1, value_end - key_end - 1);
        if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
        if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
        grammar::JsonValue v;
        try {
            v = grammar::parse_json(value, "parameter");
        } catch (const Error &) {
            v = grammar::JsonValue();
            v.type = grammar::JsonValue::STRING;
            v.text = std::string(value);
        }
        args.members.emplace_back(std::move(key), std::move(v));
        p = value_end + kParamEnd.size();
    }
    if (!starts_with(body.substr(skip_space(body, p)), "</function>")) return std::nullopt;
    c.arguments = args.dump();
    // A value kept as a string must be text: bytes that are not UTF-8 make no JSON string.
    try {
        (void)grammar::parse_json(c.arguments, "arguments");
    } catch (const Error &) {
        return std::nullopt;
    }
    return c;
}

CallScan scan_hermes(std::string_view s, size_t p, bool final) {
    constexpr std::string_view kClose = "</tool_call>";
    const size_t q = skip_space(s, p);
    if (q < s.size() && s[q] == '<') {
        if (!final && prefix_of(s.substr(q), "<function=")) return incomplete();
        const size_t c = s.find(kClose, q);
        if (c == std::string_view::npos) return final ? malformed_until(s.size()) : incomplete();
        auto call = decode_xml_call(s.substr(q, c - q));
        if (!call) return malformed_until(c + kClose.size());
        return {CallScan::Complete, c + kClose.size(), {std::move(*call)}};
    }
    return scan_json_body(s, p, kClose, final);
}

// Mistral: [TOOL_CALLS] then a JSON array (Nemo, Small 3.0/3.1), or NAME[ARGS]{...} (later models,
// with an optional [CALL_ID]ID before [ARGS]).
CallScan scan_mistral(std::string_view s, size_t p, bool final) {
    const size_t q = skip_space(s, p);
    if (q >= s.size()) return final ? malformed_until(s.size()) : incomplete();
    if (s[q] == '[' || s[q] == '{') return scan_json_body(s, q, {}, final);
    constexpr std::string_view kArgs = "[ARGS]", kCallId = "[CALL_ID]";
    // NAME (and ID) are runs of name characters, each ended by a marker: decided by the bytes seen,
    // however the text was split.
    auto name_run = [&](size_t from) {
        size_t i = from;
        while (i < s.size() && i - from <= 64 &&
               ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                s[i] == '_' || s[i] == '-' || s[i] == '.'))
            ++i;
        return i;
    };
    size_t name_end = name_run(q);
    if (name_end == s.size()) return final ? malformed_until(s.size()) : incomplete();
    std::string_view rest = s.substr(name_end);
    std::string id;
    size_t args = name_end;
    if (starts_with(rest, kCallId)) {
        const size_t id_begin = name_end + kCallId.size();
        const size_t id_end = name_run(id_begin);
        if (id_end == s.size()) return final ? malformed_until(s.size()) : incomplete();
        id = std::string(s.substr(id_begin, id_end - id_begin));
        args = id_end;
        rest = s.substr(id_end);
    } else if (!final && prefix_of(rest, kCallId)) {
        return incomplete();
    }
    if (!starts_with(rest, kArgs)) {
        if (!final && prefix_of(rest, kArgs)) return incomplete();
        return malformed_until(q);
    }
    const std::string_view name = s.substr(q, name_end - q);
    const JsonSpan span = json_span(s, args + kArgs.size());
    if (span.kind == JsonSpan::Incomplete) return final ? malformed_until(s.size()) : incomplete();
    if (span.kind == JsonSpan::Invalid || name.empty()) return malformed_until(span.begin);
    grammar::JsonValue v;
    try {
        v = grammar::parse_json(s.substr(span.begin, span.end - span.begin), "arguments");
    } catch (const Error &) {
        return malformed_until(span.end);
    }
    if (v.type != grammar::JsonValue::OBJECT) return malformed_until(span.end);
    return {CallScan::Complete, span.end, {ToolCall{id, std::string(name), v.dump()}}};
}

CallScan scan_call_body(Format f, std::string_view s, size_t at, bool final) {
    const size_t p = at + opener(f).size();
    switch (f) {
    case Format::Hermes: return scan_hermes(s, p, final);
    case Format::Mistral: return scan_mistral(s, p, final);
    case Format::Llama3: return scan_json_body(s, p, {}, final);
    case Format::Granite:
    case Format::Phi4: return scan_json_body(s, p, f == Format::Phi4 ? "<|/tool_call|>" : "", final);
    default: return malformed_until(p);
    }
}

// At the end of the text, a call still unfinished is malformed.
CallScan scan_call(Format f, std::string_view s, size_t at, bool final) {
    CallScan c = scan_call_body(f, s, at, final);
    if (c.kind == CallScan::Incomplete && final) return malformed_until(s.size());
    return c;
}

} // namespace

Format detect_format(std::string_view t) {
    auto has = [&](std::string_view m) { return t.find(m) != std::string_view::npos; };
    if (has("<|channel|>")) return Format::GptOss;
    if (has("[TOOL_CALLS]")) return Format::Mistral;
    if (has("<tool_call>")) return Format::Hermes;
    if (has("<|/tool_call|>") || has("<|tool|>")) return Format::Phi4;
    if (has("<|tool_call|>")) return Format::Granite;
    if (has("<|python_tag|>") || (has("<|start_header_id|>") && has("tools"))) return Format::Llama3;
    return Format::Content;
}

ToolCallParser::ToolCallParser(Format format, ParserOptions options) : format_(format), opt_(std::move(options)) {
    if (format_ == Format::Auto || static_cast<int32_t>(format_) < 0 || static_cast<int32_t>(format_) >= kFormatCount)
        fail(EMBER_ERR_INVALID_ARGUMENT, "the parser needs a concrete format, not %d", static_cast<int>(format_));
    if (format_ == Format::GptOss) mode_ = Mode::Harmony;
    else if (opt_.reasoning_open) mode_ = Mode::Reasoning;
}

std::string ToolCallParser::make_id(size_t index, const ToolCall &c) {
    // FNV-1a over the index, name and arguments, written in base 36.
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](std::string_view s) {
        for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull;
    };
    mix(std::to_string(index));
    mix(c.name);
    mix(c.arguments);
    static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    std::string id(9, '0');
    for (char &ch : id) ch = kDigits[h % 36], h /= 36;
    return id;
}

void ToolCallParser::feed(std::string_view text) {
    if (finished_) fail(EMBER_ERR_INVALID_STATE, "the parser was finished: create another for more text");
    buf_.append(text);
    scan(false);
}

void ToolCallParser::finish() {
    if (finished_) return;
    scan(true);
    finished_ = true;
}

ParseDelta ToolCallParser::take() {
    ParseDelta d;
    d.content = out_.content.substr(taken_content_);
    d.reasoning = out_.reasoning.substr(taken_reasoning_);
    d.first_call = taken_calls_;
    d.n_calls = out_.calls.size() - taken_calls_;
    taken_content_ = out_.content.size();
    taken_reasoning_ = out_.reasoning.size();
    taken_calls_ = out_.calls.size();
    return d;
}

void ToolCallParser::emit_content(std::string_view s) {
    if (segment_start_) {
        const size_t lead = skip_space(s, 0);
        s.remove_prefix(lead);
        if (s.empty()) return;
        segment_start_ = false;
    }
    out_.content.append(s);
}

void ToolCallParser::add_call(ToolCall c) {
    if (c.id.empty()) c.id = make_id(out_.calls.size(), c);
    out_.calls.push_back(std::move(c));
}

void ToolCallParser::malformed(std::string_view raw) {
    out_.malformed = true;
    emit_content(raw);
}

void ToolCallParser::scan(bool final) {
    for (;;) {
        bool progressed = false;
        switch (mode_) {
        case Mode::Start: progressed = scan_start(final); break;
        case Mode::Reasoning: progressed = scan_reasoning(final); break;
        case Mode::Content: progressed = scan_content(final); break;
        case Mode::BareJson: progressed = scan_bare_json(final); break;
        case Mode::Harmony: progressed = scan_harmony(final); break;
        }
        if (!progressed) break;
    }
    // Keep the undecided tail only.
    if (pos_ > 4096 && pos_ * 2 > buf_.size()) {
        buf_.erase(0, pos_);
        pos_ = 0;
    }
}

bool ToolCallParser::scan_start(bool final) {
    const std::string_view s = std::string_view(buf_).substr(pos_);
    const size_t q = skip_space(s, 0);
    if (q == s.size() && !final) return false;
    const std::string_view rest = s.substr(q);
    if (!final && prefix_of(rest, kThinkOpen)) return false;
    if (starts_with(rest, kThinkOpen)) {
        pos_ += q + kThinkOpen.size();
        mode_ = Mode::Reasoning;
        return true;
    }
    // Llama 3.x writes a call as a bare JSON object at the start of its reply.
    mode_ = format_ == Format::Llama3 && !rest.empty() && rest[0] == '{' ? Mode::BareJson : Mode::Content;
    return true;
}

bool ToolCallParser::scan_reasoning(bool final) {
    const std::string_view s = std::string_view(buf_).substr(pos_);
    const size_t close = s.find(kThinkClose);
    const bool closed = close != std::string_view::npos;
    std::string_view take = closed ? s.substr(0, close) : s;
    size_t consumed = closed ? close + kThinkClose.size() : s.size();
    if (!closed && !final) {
        // Hold back a possible start of </think>, and whitespace that may turn out to end the block.
        take.remove_suffix(partial_marker_suffix(take, {kThinkClose}));
        take.remove_suffix(trailing_space(take));
        consumed = take.size();
    } else {
        take.remove_suffix(trailing_space(take));
    }
    if (out_.reasoning.empty()) take.remove_prefix(skip_space(take, 0));   // consumed, dropped
    out_.reasoning.append(take);
    pos_ += consumed;
    if (!closed) return false;
    mode_ = Mode::Content;
    segment_start_ = true;
    return true;
}

bool ToolCallParser::scan_content(bool final) {
    const std::string_view s = std::string_view(buf_).substr(pos_);
    const std::string_view open = opener(format_);
    const size_t at = open.empty() ? std::string_view::npos : s.find(open);
    if (at == std::string_view::npos) {
        std::string_view take = s;
        if (!final) {
            if (!open.empty()) take.remove_suffix(partial_marker_suffix(take, {open}));
            take.remove_suffix(trailing_space(take));
        } else {
            take.remove_suffix(trailing_space(take));
        }
        // Whitespace at a segment's start is dropped: consume it even while holding the rest.
        const size_t consumed = final ? s.size() : static_cast<size_t>(take.size());
        emit_content(take);
        pos_ += consumed;
        return false;
    }
    const std::string_view before = s.substr(0, at);
    const std::string_view trimmed = before.substr(0, before.size() - trailing_space(before));
    CallScan c = scan_call(format_, s, at, final);
    if (c.kind == CallScan::Incomplete) {
        // The text before the opener is settled either way; the whitespace just before it is dropped if
        // a call follows and kept if the call turns out malformed, so it waits with the call.
        emit_content(trimmed);
        pos_ += trimmed.size();
        return false;
    }
    bool ok = c.kind == CallScan::Complete;
    if (ok && !opt_.tool_names.empty())
        for (const ToolCall &call : c.calls)
            ok = ok && std::find(opt_.tool_names.begin(), opt_.tool_names.end(), call.name) != opt_.tool_names.end();
    if (ok) {
        emit_content(trimmed);
        for (ToolCall &call : c.calls) add_call(std::move(call));
        segment_start_ = true;
    } else {
        emit_content(before);
        malformed(s.substr(at, c.end - at));
    }
    pos_ += c.end;
    return true;
}

bool ToolCallParser::scan_bare_json(bool final) {
    const std::string_view s = std::string_view(buf_).substr(pos_);
    const JsonSpan span = json_span(s, 0);
    if (span.kind == JsonSpan::Incomplete && !final) return false;
    mode_ = Mode::Content;
    if (span.kind != JsonSpan::Complete) return true;   // not a call: plain content
    auto calls = decode_calls(s.substr(span.begin, span.end - span.begin));
    if (!calls) {
        // JSON that is no call is an answer like any other, unless it was meant as one (its first key is
        // "name"). Only the span is read: text after it may not have arrived yet when streaming.
        const std::string_view head = s.substr(span.begin, std::min<size_t>(8, span.end - span.begin));
        if (head.find("\"name\"") != std::string_view::npos) out_.malformed = true;
        return true;
    }
    for (ToolCall &c : *calls) add_call(std::move(c));
    pos_ += span.end;
    segment_start_ = true;
    return true;
}

} // namespace ember::tools
