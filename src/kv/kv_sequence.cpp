#include "kv/kv_sequence.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace ember::kv {

bool grow_table(BlockPool &pool, std::vector<int32_t> &blocks, size_t target, bool copy_last, size_t last,
                const CopyBlockFn &copy_block) {
    const size_t old_count = blocks.size();
    blocks.reserve(target);  // the only step that may throw before the pool changes
    int32_t private_copy = -1;
    auto roll_back = [&] {
        // Last block first, as release_blocks_from does.
        while (blocks.size() > old_count) {
            pool.unref(blocks.back());
            blocks.pop_back();
        }
        if (private_copy >= 0) pool.unref(private_copy);
    };
    if (copy_last && (private_copy = pool.allocate()) < 0) return false;
    while (blocks.size() < target) {
        const int32_t block = pool.allocate();
        if (block < 0) {
            roll_back();
            return false;
        }
        blocks.push_back(block);
    }
    if (copy_last) {
        try {
            copy_block(blocks[last], private_copy);
        } catch (...) {
            roll_back();
            throw;
        }
        pool.unref(std::exchange(blocks[last], private_copy));
    }
    return true;
}

KvSequence::~KvSequence() { release_blocks_from(0); }

KvSequence::KvSequence(KvSequence &&other) noexcept
    : pool_(other.pool_), tokens_(std::exchange(other.tokens_, {})), blocks_(std::exchange(other.blocks_, {})),
      hashes_(std::exchange(other.hashes_, {})) {}

KvSequence &KvSequence::operator=(KvSequence &&other) noexcept {
    if (this == &other) return *this;
    release_blocks_from(0);
    pool_ = other.pool_;
    tokens_ = std::exchange(other.tokens_, {});
    blocks_ = std::exchange(other.blocks_, {});
    hashes_ = std::exchange(other.hashes_, {});
    return *this;
}

size_t KvSequence::blocks_for(uint64_t positions) const {
    const uint64_t b = pool_->block_size();
    return static_cast<size_t>((positions + b - 1) / b);
}

void KvSequence::release_blocks_from(size_t keep) {
    // Last block first: the pool evicts the least recently released block first, and a block is only
    // reachable by adopt_prefix while every block before it is still cached, so the roots should go last.
    while (blocks_.size() > keep) {
        pool_->unref(blocks_.back());
        blocks_.pop_back();
    }
}

void KvSequence::publish_full_blocks(size_t first_full_block) {
    const uint32_t bs = pool_->block_size();
    const size_t full = tokens_.size() / bs;
    for (size_t i = first_full_block; i < full; ++i) {
        const uint64_t parent = i == 0 ? 0 : hashes_[i - 1];
        const uint64_t h = BlockPool::chain_hash(parent, tokens_.data() + i * bs, bs);
        hashes_.push_back(h);
        pool_->publish(blocks_[i], h);
    }
}

uint32_t KvSequence::adopt_prefix(const int32_t *prompt, uint32_t n) {
    if (!tokens_.empty() || !blocks_.empty())
        fail(EMBER_ERR_INTERNAL, "adopt_prefix on a sequence that already holds %u tokens", size());
    if (n == 0) return 0;
    const uint32_t bs = pool_->block_size();
    // At least one prompt token must stay unadopted: evaluating it is what produces the next logits.
    const size_t max_blocks = (n - 1) / bs;
    // Reserved up front so that no push_back can throw after lookup() took a reference.
    blocks_.reserve(max_blocks);
    hashes_.reserve(max_blocks);
    uint64_t parent = 0;
    for (size_t i = 0; i < max_blocks; ++i) {
        const uint64_t h = BlockPool::chain_hash(parent, prompt + i * bs, bs);
        const int32_t block = pool_->lookup(h);
        if (block < 0) break;
        blocks_.push_back(block);
        hashes_.push_back(h);
        parent = h;
    }
    tokens_.assign(prompt, prompt + blocks_.size() * bs);
    return size();
}

bool KvSequence::reserve(uint32_t n, const CopyBlockFn &copy_block) {
    if (n == 0) return true;
    const uint64_t end = uint64_t{size()} + n;
    if (end > std::numeric_limits<uint32_t>::max())
        fail(EMBER_ERR_INTERNAL, "KV sequence of %u tokens cannot grow by %u", size(), n);
    const uint32_t bs = pool_->block_size();
    const size_t old_count = blocks_.size();
    const size_t target = std::max(old_count, blocks_for(end));

    // Writing into a partial block that another sequence holds, or that the index hands out, would change
    // their K/V rows: write into a private copy instead.
    const size_t last = size() / bs;
    const bool copy = size() % bs != 0 && (pool_->refcount(blocks_[last]) > 1 || pool_->is_published(blocks_[last]));

    // Checked first so that a reserve bound to fail evicts no cached block on its way.
    const size_t needed = target - old_count + (copy ? 1 : 0);
    if (needed > pool_->n_free()) return false;
    if (needed == 0) return true;

    return grow_table(*pool_, blocks_, target, copy, last, copy_block);
}

void KvSequence::commit(const int32_t *tokens, uint32_t n) {
    if (n == 0) return;
    const uint64_t end = uint64_t{size()} + n;
    if (blocks_for(end) > blocks_.size())
        fail(EMBER_ERR_INTERNAL, "KV commit of %u tokens at %u past the reserved blocks", n, size());
    // The rows were already written, so this catches a missing reserve() only after the fact; it still
    // beats publishing (or leaving shared) a block whose content no longer matches its hash.
    for (size_t i = size() / pool_->block_size(); i < blocks_for(end); ++i) {
        if (pool_->refcount(blocks_[i]) != 1 || pool_->is_published(blocks_[i]))
            fail(EMBER_ERR_INTERNAL, "KV commit into block %d, which is shared or published", blocks_[i]);
    }
    tokens_.insert(tokens_.end(), tokens, tokens + n);
    publish_full_blocks(hashes_.size());
}

void KvSequence::truncate(uint32_t n) {
    if (n > size()) fail(EMBER_ERR_INTERNAL, "KV truncate to %u tokens, past the %u held", n, size());
    tokens_.resize(n);
    hashes_.resize(n / pool_->block_size());  // n <= size(), so this only shrinks
    release_blocks_from(blocks_for(n));
}

KvSequence KvSequence::fork() const {
    KvSequence f(*pool_);
    f.tokens_ = tokens_;
    f.hashes_ = hashes_;
    const size_t held = blocks_for(size());  // the reservation stays private to this sequence
    f.blocks_.reserve(held);
    for (size_t i = 0; i < held; ++i) {
        pool_->ref(blocks_[i]);
        f.blocks_.push_back(blocks_[i]);
    }
    return f;
}

} // namespace ember::kv
