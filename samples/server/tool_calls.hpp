// tool_calls.hpp — tools in the OpenAI wire format: `tools`, `tool_choice`, `parallel_tool_calls` and
// tool messages read from a chat request; the conversation rendered with them
// (ember_chat_apply_template_v2); the grammar tool_choice asks for (ember_chat_tool_grammar); the reply
// split into content, `reasoning_content` and `tool_calls` (ember_chat_parser), whole or as stream deltas.
#pragma once

#include "grammar_cache.hpp"
#include "openai_json.hpp"

#include <ember/ember.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace server {

// A message's tool_calls (assistant), tool_call_id and name (tool), reasoning_content.
std::optional<ApiError> read_tool_message_fields(const json &m, size_t i, ChatMessageText *msg);
// The request's tools, tool_choice and parallel_tool_calls (400 naming the field when malformed).
std::optional<ApiError> read_tool_request(const json &j, ToolRequest *out);

// Whether the conversation needs ember_chat_apply_template_v2 (tools, calls, tool results, reasoning).
bool uses_tool_fields(const CompletionRequest &req);
// tmpl (here and below): a chat template instead of the model's, or NULL.
std::optional<ApiError> render_with_tools(const ember_model *model, const CompletionRequest &req, const char *tmpl,
                                          std::string *out);

// What tool_choice asks of generation: a grammar (null for none), kept in `cache` under `key` (the
// tools, the choice and the template: the same tools on a later request get the same, warm grammar),
// and text to append to the prompt before generating (a control-token opener, see ember_chat_tool_prefix).
struct ToolConstraint {
    std::shared_ptr<ember_grammar> grammar;
    std::string key;
    std::string prefix;
};
std::optional<ApiError> tool_constraint(const ember_model *model, const ToolRequest &tools, const char *tmpl,
                                        GrammarCache &cache, ToolConstraint *out);

// One reply's parser. make() gives nullptr when the reply needs none (no tools, and the model's
// template writes no reasoning or calls).
class ReplyParser {
public:
    struct Delta {
        std::string content, reasoning;
        std::vector<ToolCallText> calls;
        size_t first_call = 0;   // the index of calls[0] among the reply's calls
    };
    static std::unique_ptr<ReplyParser> make(const ember_model *model, const CompletionRequest &req, const char *tmpl,
                                             const std::string &prefix);
    ~ReplyParser();
    ReplyParser(const ReplyParser &) = delete;
    ReplyParser &operator=(const ReplyParser &) = delete;

    Delta feed(const std::string &text);   // what became certain
    Delta finish();                        // the rest
    bool made_calls() const { return n_calls_ > 0; }

private:
    explicit ReplyParser(ember_chat_parser *p) : p_(p) {}
    Delta take();
    ember_chat_parser *p_;
    size_t n_calls_ = 0;
};

// A whole chat response with the parsed reply: message.content (null when the reply is only calls),
// reasoning_content, tool_calls, and finish_reason "tool_calls" when it made calls and ended by itself.
void put_reply(json *response, const ReplyParser::Delta &reply, bool made_calls);
// A stream chunk of a parsed delta: delta.content, delta.reasoning_content, delta.tool_calls (each
// call whole, with its index, id, type and function).
json reply_chunk(const ResponseMeta &m, const ReplyParser::Delta &d);

} // namespace server
