// state_checksum.hpp — the checksum that closes a saved session state (session_state.cpp describes the
// format). In a header of its own so the state fuzzer can repair it after a mutation and reach the
// checks behind it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ember {

inline uint64_t state_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

// A 64-bit checksum, 8 bytes at a time and the zero-padded tail: detects any corruption, not an adversary.
inline uint64_t state_checksum(const uint8_t *p, size_t n) {
    uint64_t h = 0x243f6a8885a308d3ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = state_mix(h, w);
    }
    uint64_t tail = 0;
    if (n > i) std::memcpy(&tail, p + i, n - i);
    return state_mix(h, tail);
}

} // namespace ember
