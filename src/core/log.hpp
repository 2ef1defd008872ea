// log.hpp — internal logging. Silent unless the app installed a sink (process-wide or per model).
#pragma once

#include <ember/ember.h>

namespace ember {

// Where a message goes: a per-model sink if set, else the process-wide one.
struct LogSink {
    ember_log_fn fn = nullptr;
    void *user_data = nullptr;
};

void log_set_global(ember_log_fn fn, void *user_data, ember_log_level min_level);

// printf-style; `sink` may be nullptr (process-wide sink).
void log_msg(const LogSink *sink, ember_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

} // namespace ember
