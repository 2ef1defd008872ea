// hash_index.cpp — TokenIndex and PairIndex (linear probing, tables at most half full).
#include "tokenizer/hash_index.hpp"

#include <algorithm>
#include <cstring>

namespace ember::tok {

namespace {

size_t table_size_for(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

} // namespace

uint64_t hash_bytes(std::string_view s) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xC2B2AE3D27D4EB4Full);
    const char *p = s.data();
    size_t n = s.size();
    auto step = [&](uint64_t w) {
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    };
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        step(w);
    }
    if (n) {
        uint64_t w = 0;
        std::memcpy(&w, p, n);
        step(w);
    }
    h ^= h >> 29;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 32;
    return h;
}

void TokenIndex::build(const std::vector<std::string> &tokens) {
    tokens_ = &tokens;
    slots_.assign(table_size_for(tokens.size()), Slot{0, -1});
    mask_ = slots_.size() - 1;
    // In blocks: hash and prefetch a block's slots first, so the cache misses overlap.
    constexpr size_t kBlock = 32;
    uint64_t hashes[kBlock];
    for (size_t first = 0; first < tokens.size(); first += kBlock) {
        const size_t count = std::min(kBlock, tokens.size() - first);
        for (size_t k = 0; k < count; ++k) {
            hashes[k] = hash_bytes(tokens[first + k]);
            prefetch(hashes[k]);
        }
        for (size_t k = 0; k < count; ++k) {
            const size_t id = first + k;
            const uint64_t h = hashes[k];
            const uint32_t hi = uint32_t(h >> 32);
            for (size_t i = h & mask_;; i = (i + 1) & mask_) {
                Slot &s = slots_[i];
                if (s.id < 0) {
                    s = {hi, int32_t(id)};
                    break;
                }
                if (s.hash_hi == hi && tokens[size_t(s.id)] == tokens[id]) {
                    s.id = int32_t(id);
                    break;
                }
            }
        }
    }
}

int32_t TokenIndex::find(std::string_view text, uint64_t h) const {
    if (slots_.empty()) return -1;
    const uint32_t hi = uint32_t(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
        const Slot &s = slots_[i];
        if (s.id < 0) return -1;
        if (s.hash_hi == hi && (*tokens_)[size_t(s.id)] == text) return s.id;
    }
}

uint64_t PairIndex::mix(uint64_t k) {
    k ^= k >> 30;
    k *= 0xBF58476D1CE4E5B9ull;
    k ^= k >> 27;
    k *= 0x94D049BB133111EBull;
    k ^= k >> 31;
    return k;
}

void PairIndex::reserve(size_t n) {
    if (table_size_for(n) <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(table_size_for(n), Slot{kEmpty, {}});
    mask_ = slots_.size() - 1;
    for (const Slot &s : old) {
        if (s.key == kEmpty) continue;
        size_t i = mix(s.key) & mask_;
        while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
        slots_[i] = s;
    }
}

void PairIndex::insert(int32_t a, int32_t b, Entry e) {
    if (2 * (size_ + 1) > slots_.size()) reserve(size_ + 1 > 8 ? 2 * (size_ + 1) : 8);
    const uint64_t k = key(a, b);
    for (size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
        Slot &s = slots_[i];
        if (s.key == k) return;
        if (s.key == kEmpty) {
            s = {k, e};
            ++size_;
            return;
        }
    }
}

const PairIndex::Entry *PairIndex::find(int32_t a, int32_t b) const {
    if (slots_.empty()) return nullptr;
    const uint64_t k = key(a, b);
    for (size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
        const Slot &s = slots_[i];
        if (s.key == k) return &s.entry;
        if (s.key == kEmpty) return nullptr;
    }
}

} // namespace ember::tok
