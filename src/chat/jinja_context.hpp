// jinja_context.hpp — the state of one render: variable scopes, the output being written, the limits.
#pragma once

#include "chat/jinja.hpp"

#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

namespace ember::jinja {

class Context {
public:
    explicit Context(const Limits &limits)
        : limits_(limits), deadline_(std::chrono::steady_clock::now() + limits.max_time) {
        frames_.emplace_back();
    }
    ~Context();
    Context(const Context &) = delete;
    Context &operator=(const Context &) = delete;

    const Limits &limits() const { return limits_; }

    // Innermost binding of name visible from the current frame (a macro sees its own frames and the
    // globals, not its caller's), or nullptr.
    const Value *lookup(const std::string &name) const;
    void set(const std::string &name, Value v) { frames_.back()[name] = std::move(v); }
    void set_global(const std::string &name, Value v) { frames_.front()[name] = std::move(v); }

    void push_frame() { frames_.emplace_back(); }
    void pop_frame() { frames_.pop_back(); }
    // Enters a macro body: a new frame from which only the globals are visible. Returns the token for leave_call.
    size_t enter_call(int line);
    void leave_call(size_t saved_base);

    std::string *out = nullptr;   // where Text and Output statements write
    void write(std::string_view s, int line);
    // Errors (EMBER_ERR_INVALID_ARGUMENT, naming the line) when a string or list would pass the limits.
    void check_size(size_t bytes, int line) const;
    void check_items(size_t n, int line) const;
    void step(int line);
    // Errors when the render has run past Limits::max_time (step() calls it every 256 steps; long
    // builtins call it as they go).
    void check_time(int line) const;
    // Counts bytes of strings and lists built by the template, against Limits::max_alloc.
    void charge(size_t bytes, int line);
    // namespace() objects of this render, emptied when it ends (see ~Context).
    void keep_namespace(std::shared_ptr<Dict> ns) { namespaces_.push_back(std::move(ns)); }

private:
    Limits limits_;
    std::vector<std::unordered_map<std::string, Value>> frames_;
    size_t base_ = 1;   // frames below base_ (except frame 0, the globals) belong to callers
    int call_depth_ = 0;
    uint64_t steps_ = 0;
    std::chrono::steady_clock::time_point deadline_;
    uint64_t allocated_ = 0;
    std::vector<std::shared_ptr<Dict>> namespaces_;
};

// Evaluates an expression / executes statements (jinja_eval.cpp).
Value eval(const Expr &e, Context &ctx);

} // namespace ember::jinja
