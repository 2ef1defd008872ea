// hash_index.hpp — flat open-addressing lookup tables for the vocabulary (text -> id) and the BPE merges
// ((left id, right id) -> rank, result). Node-based std::unordered_map spent most of a 150k-token
// vocabulary's construction time in allocation and cache misses; these keep one small slot per entry
// in one array and compare strings only when a stored hash already matches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tok {

uint64_t hash_bytes(std::string_view s);

class TokenIndex {
public:
    // Indexes tokens (which must outlive the index, unchanged). Of equal texts the later id wins.
    void build(const std::vector<std::string> &tokens);
    int32_t find(std::string_view text) const { return find(text, hash_bytes(text)); }   // -1 if absent
    int32_t find(std::string_view text, uint64_t hash) const;                            // hash_bytes(text)
    // Starts loading the slot a lookup of this hash will read, so that a batch of lookups overlaps
    // its cache misses instead of taking them one after another.
    void prefetch(uint64_t hash) const {
        if (!slots_.empty()) __builtin_prefetch(&slots_[hash & mask_]);
    }

private:
    struct Slot {
        uint32_t hash_hi;
        int32_t id;   // -1: empty
    };
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    const std::vector<std::string> *tokens_ = nullptr;
};

class PairIndex {
public:
    struct Entry {
        int32_t rank;
        int32_t result;
    };
    void reserve(size_t n);
    // Keeps the first entry of a pair (merges are listed best first).
    void insert(int32_t a, int32_t b, Entry e);
    const Entry *find(int32_t a, int32_t b) const;
    void prefetch(int32_t a, int32_t b) const {
        if (!slots_.empty()) __builtin_prefetch(&slots_[mix(key(a, b)) & mask_]);
    }

private:
    struct Slot {
        uint64_t key;   // kEmpty: free (no pair of valid ids packs to it)
        Entry entry;
    };
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
    static uint64_t mix(uint64_t k);

    std::vector<Slot> slots_;
    size_t mask_ = 0, size_ = 0;
};

} // namespace ember::tok
