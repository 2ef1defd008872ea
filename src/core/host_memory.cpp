#include "core/host_memory.hpp"

#include "core/error.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ember {

namespace {

// The value after `key` in a "key: value [kB]" file such as /proc/meminfo, in bytes; false if absent.
bool read_kib_field(const char *path, const char *key, uint64_t *out) {
    FILE *f = std::fopen(path, "re");
    if (!f) return false;
    char line[256];
    bool found = false;
    const size_t klen = std::strlen(key);
    while (std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, key, klen) != 0 || line[klen] != ':') continue;
        unsigned long long kib = 0;
        found = std::sscanf(line + klen + 1, "%llu", &kib) == 1;
        *out = static_cast<uint64_t>(kib) * 1024;
        break;
    }
    std::fclose(f);
    return found;
}

// A file holding one number (cgroup v2's memory.max, "max" when unlimited); false if absent or "max".
bool read_number(const char *path, uint64_t *out) {
    FILE *f = std::fopen(path, "re");
    if (!f) return false;
    unsigned long long v = 0;
    const bool ok = std::fscanf(f, "%llu", &v) == 1;
    std::fclose(f);
    *out = v;
    return ok;
}

// $EMBER_MEMORY_CHECK=0 turns the checks off (for the host and the devices alike).
bool memory_check_off() {
    const char *env = std::getenv("EMBER_MEMORY_CHECK");
    return env && std::strcmp(env, "0") == 0;
}

void check_memory(uint64_t bytes, uint64_t avail, const char *where, const char *what) {
    if (bytes > avail)
        fail(EMBER_ERR_OUT_OF_MEMORY,
             "%s needs %" PRIu64 " bytes (%.1f MiB) of %s; %" PRIu64 " bytes (%.1f MiB) are available "
             "(ember_estimate_memory gives the figure; $EMBER_MEMORY_CHECK=0 turns this check off)",
             what, bytes, bytes / 1048576.0, where, avail, avail / 1048576.0);
}

} // namespace

uint64_t host_memory_available() {
    if (memory_check_off()) return UINT64_MAX;
    uint64_t avail = UINT64_MAX, v = 0;
    if (read_kib_field("/proc/meminfo", "MemAvailable", &v)) avail = v;
    // The cgroup this process is in (a container's limit). /proc/self/cgroup names it; v2's line is "0::/path".
    uint64_t max = 0, cur = 0;
    if (FILE *f = std::fopen("/proc/self/cgroup", "re")) {
        char line[512];
        while (std::fgets(line, sizeof line, f)) {
            if (std::strncmp(line, "0::", 3) != 0) continue;
            line[std::strcspn(line, "\n")] = 0;
            char path[768];
            std::snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
            if (read_number(path, &max)) {
                std::snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", line + 3);
                if (read_number(path, &cur)) avail = std::min(avail, max > cur ? max - cur : 0);
            }
            break;
        }
        std::fclose(f);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        read_kib_field("/proc/self/status", "VmSize", &v)) {
        const uint64_t lim = static_cast<uint64_t>(rl.rlim_cur);
        avail = std::min(avail, lim > v ? lim - v : 0);
    }
    return avail;
}

void check_host_memory(uint64_t bytes, const char *what) { check_memory(bytes, host_memory_available(), "memory", what); }

void check_device_memory(uint64_t bytes, uint64_t available, const char *where, const char *what) {
    if (!memory_check_off()) check_memory(bytes, available, where, what);
}

} // namespace ember
