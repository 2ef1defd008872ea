#include "core/log.hpp"

#include "core/error.hpp"

#include <atomic>
#include <mutex>

namespace ember {

namespace {
std::mutex g_mutex;
LogSink g_sink;
ember_log_level g_min = EMBER_LOG_INFO;
} // namespace

void log_set_global(ember_log_fn fn, void *user_data, ember_log_level min_level) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_sink = LogSink{fn, user_data};
    g_min = min_level;
}

void log_msg(const LogSink *sink, ember_log_level level, const char *fmt, ...) {
    LogSink target;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (sink && sink->fn) {
            target = *sink;
        } else {
            if (level < g_min) return;
            target = g_sink;
        }
    }
    if (!target.fn) return;
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    target.fn(level, s.c_str(), target.user_data);
}

} // namespace ember
