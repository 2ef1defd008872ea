// tool_parser.hpp — a model's output text split into content, reasoning and tool calls, whole or while
// it streams.
//
// The text must carry the model's special tokens as text (`<tool_call>`, `[TOOL_CALLS]`,
// `<|channel|>`): render them when detokenizing. Feed it in pieces of any size (one byte at a time
// works); after each feed, take() gives what became certain since the last take: content and reasoning
// never include text that may still turn out to be part of a call (a possible start of a call opener is
// held back until the next bytes decide), and a call appears only once it is complete and parsed.
// finish() ends the text: what was held back is decided (an unfinished or unparsable call becomes
// content, with malformed() set). The pieces taken in order always add up to result(), and result()
// is the same however the text was split.
#pragma once

#include "tools/tool_types.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tools {

struct ParserOptions {
    // The prompt already opened the reasoning block (a template that ends the generation prompt with
    // "<think>\n"): the text starts inside it.
    bool reasoning_open = false;
    // When not empty, a call to a tool not named here is malformed (yielded as content).
    std::vector<std::string> tool_names;
};

struct ParseDelta {
    std::string content, reasoning;
    size_t first_call = 0, n_calls = 0;   // calls [first_call, first_call + n_calls) of result().calls
};

struct ParseResult {
    std::string content, reasoning;
    std::vector<ToolCall> calls;
    bool malformed = false;   // some text that opened a call did not parse as one (it is in content)
};

// Which format a chat template writes (by the markers it contains); Format::Content when none.
Format detect_format(std::string_view chat_template);

class ToolCallParser {
public:
    // Throws Error(EMBER_ERR_INVALID_ARGUMENT) for Format::Auto (resolve it with detect_format first).
    ToolCallParser(Format format, ParserOptions options);
    // Throws Error(EMBER_ERR_INVALID_STATE) after finish().
    void feed(std::string_view text);
    void finish();
    ParseDelta take();
    const ParseResult &result() const { return out_; }
    bool finished() const { return finished_; }
    Format format() const { return format_; }

    // Every call's id: 9 letters and digits (Mistral's templates require that length), derived from the
    // call's position, name and arguments, so the same output gives the same ids.
    static std::string make_id(size_t index, const ToolCall &c);

private:
    enum class Mode { Start, Reasoning, Content, BareJson, Harmony };
    void scan(bool final);
    bool scan_start(bool final);
    bool scan_reasoning(bool final);
    bool scan_content(bool final);
    bool scan_bare_json(bool final);
    bool scan_harmony(bool final);
    // Appends content, dropping whitespace at the start of a segment (after reasoning or a call).
    void emit_content(std::string_view s);
    void add_call(ToolCall c);
    void malformed(std::string_view raw);

    Format format_;
    ParserOptions opt_;
    std::string buf_;
    size_t pos_ = 0;         // buf_[0, pos_) is decided
    Mode mode_ = Mode::Start;
    bool segment_start_ = true;
    bool finished_ = false;
    ParseResult out_;
    // gpt-oss: the message being read (its channel and recipient, once its header is complete).
    bool harmony_body_ = false;
    std::string harmony_channel_, harmony_recipient_;
    size_t taken_content_ = 0, taken_reasoning_ = 0, taken_calls_ = 0;
};

} // namespace ember::tools
