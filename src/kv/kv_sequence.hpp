// kv_sequence.hpp — one sequence's view of a paged KV cache: its tokens and its block table.
//
// Position p of the sequence lives in block blocks()[p / block_size], row p % block_size. Full blocks are
// published in the pool under their chain hash as soon as they are complete, so another sequence whose
// prompt starts the same way can adopt them (adopt_prefix) instead of recomputing them.
//
// The block table holds exactly ceil(size() / block_size) blocks, except after reserve(n), which may leave
// more: enough for max(what it held, size() + n) positions. The blocks past ceil(size() / block_size) are
// the reservation: private (refcount 1, unpublished), consumed by commit(), released by truncate() (even
// truncate(size())) and not shared by fork(). Operations cost O(blocks they touch), never O(pool).
// Misuse (commit past the reservation or into a block that is not writable, adopt_prefix on a non-empty
// sequence, truncate past size()) throws ember::Error(EMBER_ERR_INTERNAL).
#pragma once

#include "kv/block_pool.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace ember::kv {

// Copies the K/V contents of block `src` into block `dst` (all layers): provided by the backend.
using CopyBlockFn = std::function<void(int32_t src, int32_t dst)>;

// The growing step of a reserve, shared by block tables: appends newly allocated blocks to `blocks`
// until it holds `target`, then, if copy_last, replaces blocks[last] by a private copy (copy_block,
// then the old block is released). False, with `blocks` and the pool as they were, when the pool runs
// out; if copy_block throws, the same, and the exception goes on.
bool grow_table(BlockPool &pool, std::vector<int32_t> &blocks, size_t target, bool copy_last, size_t last,
                const CopyBlockFn &copy_block);

class KvSequence {
public:
    explicit KvSequence(BlockPool &pool) : pool_(&pool) {}
    ~KvSequence();                                  // releases every block
    KvSequence(KvSequence &&other) noexcept;
    KvSequence &operator=(KvSequence &&other) noexcept;
    KvSequence(const KvSequence &) = delete;
    KvSequence &operator=(const KvSequence &) = delete;

    uint32_t size() const { return static_cast<uint32_t>(tokens_.size()); }
    const std::vector<int32_t> &tokens() const { return tokens_; }
    const std::vector<int32_t> &blocks() const { return blocks_; }
    // The chain hash of each full block, in order (what it is published under).
    const std::vector<uint64_t> &hashes() const { return hashes_; }

    // On an empty sequence: adopts the cached or shared blocks that hold the longest run of full blocks
    // of `prompt` (by chain hash), and records their tokens. Returns the number of tokens adopted (a
    // multiple of the block size, and at most n - 1, so at least one token is left to evaluate and
    // produce logits).
    uint32_t adopt_prefix(const int32_t *prompt, uint32_t n);

    // Makes positions size() .. size() + n - 1 writable: allocates blocks as needed, and if the current
    // last block is partial and shared or published, replaces it by a private copy (copy_block, then the
    // old block is released). Returns false (changing nothing, not even evicting cached blocks) if the
    // pool has too few blocks. n == 0 changes nothing. If copy_block throws, nothing changes either.
    bool reserve(uint32_t n, const CopyBlockFn &copy_block);
    // Records n tokens whose K/V rows were just written at positions size() .. size() + n - 1 (after
    // reserve), and publishes every block this completes under its chain hash.
    void commit(const int32_t *tokens, uint32_t n);

    // Keeps the first n tokens; releases blocks past them. A published last block that becomes partial
    // is not unpublished here (other sequences may share it); reserve() copies it before writing.
    void truncate(uint32_t n);
    // A new sequence sharing every block of this one (refcounts +1), but not its reservation; writes then
    // copy on write.
    KvSequence fork() const;
    // Releases everything (size() becomes 0).
    void clear() { truncate(0); }

private:
    size_t blocks_for(uint64_t positions) const;
    void release_blocks_from(size_t keep);
    void publish_full_blocks(size_t first_full_block);

    BlockPool *pool_;
    std::vector<int32_t> tokens_;
    std::vector<int32_t> blocks_;
    std::vector<uint64_t> hashes_;   // chain hash of each full block (hashes_.size() == full blocks)
};

} // namespace ember::kv
