#include "kv/block_pool.hpp"

#include "core/error.hpp"

#include <limits>
#include <new>

namespace ember::kv {

BlockPool::BlockPool(uint32_t n_blocks, uint32_t block_size)
    : block_size_(block_size), refs_(n_blocks, 0), hash_of_(n_blocks, 0), lru_pos_(n_blocks),
      in_lru_(n_blocks, false) {
    if (block_size == 0) fail(EMBER_ERR_INVALID_ARGUMENT, "KV block size must be > 0");
    // Block ids travel as int32_t (with -1 for "none").
    if (n_blocks > static_cast<uint32_t>(std::numeric_limits<int32_t>::max()))
        fail(EMBER_ERR_INVALID_ARGUMENT, "too many KV blocks: %u", n_blocks);
    free_.reserve(n_blocks);
    // Pushed in reverse so that a fresh pool hands out 0, 1, 2, ...: deterministic and easy to debug.
    for (uint32_t i = n_blocks; i > 0; --i) free_.push_back(static_cast<int32_t>(i - 1));
}

size_t BlockPool::index(int32_t block) const {
    if (block < 0 || static_cast<size_t>(block) >= refs_.size())
        fail(EMBER_ERR_INTERNAL, "KV block id %d out of range (pool of %zu)", block, refs_.size());
    return static_cast<size_t>(block);
}

uint32_t BlockPool::n_free() const { return static_cast<uint32_t>(free_.size() + lru_.size()); }

uint32_t BlockPool::refcount(int32_t block) const { return refs_[index(block)]; }

bool BlockPool::is_published(int32_t block) const { return hash_of_[index(block)] != 0; }

void BlockPool::uncache(size_t b) {
    lru_.erase(lru_pos_[b]);
    in_lru_[b] = false;
}

int32_t BlockPool::allocate() {
    int32_t block;
    if (!free_.empty()) {
        block = free_.back();
        free_.pop_back();
    } else if (!lru_.empty()) {
        // Evicting the least recently released block keeps the prefixes most likely to come back.
        block = lru_.front();
        const auto b = static_cast<size_t>(block);
        uncache(b);
        by_hash_.erase(hash_of_[b]);
        hash_of_[b] = 0;
    } else {
        return -1;
    }
    refs_[static_cast<size_t>(block)] = 1;
    return block;
}

void BlockPool::ref(int32_t block) {
    const size_t b = index(block);
    // A block at refcount 0 is on the free list or in the LRU; taking it here would leave it there too.
    if (refs_[b] == 0) fail(EMBER_ERR_INTERNAL, "ref of KV block %d, which is not in use", block);
    ++refs_[b];
}

void BlockPool::unref(int32_t block) {
    const size_t b = index(block);
    if (refs_[b] == 0) fail(EMBER_ERR_INTERNAL, "unref of KV block %d, which is not in use", block);
    if (--refs_[b] > 0) return;
    if (hash_of_[b] != 0) {
        // unref runs in destructors and on error paths, so it must not fail: without memory for the LRU
        // node, the block forgets its content and becomes free instead of cached.
        try {
            lru_pos_[b] = lru_.insert(lru_.end(), block);
            in_lru_[b] = true;
            return;
        } catch (const std::bad_alloc &) {
            by_hash_.erase(hash_of_[b]);
            hash_of_[b] = 0;
        }
    }
    free_.push_back(block);  // never reallocates: reserved for every block
}

namespace {

// The splitmix64 finalizer: a bijection on 64 bits with full avalanche, so every input bit reaches
// every output bit.
uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

} // namespace

uint64_t BlockPool::chain_hash(uint64_t parent, const int32_t *tokens, uint32_t n) {
    // One mixing round per token, with a constant added so that 0 is no fixed point: a block and its own
    // prefix (or a run of zero tokens) differ by whole rounds.
    uint64_t h = mix64(parent + kGolden);
    for (uint32_t i = 0; i < n; ++i) h = mix64((h ^ static_cast<uint32_t>(tokens[i])) + kGolden);
    return h != 0 ? h : 1;  // 0 means "not published"
}

void BlockPool::publish(int32_t block, uint64_t hash) {
    const size_t b = index(block);
    if (hash == 0) fail(EMBER_ERR_INTERNAL, "publish of KV block %d under hash 0", block);
    if (hash_of_[b] == hash) return;
    if (hash_of_[b] != 0)
        fail(EMBER_ERR_INTERNAL, "KV block %d published again under a different hash", block);
    // A free block's content is garbage: indexing it would let lookup() hand out stale rows.
    if (refs_[b] == 0) fail(EMBER_ERR_INTERNAL, "publish of KV block %d, which is not in use", block);
    if (!by_hash_.try_emplace(hash, block).second) return;
    hash_of_[b] = hash;
}

void BlockPool::unpublish(int32_t block) {
    const size_t b = index(block);
    if (hash_of_[b] == 0) return;
    by_hash_.erase(hash_of_[b]);
    hash_of_[b] = 0;
    if (in_lru_[b]) {
        uncache(b);
        free_.push_back(block);
    }
}

int32_t BlockPool::lookup(uint64_t hash) {
    if (hash == 0) return -1;
    const auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return -1;
    const int32_t block = it->second;
    const auto b = static_cast<size_t>(block);
    if (in_lru_[b]) uncache(b);
    ++refs_[b];
    return block;
}

} // namespace ember::kv
