// error.hpp — how failures travel inside the library.
//
// Internal code throws ember::Error (a status plus a message); the C ABI layer (src/abi) catches it, and
// everything else, at the boundary and turns it into an ember_status and a thread-local message. Nothing
// inside needs to thread status codes through return values.
#pragma once

#include <ember/ember.h>

#include <cstdarg>
#include <exception>
#include <string>

namespace ember {

class Error : public std::exception {
public:
    Error(ember_status status, std::string message) : status_(status), message_(std::move(message)) {}
    ember_status status() const noexcept { return status_; }
    const char *what() const noexcept override { return message_.c_str(); }

private:
    ember_status status_;
    std::string message_;
};

// printf-style formatting into a std::string.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vformat(const char *fmt, va_list ap);

// Throws ember::Error(status, formatted message).
[[noreturn]] void fail(ember_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

} // namespace ember
