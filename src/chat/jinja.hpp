// jinja.hpp — ember's own Jinja engine for chat templates: parse once, render with variables.
//
// It covers the subset that chat templates of real models use (docs/chat.md lists it) and fails with a
// clear status elsewhere: EMBER_ERR_INVALID_ARGUMENT for syntax errors (line:column) and for failures
// while rendering (type errors, a limit, raise_exception), EMBER_ERR_UNSUPPORTED for a construct outside
// the subset (naming it and its line). A Template is immutable after parsing; render() keeps all of its
// state on the calling thread, so one template renders on any number of threads at once.
#pragma once

#include "chat/jinja_ast.hpp"
#include "chat/jinja_value.hpp"

#include <cstdint>
#include <memory>
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::jinja {

// Bounds that stop a runaway template (a huge loop, a recursive macro, a string doubled in a loop)
// with an error instead of exhausting time, memory or the stack.
struct Limits {
    size_t max_output = size_t(64) << 20;   // bytes of any string built (the output included)
    size_t max_items = size_t(1) << 20;     // elements of any list built (range(), +, *, split())
    uint64_t max_steps = 20'000'000;        // statements, loop iterations and calls executed
    int max_call_depth = 50;                // nested macro calls
    // Bytes of all strings and lists that operators, filters, methods and calls build during one render,
    // counted cumulatively (so a loop that keeps building large values stops, whatever it retains).
    // chat::render charges the parsed template against it too.
    uint64_t max_alloc = uint64_t(256) << 20;
    // Wall-clock time of one render (checked every few hundred steps); 0: none.
    std::chrono::milliseconds max_time{2000};
    // Bytes of template source (chat::render refuses a longer template before parsing it).
    size_t max_template = size_t(1) << 20;
};

using Variables = std::vector<std::pair<std::string, Value>>;

class Template {
public:
    explicit Template(std::string_view src);   // throws as parse() does
    std::string render(const Variables &vars, const Limits &limits = {}) const;

private:
    std::shared_ptr<const Body> body_;
};

} // namespace ember::jinja
