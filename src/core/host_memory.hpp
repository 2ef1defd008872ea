// host_memory.hpp — how much host memory is left, checked before a large allocation.
//
// Allocations that the kernel grants but cannot back end with the OOM killer (Linux overcommits, and a
// KV cache is zero-filled page by page: a session of n_ctx 2^24 took 52 s and 10 GiB before anyone
// noticed). Sessions and engines therefore compare what they are about to allocate (the figure
// ember_estimate_memory reports, from the same arithmetic) with what is available and fail first with
// EMBER_ERR_OUT_OF_MEMORY naming both.
#pragma once

#include <cstdint>

namespace ember {

// Bytes a new allocation can take: the least of /proc/meminfo's MemAvailable, the cgroup (v2) limit
// minus its usage, and RLIMIT_AS minus the address space in use. UINT64_MAX where none is known, or
// when $EMBER_MEMORY_CHECK is "0" (the check off).
uint64_t host_memory_available();

// Throws EMBER_ERR_OUT_OF_MEMORY ("<what> needs N bytes; M are available") when bytes exceed
// host_memory_available().
void check_host_memory(uint64_t bytes, const char *what);

// The same for a GPU device's memory: `available` as its backend reports it (Backend::
// device_memory_available, UINT64_MAX: unknown), `where` naming the memory ("cuda device memory").
// Off, like the host's, when $EMBER_MEMORY_CHECK is "0".
void check_device_memory(uint64_t bytes, uint64_t available, const char *where, const char *what);

} // namespace ember
