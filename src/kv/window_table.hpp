// window_table.hpp — one sequence's K/V rows of its sliding-window layers, in a block table of their own.
//
// A window layer (Gemma 2/3's local layers, gpt-oss's banded ones) at position q reads only positions
// q - window + 1 .. q (see cpu/attention.cpp's first_key), so its rows older than that are dead weight
// once the sequence has moved on. Kept in the same blocks as the global layers' rows they could never be
// freed (the global layers read every position); kept in a table of their own, in a pool of their own,
// the blocks that no pass can read again go back to that pool as the sequence advances, and the window
// layers' memory is bounded by window + n_batch positions per sequence instead of growing with n_ctx.
//
// Position p's window rows live in block blocks()[p / block_size], row p % block_size, like KvSequence's;
// entries of released blocks are -1. Retention: after commit() to size s the table still holds every
// block that a pass starting anywhere in s - keep .. s can read, i.e. positions from
//     first_needed(s) = max(0, s - (window - 1) - keep)
// on; `keep` is how far truncate() can roll back without recomputation (speculative decoding rolls back
// its rejected drafts, a few tokens). A truncation deeper than that reaches released history: can_truncate()
// says so and truncate() refuses it (the caller re-prefills or reports it; the rows are gone).
//
// Prefix reuse (engines): commit() may be given the chain hashes of the sequence's full blocks
// (KvSequence::hashes()), and then publishes each full window block under its global twin's hash in the
// window pool's own index. A block released past the window is then cached rather than freed — kept
// only while the pool has blocks to spare, evicted least recently released first — and a later sequence
// whose prompt starts the same way adopts, beside the global blocks, the window blocks its first pass
// reads (adopt_prefix): those of the last window before the point it continues from, not the whole
// prefix. Sessions pass no hashes: their window blocks are never published.
// fork() shares the held blocks by refcount, and a write into a shared or published partial block copies
// it first, as KvSequence does.
// Misuse (commit past the reservation or into a shared block, truncate past size() or into released
// history, restore on a non-empty table) throws ember::Error(EMBER_ERR_INTERNAL).
#pragma once

#include "kv/block_pool.hpp"
#include "kv/kv_sequence.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::kv {

class WindowTable {
public:
    WindowTable(BlockPool &pool, uint32_t window, uint32_t keep);
    ~WindowTable();                                 // releases every block
    WindowTable(WindowTable &&other) noexcept;
    WindowTable &operator=(WindowTable &&other) noexcept;
    WindowTable(const WindowTable &) = delete;
    WindowTable &operator=(const WindowTable &) = delete;

    // Blocks one sequence needs at most, with passes of up to n_batch tokens: the retained span
    // (window - 1 + keep positions), the pass's own positions, one block for misalignment at each end,
    // and one for the copy-on-write of a shared partial block. Size a pool as n_seq times this.
    static uint32_t blocks_per_sequence(uint32_t window, uint32_t keep, uint32_t n_batch, uint32_t block_size);
    // Blocks of a window pool for n_seq sequences keeping `keep` positions of history (WindowTable), each of
    // which may run a pass of up to pass_per_seq tokens, all of them together up to pass_shared more:
    // n_seq + 1 times blocks_per_sequence(window, keep, pass_per_seq), plus pass_shared's
    // blocks. The one sequence more is room for a fork (sessions) or a pinned prefix and cached prefix
    // blocks (engines). A session's sequences each run passes of n_batch (pass_per_seq n_batch, pass_shared
    // 0); an engine's share one pass of n_batch tokens (pass_per_seq one block: each sequence's share of a
    // pass may end in a partial block; pass_shared n_batch). 0 when that is not below n_main_blocks: with
    // the window not well inside the context a second pool saves nothing, and every layer's rows stay in
    // the main blocks.
    static uint32_t pool_blocks(uint32_t window, uint32_t keep, uint32_t pass_per_seq, uint32_t pass_shared, uint32_t n_seq,
                                uint64_t n_main_blocks);

    uint32_t size() const { return size_; }
    uint32_t window() const { return window_; }
    uint32_t keep() const { return keep_; }
    const std::vector<int32_t> &blocks() const { return blocks_; }
    // Blocks this table holds (in use by it, shared or not, reservation included).
    uint32_t n_held() const { return held_; }
    // The lowest position whose rows are still held (a multiple of the block size), or size() if none.
    uint32_t first_held() const;
    // The lowest position a pass after a commit to size s may still read: see the header comment.
    uint32_t first_needed(uint32_t s) const;
    // The lowest position a pass starting at s reads (s - window + 1): first_needed without the history.
    uint32_t first_read(uint32_t s) const { return s >= window_ ? s - window_ + 1 : 0; }

    // Makes positions size() .. size() + n - 1 writable (as KvSequence::reserve, copying a shared partial
    // last block first). Returns false, changing nothing, when the pool has too few free blocks.
    bool reserve(uint32_t n, const CopyBlockFn &copy_block);
    // Records n positions whose rows were just written, then releases every block wholly before
    // first_needed(size()). With `hashes` (the sequence's KvSequence::hashes() after its own commit, one
    // per full block), first publishes every full block not yet published, so that the released ones
    // stay cached for adopt_prefix.
    void commit(uint32_t n, const std::vector<uint64_t> *hashes = nullptr);
    // On an empty table: `hashes` are the chain hashes of the n / block_size full blocks a KvSequence
    // just adopted (n a multiple of the block size). Adopts the published window blocks a pass at the
    // largest m <= n reads (positions first_read(m) .. m - 1; m a multiple of the block size) for which
    // all are found, and returns m: the caller truncates its KvSequence to m (0 when none are found, or
    // when n == 0). No kept history comes with them, so the table cannot truncate below m. Changes
    // nothing in the pool beyond the blocks adopted.
    uint32_t adopt_prefix(const std::vector<uint64_t> &hashes, uint32_t n);
    // Whether truncate(n) keeps every row a pass at position n can read (always true for n == 0).
    bool can_truncate(uint32_t n) const;
    void truncate(uint32_t n);
    // A table sharing every held block of this one (not its reservation).
    WindowTable fork() const;
    // On an empty table: takes n positions whose rows are about to be written back (a restored state),
    // allocating blocks for positions first_needed(n) .. n - 1 only. False, changing nothing, when the
    // pool has too few free blocks.
    bool restore(uint32_t n);
    void clear() { truncate(0); }

private:
    size_t blocks_for(uint64_t positions) const;
    void release_from(size_t keep_blocks);   // releases blocks_[keep_blocks..] (the table shrinks)
    void release_unneeded();                  // the release step of commit()

    BlockPool *pool_;
    uint32_t window_, keep_;
    uint32_t size_ = 0;
    uint32_t held_ = 0;            // entries of blocks_ that are not -1
    size_t first_ = 0;             // blocks_[..first_) are -1 (released), the others held
    size_t published_ = 0;         // blocks_[..published_) were published (or released) by commit()
    std::vector<int32_t> blocks_;
};

} // namespace ember::kv
