#include "kv/window_table.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace ember::kv {

WindowTable::WindowTable(BlockPool &pool, uint32_t window, uint32_t keep) : pool_(&pool), window_(window), keep_(keep) {
    if (window == 0) fail(EMBER_ERR_INTERNAL, "a window table needs a window of at least one position");
}

WindowTable::~WindowTable() { release_from(0); }

WindowTable::WindowTable(WindowTable &&other) noexcept
    : pool_(other.pool_), window_(other.window_), keep_(other.keep_), size_(std::exchange(other.size_, 0)),
      held_(std::exchange(other.held_, 0)), first_(std::exchange(other.first_, 0)),
      published_(std::exchange(other.published_, 0)), blocks_(std::exchange(other.blocks_, {})) {}

WindowTable &WindowTable::operator=(WindowTable &&other) noexcept {
    if (this == &other) return *this;
    release_from(0);
    pool_ = other.pool_, window_ = other.window_, keep_ = other.keep_;
    size_ = std::exchange(other.size_, 0);
    held_ = std::exchange(other.held_, 0);
    first_ = std::exchange(other.first_, 0);
    published_ = std::exchange(other.published_, 0);
    blocks_ = std::exchange(other.blocks_, {});
    return *this;
}

uint32_t WindowTable::blocks_per_sequence(uint32_t window, uint32_t keep, uint32_t n_batch, uint32_t block_size) {
    const uint64_t span = uint64_t{window} - 1 + keep + n_batch;
    return static_cast<uint32_t>((span + block_size - 1) / block_size + 2);
}

uint32_t WindowTable::pool_blocks(uint32_t window, uint32_t keep, uint32_t pass_per_seq, uint32_t pass_shared, uint32_t n_seq,
                                  uint64_t n_main_blocks) {
    if (window == 0) return 0;
    const uint64_t blocks = (uint64_t{n_seq} + 1) * blocks_per_sequence(window, keep, pass_per_seq, kBlockSize) +
                            (uint64_t{pass_shared} + kBlockSize - 1) / kBlockSize;
    // (A main pool past 2^30 blocks is refused by its caller; the bound keeps the cast exact meanwhile.)
    return blocks < n_main_blocks && blocks <= (uint64_t{1} << 30) ? static_cast<uint32_t>(blocks) : 0;
}

size_t WindowTable::blocks_for(uint64_t positions) const {
    const uint64_t b = pool_->block_size();
    return static_cast<size_t>((positions + b - 1) / b);
}

uint32_t WindowTable::first_held() const {
    return static_cast<uint32_t>(std::min<uint64_t>(uint64_t{first_} * pool_->block_size(), size_));
}

uint32_t WindowTable::first_needed(uint32_t s) const {
    const uint64_t back = uint64_t{window_} - 1 + keep_;
    return s > back ? static_cast<uint32_t>(s - back) : 0;
}

void WindowTable::release_from(size_t keep_blocks) {
    // Last block first, as KvSequence does (the pool's free list is a stack: the roots are reused last).
    while (blocks_.size() > keep_blocks) {
        if (blocks_.back() >= 0) pool_->unref(blocks_.back()), --held_;
        blocks_.pop_back();
    }
    first_ = std::min(first_, blocks_.size());
    published_ = std::min(published_, blocks_.size());
    if (blocks_.empty()) first_ = 0;
}

void WindowTable::release_unneeded() {
    const size_t end = std::min<size_t>(first_needed(size_) / pool_->block_size(), blocks_.size());
    for (; first_ < end; ++first_) {
        pool_->unref(blocks_[first_]);
        blocks_[first_] = -1;
        --held_;
    }
}

bool WindowTable::reserve(uint32_t n, const CopyBlockFn &copy_block) {
    if (n == 0) return true;
    const uint64_t end = uint64_t{size_} + n;
    if (end > std::numeric_limits<uint32_t>::max())
        fail(EMBER_ERR_INTERNAL, "window table of %u positions cannot grow by %u", size_, n);
    const uint32_t bs = pool_->block_size();
    const size_t old_count = blocks_.size();
    const size_t target = std::max(old_count, blocks_for(end));
    const size_t last = size_ / bs;
    // A partial last block that a fork shares, or that was published before a truncation made it partial
    // (adopters may hold it): write into a private copy instead.
    const bool copy = size_ % bs != 0 && (pool_->refcount(blocks_[last]) > 1 || pool_->is_published(blocks_[last]));
    const size_t needed = target - old_count + (copy ? 1 : 0);
    if (needed > pool_->n_free()) return false;
    if (needed == 0) return true;

    if (!grow_table(*pool_, blocks_, target, copy, last, copy_block)) return false;
    held_ += static_cast<uint32_t>(target - old_count);
    return true;
}

void WindowTable::commit(uint32_t n, const std::vector<uint64_t> *hashes) {
    if (n == 0) return;
    const uint64_t end = uint64_t{size_} + n;
    if (blocks_for(end) > blocks_.size())
        fail(EMBER_ERR_INTERNAL, "window commit of %u positions at %u past the reserved blocks", n, size_);
    for (size_t i = size_ / pool_->block_size(); i < blocks_for(end); ++i)
        if (blocks_[i] < 0 || pool_->refcount(blocks_[i]) != 1 || pool_->is_published(blocks_[i]))
            fail(EMBER_ERR_INTERNAL, "window commit into block %d, which is shared, published or released", blocks_[i]);
    size_ = static_cast<uint32_t>(end);
    if (hashes) {
        // Before the release below: a block released unpublished would be freed, not cached.
        const size_t full = std::min<size_t>(size_ / pool_->block_size(), hashes->size());
        for (; published_ < full; ++published_)
            if (blocks_[published_] >= 0) pool_->publish(blocks_[published_], (*hashes)[published_]);
    }
    release_unneeded();
}

uint32_t WindowTable::adopt_prefix(const std::vector<uint64_t> &hashes, uint32_t n) {
    if (size_ != 0 || !blocks_.empty()) fail(EMBER_ERR_INTERNAL, "window adopt_prefix on a table holding %u positions", size_);
    const uint32_t bs = pool_->block_size();
    if (n % bs != 0 || n / bs > hashes.size())
        fail(EMBER_ERR_INTERNAL, "window adopt_prefix of %u positions with %zu block hashes", n, hashes.size());
    // The longest m (in blocks) whose blocks a pass from m reads, first_read(m) / bs .. m - 1, are all
    // published (not the kept history before them: the adopter has none to roll back into): `run`
    // counts the found blocks ending at block i, so one pass over the hashes decides every m.
    size_t best = 0, run = 0;
    for (size_t i = 0; i < n / bs; ++i) {
        run = pool_->contains(hashes[i]) ? run + 1 : 0;
        const size_t m = i + 1;
        if (run >= m - first_read(static_cast<uint32_t>(m * bs)) / bs) best = m;
    }
    if (best == 0) return 0;
    const size_t first = first_read(static_cast<uint32_t>(best * bs)) / bs;
    blocks_.reserve(best);   // the only step that may throw, before the pool changes
    blocks_.assign(first, -1);
    for (size_t i = first; i < best; ++i) blocks_.push_back(pool_->lookup(hashes[i]));   // found: nothing evicts
    held_ = static_cast<uint32_t>(best - first);
    first_ = first;
    published_ = best;
    size_ = static_cast<uint32_t>(best * bs);
    return size_;
}

bool WindowTable::can_truncate(uint32_t n) const {
    if (n > size_) return false;
    return n == 0 || first_held() <= first_read(n);
}

void WindowTable::truncate(uint32_t n) {
    if (!can_truncate(n))
        fail(EMBER_ERR_INTERNAL, "window truncate to %u of %u positions: rows from %u on are held", n, size_, first_held());
    size_ = n;
    release_from(n == 0 ? 0 : blocks_for(n));
    // A published block that becomes partial stays published (adopters may hold it); reserve() copies it,
    // and the copy is published once full again.
    published_ = std::min<size_t>(published_, n / pool_->block_size());
}

WindowTable WindowTable::fork() const {
    WindowTable f(*pool_, window_, keep_);
    const size_t held = blocks_for(size_);   // the reservation stays private to this table
    f.blocks_.reserve(held);
    for (size_t i = 0; i < held; ++i) {
        if (blocks_[i] >= 0) pool_->ref(blocks_[i]), ++f.held_;
        f.blocks_.push_back(blocks_[i]);
    }
    f.size_ = size_;
    f.first_ = std::min(first_, held);
    f.published_ = std::min(published_, held);
    return f;
}

bool WindowTable::restore(uint32_t n) {
    if (size_ != 0 || !blocks_.empty()) fail(EMBER_ERR_INTERNAL, "window restore on a table holding %u positions", size_);
    const size_t first = first_needed(n) / pool_->block_size(), count = blocks_for(n);
    if (count - first > pool_->n_free()) return false;
    blocks_.assign(count, -1);
    for (size_t i = first; i < count; ++i) blocks_[i] = pool_->allocate();   // cannot fail: counted above
    held_ = static_cast<uint32_t>(count - first);
    first_ = first;
    published_ = first;
    size_ = n;
    return true;
}

} // namespace ember::kv
