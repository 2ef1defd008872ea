// block_pool.hpp — the bookkeeping of a paged KV cache: which fixed-size blocks are free, in use (with
// reference counts), or cached for prefix reuse; content hashes of full blocks; LRU eviction.
//
// The pool manages block ids only; the K/V bytes live in the backend's memory, indexed by block id (see
// backend.hpp). Not thread-safe: its owner (one session, or the engine's worker) serializes access.
//
// States of a block:
//   free    — refcount 0, no content worth keeping; on the free list.
//   in use  — refcount >= 1 (each sequence whose block table holds it counts once).
//   cached  — refcount 0 but published (full, with a content hash): kept for prefix reuse until it is
//             evicted, least recently released first, when allocate() finds no free block.
// A block is writable by a sequence only while its refcount is 1 and it is not published; otherwise the
// writer copies it first (copy-on-write), see kv_sequence.hpp.
//
// Every operation is O(1) (amortized, for the hash index). Misuse (an id out of range, ref or unref of a
// block with refcount 0, publishing a block nobody holds or under hash 0) throws
// ember::Error(EMBER_ERR_INTERNAL) and leaves the pool unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace ember::kv {

// Tokens per block for sessions and engines. 16 keeps the copy-on-write and the unshared tail of a
// prompt small while a block still fills a whole attention tile's run of rows.
constexpr uint32_t kBlockSize = 16;

class BlockPool {
public:
    BlockPool(uint32_t n_blocks, uint32_t block_size);

    uint32_t n_blocks() const { return static_cast<uint32_t>(refs_.size()); }
    uint32_t block_size() const { return block_size_; }
    uint32_t n_free() const;     // free + cached (what allocate() can still hand out)
    uint32_t n_cached() const { return static_cast<uint32_t>(lru_.size()); }

    // A block with refcount 1, not published: a free one if any, else the least recently released cached
    // block (which leaves the hash index). -1 when every block is in use.
    int32_t allocate();
    // Only for a block in use (refcount >= 1); a cached block comes back through lookup().
    void ref(int32_t block);
    // At refcount 0 a published block becomes cached (most recently released), others become free.
    void unref(int32_t block);
    uint32_t refcount(int32_t block) const;

    // Content hash of a block that holds tokens[0..n) and follows a block with hash `parent` (0 for the
    // first block): it identifies the block's content including everything before it, because the K/V
    // rows of a position depend on the whole prefix.
    static uint64_t chain_hash(uint64_t parent, const int32_t *tokens, uint32_t n);

    // Marks a full block in use as holding the content `hash` (nonzero), so later sequences can find it.
    // If another block already holds that hash, nothing changes (the first one stays the one found, and
    // this block stays unpublished); publishing a block again under the same hash is a no-op, under a
    // different one an error (its content changed without unpublish()).
    void publish(int32_t block, uint64_t hash);
    // Removes the block from the hash index (its content is about to change); a cached block becomes
    // free. No-op if it is not published.
    void unpublish(int32_t block);
    bool is_published(int32_t block) const;
    // The block holding `hash`, with its refcount incremented (a cached block comes back into use), or -1.
    int32_t lookup(uint64_t hash);
    // Whether some block holds `hash` (what lookup() would find), changing nothing.
    bool contains(uint64_t hash) const { return hash != 0 && by_hash_.count(hash) != 0; }

private:
    size_t index(int32_t block) const;   // checked
    void uncache(size_t b);

    uint32_t block_size_;
    std::vector<uint32_t> refs_;
    std::vector<uint64_t> hash_of_;                    // 0: not published
    std::vector<int32_t> free_;                        // stack of free block ids
    std::list<int32_t> lru_;                           // cached blocks, least recently released first
    std::vector<std::list<int32_t>::iterator> lru_pos_;
    std::vector<bool> in_lru_;
    std::unordered_map<uint64_t, int32_t> by_hash_;
};

} // namespace ember::kv
