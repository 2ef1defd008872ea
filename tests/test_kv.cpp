// test_kv.cpp — the paged KV cache's bookkeeping: the block pool (allocation, refcounts, publishing, LRU
// eviction, chain hashes) and sequences over it (prefix adoption, copy-on-write, truncation, rollback),
// ending with a randomized model check against a shadow of the K/V memory.
#include "test_util.h"

#include "core/error.hpp"
#include "kv/block_pool.hpp"
#include "kv/kv_sequence.hpp"
#include "kv/window_table.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

using ember::kv::BlockPool;
using ember::kv::CopyBlockFn;
using ember::kv::KvSequence;
using ember::kv::WindowTable;

template <class F> static bool throws_internal(F &&f) {
    try {
        f();
    } catch (const ember::Error &e) {
        return e.status() == EMBER_ERR_INTERNAL;
    }
    return false;
}

static std::vector<int32_t> iota_tokens(uint32_t n, int32_t first = 100) {
    std::vector<int32_t> t(n);
    for (uint32_t i = 0; i < n; ++i) t[i] = first + static_cast<int32_t>(i);
    return t;
}

static uint64_t hash_of_block(const std::vector<int32_t> &t, uint32_t bs, uint32_t i, uint64_t parent) {
    return BlockPool::chain_hash(parent, t.data() + size_t{i} * bs, bs);
}

// Counts copies; the K/V memory itself is irrelevant to tests 4-7.
struct CopyLog {
    std::vector<std::pair<int32_t, int32_t>> calls;
    CopyBlockFn fn() {
        return [this](int32_t src, int32_t dst) { calls.emplace_back(src, dst); };
    }
};

// reserve + commit, as the forward pass does; fails the test if the pool is too small.
static void append(KvSequence &s, const std::vector<int32_t> &t, CopyLog &log) {
    if (!s.reserve(static_cast<uint32_t>(t.size()), log.fn())) fail_msg("reserve of %zu tokens failed", t.size());
    s.commit(t.data(), static_cast<uint32_t>(t.size()));
}

// 1 ---------------------------------------------------------------------------------------------------
static void test_allocation(void **) {
    BlockPool pool(4, 16);
    assert_int_equal(pool.n_blocks(), 4);
    assert_int_equal(pool.block_size(), 16);
    assert_int_equal(pool.n_free(), 4);
    std::vector<int32_t> got;
    for (int i = 0; i < 4; ++i) got.push_back(pool.allocate());
    for (int i = 0; i < 4; ++i) {
        assert_int_equal(got[i], i);  // distinct, in order from a fresh pool
        assert_int_equal(pool.refcount(got[i]), 1);
        assert_false(pool.is_published(got[i]));
    }
    assert_int_equal(pool.allocate(), -1);
    assert_int_equal(pool.n_free(), 0);

    pool.ref(1);
    assert_int_equal(pool.refcount(1), 2);
    pool.unref(1);
    assert_int_equal(pool.refcount(1), 1);
    assert_int_equal(pool.n_free(), 0);  // still held once
    pool.unref(2);
    assert_int_equal(pool.refcount(2), 0);
    assert_int_equal(pool.n_free(), 1);
    assert_int_equal(pool.n_cached(), 0);  // unpublished: free, not cached
    assert_int_equal(pool.allocate(), 2);
    assert_int_equal(pool.refcount(2), 1);
    assert_int_equal(pool.allocate(), -1);

    // Misuse throws and leaves the pool as it was.
    pool.unref(3);
    assert_true(throws_internal([&] { pool.unref(3); }));
    assert_true(throws_internal([&] { pool.ref(3); }));
    assert_true(throws_internal([&] { pool.ref(4); }));
    assert_true(throws_internal([&] { pool.unref(-1); }));
    assert_true(throws_internal([&] { (void)pool.refcount(99); }));
    assert_true(throws_internal([&] { (void)pool.is_published(-5); }));
    assert_true(throws_internal([&] { pool.publish(3, 42); }));  // nobody holds block 3
    assert_true(throws_internal([&] { pool.publish(0, 0); }));   // 0 means "not published"
    assert_true(throws_internal([&] { pool.publish(4, 42); }));
    assert_int_equal(pool.refcount(3), 0);
    assert_false(pool.is_published(3));
    assert_int_equal(pool.n_free(), 1);
    assert_int_equal(pool.allocate(), 3);
    assert_int_equal(pool.allocate(), -1);

    bool bad_size = false;
    try {
        BlockPool p(4, 0);
    } catch (const ember::Error &e) {
        bad_size = e.status() == EMBER_ERR_INVALID_ARGUMENT;
    }
    assert_true(bad_size);
}

// 2 ---------------------------------------------------------------------------------------------------
static void test_publish_lookup_lru(void **) {
    BlockPool pool(4, 2);
    const int32_t a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
    pool.publish(a, 11);
    pool.publish(b, 22);
    pool.publish(c, 33);
    pool.publish(c, 33);  // same hash again: no-op
    assert_true(pool.is_published(a) && pool.is_published(b) && pool.is_published(c));
    assert_true(throws_internal([&] { pool.publish(c, 34); }));  // content changed without unpublish
    assert_true(pool.is_published(c));

    // In use and published: lookup shares it.
    assert_int_equal(pool.lookup(22), b);
    assert_int_equal(pool.refcount(b), 2);
    pool.unref(b);
    assert_int_equal(pool.lookup(99), -1);
    assert_int_equal(pool.lookup(0), -1);

    // Released in the order a, b, c: cached, least recently released first.
    pool.unref(a);
    pool.unref(b);
    pool.unref(c);
    assert_int_equal(pool.n_cached(), 3);
    assert_int_equal(pool.n_free(), 4);  // 1 free + 3 cached

    // A cached block comes back by lookup with refcount 1 and leaves the LRU.
    assert_int_equal(pool.lookup(11), a);
    assert_int_equal(pool.refcount(a), 1);
    assert_int_equal(pool.n_cached(), 2);
    assert_int_equal(pool.n_free(), 3);
    pool.unref(a);  // now the most recently released: LRU order b, c, a

    // allocate() prefers the free block over evicting.
    const int32_t d = pool.allocate();
    assert_int_not_equal(d, a);
    assert_int_not_equal(d, b);
    assert_int_not_equal(d, c);
    assert_int_equal(pool.n_cached(), 3);

    // Then evicts b (least recently released; a was re-referenced after it), dropping its hash.
    assert_int_equal(pool.allocate(), b);
    assert_int_equal(pool.refcount(b), 1);
    assert_false(pool.is_published(b));
    assert_int_equal(pool.lookup(22), -1);
    assert_int_equal(pool.allocate(), c);
    assert_int_equal(pool.lookup(33), -1);
    assert_int_equal(pool.lookup(11), a);  // survived: it was released last
    assert_int_equal(pool.allocate(), -1);

    // A duplicate hash keeps the first block; the second stays unpublished and is freed, not cached.
    pool.publish(b, 77);
    pool.publish(c, 77);
    assert_true(pool.is_published(b));
    assert_false(pool.is_published(c));
    assert_int_equal(pool.lookup(77), b);
    pool.unref(b);
    pool.unref(b);
    pool.unref(c);
    assert_int_equal(pool.n_cached(), 1);
    assert_int_equal(pool.n_free(), 2);
    assert_int_equal(pool.lookup(77), b);
    pool.unref(b);

    // Unpublishing a cached block frees it; unpublishing an unpublished one changes nothing.
    pool.unpublish(b);
    assert_false(pool.is_published(b));
    assert_int_equal(pool.n_cached(), 0);
    assert_int_equal(pool.n_free(), 2);
    assert_int_equal(pool.lookup(77), -1);
    pool.unpublish(b);
    assert_int_equal(pool.n_free(), 2);
    // ...and unpublishing one in use keeps it in use.
    pool.unpublish(a);
    assert_int_equal(pool.refcount(a), 1);
    assert_int_equal(pool.lookup(11), -1);
    pool.unref(a);
    assert_int_equal(pool.n_cached(), 0);
    assert_int_equal(pool.n_free(), 3);
}

// 3 ---------------------------------------------------------------------------------------------------
static void test_chain_hash(void **) {
    const int32_t t1[] = {1, 2, 3, 4};
    const int32_t t2[] = {1, 2, 4, 3};
    const uint64_t h = BlockPool::chain_hash(0, t1, 4);
    assert_true(h != 0);
    assert_true(BlockPool::chain_hash(0, t1, 4) == h);
    assert_true(BlockPool::chain_hash(1, t1, 4) != h);
    assert_true(BlockPool::chain_hash(h, t1, 4) != h);
    assert_true(BlockPool::chain_hash(0, t2, 4) != h);
    assert_true(BlockPool::chain_hash(0, t1, 3) != h);  // a prefix is different content
    const int32_t zeros[] = {0, 0, 0, 0};
    assert_true(BlockPool::chain_hash(0, zeros, 4) != BlockPool::chain_hash(0, zeros, 3));
    assert_true(BlockPool::chain_hash(0, zeros, 4) != 0);
    assert_true(BlockPool::chain_hash(0, nullptr, 0) != 0);

    // Many random inputs from a small alphabet, so that identical inputs recur: equal inputs must hash
    // equal, different ones must not collide.
    std::mt19937_64 rng(7);
    std::unordered_map<uint64_t, std::pair<uint64_t, std::vector<int32_t>>> seen;
    const uint64_t parents[] = {0, 1, 2, h, ~uint64_t{0}};
    size_t repeats = 0;
    for (int i = 0; i < 200000; ++i) {
        const uint64_t parent = (rng() & 1) ? parents[rng() % 5] : rng();
        std::vector<int32_t> t(1 + rng() % 6);
        for (auto &x : t) x = static_cast<int32_t>(rng() % 4) - 1;  // includes -1
        const uint64_t k = BlockPool::chain_hash(parent, t.data(), static_cast<uint32_t>(t.size()));
        assert_true(k != 0);
        auto [it, fresh] = seen.try_emplace(k, parent, t);
        if (!fresh) {
            if (it->second.first != parent || it->second.second != t) fail_msg("chain_hash collision at case %d", i);
            ++repeats;
        }
    }
    assert_true(repeats > 1000);  // the same-input path was really exercised
    assert_true(seen.size() > 100000);
}

// 4 ---------------------------------------------------------------------------------------------------
static void test_commit_and_adopt(void **) {
    const uint32_t B = 4;
    BlockPool pool(16, B);
    CopyLog log;
    const auto prompt = iota_tokens(10);  // 2 full blocks + 2 tokens

    KvSequence a(pool);
    assert_int_equal(a.adopt_prefix(prompt.data(), 10), 0);  // nothing cached yet
    append(a, prompt, log);
    assert_int_equal(a.size(), 10);
    assert_int_equal(a.blocks().size(), 3);
    assert_true(pool.is_published(a.blocks()[0]));
    assert_true(pool.is_published(a.blocks()[1]));
    assert_false(pool.is_published(a.blocks()[2]));  // partial
    const uint64_t h0 = hash_of_block(prompt, B, 0, 0), h1 = hash_of_block(prompt, B, 1, h0);
    assert_int_equal(pool.lookup(h0), a.blocks()[0]);
    pool.unref(a.blocks()[0]);
    assert_int_equal(pool.lookup(h1), a.blocks()[1]);
    pool.unref(a.blocks()[1]);
    assert_true(throws_internal([&] { a.adopt_prefix(prompt.data(), 10); }));

    // Same prompt: both full blocks, shared.
    KvSequence b(pool);
    assert_int_equal(b.adopt_prefix(prompt.data(), 10), 8);
    assert_int_equal(b.size(), 8);
    assert_int_equal(b.blocks().size(), 2);
    assert_int_equal(b.blocks()[0], a.blocks()[0]);
    assert_int_equal(b.blocks()[1], a.blocks()[1]);
    assert_int_equal(pool.refcount(a.blocks()[0]), 2);
    assert_true(std::equal(b.tokens().begin(), b.tokens().end(), prompt.begin()));

    // The last prompt token is never adopted: adopted = B * floor((n - 1) / B) at most.
    const struct {
        uint32_t n, adopted;
    } cases[] = {{1, 0}, {4, 0}, {5, 4}, {8, 4}, {9, 8}, {10, 8}};
    for (const auto &c : cases) {
        KvSequence s(pool);
        if (s.adopt_prefix(prompt.data(), c.n) != c.adopted) fail_msg("n=%u: expected %u adopted", c.n, c.adopted);
        assert_int_equal(s.blocks().size(), c.adopted / B);
    }

    // A prompt differing in its second block adopts only the first; one differing in its first adopts
    // nothing, even though its second block's tokens match (the chain hash covers the prefix).
    auto second = prompt;
    second[5] = 999;
    KvSequence c(pool);
    assert_int_equal(c.adopt_prefix(second.data(), 10), 4);
    assert_int_equal(c.blocks()[0], a.blocks()[0]);
    auto first = prompt;
    first[0] = 999;
    KvSequence d(pool);
    assert_int_equal(d.adopt_prefix(first.data(), 10), 0);
    assert_true(d.blocks().empty());

    // Committing across block boundaries publishes each block as it fills, chained on the adopted ones.
    const auto more = iota_tokens(6, 500);
    append(c, more, log);  // c: 4 + 6 = 10 tokens
    std::vector<int32_t> c_tokens(second.begin(), second.begin() + 4);
    c_tokens.insert(c_tokens.end(), more.begin(), more.end());
    assert_true(c.tokens() == c_tokens);
    assert_true(pool.is_published(c.blocks()[1]));
    assert_int_equal(pool.lookup(hash_of_block(c_tokens, B, 1, h0)), c.blocks()[1]);
    pool.unref(c.blocks()[1]);
    assert_true(log.calls.empty());  // nothing was shared and partial

    // Once every holder is gone the blocks are cached and still adoptable.
    const int32_t a0 = a.blocks()[0], a1 = a.blocks()[1];
    a.clear();
    b.clear();
    assert_int_equal(pool.refcount(a1), 0);
    const uint32_t cached = pool.n_cached();
    assert_true(cached >= 1);
    KvSequence e(pool);
    assert_int_equal(e.adopt_prefix(prompt.data(), 10), 8);
    assert_int_equal(e.blocks()[0], a0);
    assert_int_equal(e.blocks()[1], a1);
    assert_int_equal(pool.n_cached(), cached - 1);  // a1 left the LRU (a0 is still held by c)
}

// A released sequence gives back its last block first, so that under pressure the cache loses the tail
// of a prefix, not the root that every later block hangs from.
static void test_release_order(void **) {
    const uint32_t B = 2;
    BlockPool pool(4, B);
    CopyLog log;
    const auto prompt = iota_tokens(7);
    {
        KvSequence s(pool);
        append(s, prompt, log);  // 3 full blocks + 1 partial
    }
    assert_int_equal(pool.n_cached(), 3);
    const int32_t x = pool.allocate();  // the free one (the partial block's)
    const int32_t y = pool.allocate();  // evicts one cached block
    KvSequence t(pool);
    assert_int_equal(t.adopt_prefix(prompt.data(), 7), 4);  // blocks 0 and 1 survived
    pool.unref(x);
    pool.unref(y);
}

// 5 ---------------------------------------------------------------------------------------------------
static void test_copy_on_write(void **) {
    const uint32_t B = 4;
    BlockPool pool(16, B);
    CopyLog log;
    KvSequence a(pool);
    append(a, iota_tokens(6), log);  // block 0 full and published, block 1 partial and private
    const std::vector<int32_t> a_blocks = a.blocks();

    KvSequence f = a.fork();
    assert_true(f.blocks() == a_blocks);
    assert_true(f.tokens() == a.tokens());
    assert_int_equal(pool.refcount(a_blocks[0]), 2);
    assert_int_equal(pool.refcount(a_blocks[1]), 2);

    // Writing into the shared partial block is refused without a reserve.
    const int32_t x = 7;
    assert_true(throws_internal([&] { f.commit(&x, 1); }));
    assert_int_equal(f.size(), 6);

    assert_true(f.reserve(1, log.fn()));
    assert_int_equal(log.calls.size(), 1);
    assert_int_equal(log.calls[0].first, a_blocks[1]);
    assert_int_equal(log.calls[0].second, f.blocks()[1]);
    assert_int_not_equal(f.blocks()[1], a_blocks[1]);
    assert_int_equal(f.blocks()[0], a_blocks[0]);  // full blocks stay shared
    assert_true(a.blocks() == a_blocks);
    assert_int_equal(pool.refcount(a_blocks[1]), 1);
    assert_int_equal(pool.refcount(f.blocks()[1]), 1);
    f.commit(&x, 1);
    assert_int_equal(f.size(), 7);
    assert_int_equal(a.size(), 6);

    // a's partial block is private again: no copy.
    assert_true(a.reserve(2, log.fn()));
    assert_int_equal(log.calls.size(), 1);
    assert_true(a.blocks() == a_blocks);

    // A published block that truncation left partial is copied before writing, and survives in the cache.
    KvSequence p(pool);
    const auto prompt = iota_tokens(8, 300);
    append(p, prompt, log);
    const int32_t p1 = p.blocks()[1];
    assert_true(pool.is_published(p1));
    p.truncate(6);
    assert_int_equal(p.blocks().size(), 2);
    assert_true(pool.is_published(p1));  // other sequences may still find it
    assert_true(throws_internal([&] { p.commit(&x, 1); }));
    const size_t before = log.calls.size();
    assert_true(p.reserve(1, log.fn()));
    assert_int_equal(log.calls.size(), before + 1);
    assert_int_equal(log.calls.back().first, p1);
    assert_int_not_equal(p.blocks()[1], p1);
    assert_int_equal(pool.refcount(p1), 0);
    assert_true(pool.is_published(p1));  // cached, content intact
    p.commit(&x, 1);
    auto longer = prompt;
    longer.push_back(1);
    KvSequence q(pool);
    assert_int_equal(q.adopt_prefix(longer.data(), 9), 8);
    assert_int_equal(q.blocks()[1], p1);

    // A private, unpublished partial block is written in place.
    KvSequence r(pool);
    append(r, iota_tokens(5, 700), log);
    const size_t n_calls = log.calls.size();
    const int32_t r1 = r.blocks()[1];
    assert_true(r.reserve(2, log.fn()));
    assert_int_equal(log.calls.size(), n_calls);
    assert_int_equal(r.blocks()[1], r1);
    // A fork shares what r holds but not r's reservation (r.reserve(2) above: 7 positions, 2 blocks).
    assert_true(r.reserve(4, log.fn()));  // 9 positions: 3 blocks
    assert_int_equal(r.blocks().size(), 3);
    KvSequence rf = r.fork();
    assert_int_equal(rf.blocks().size(), 2);
    assert_int_equal(pool.refcount(r.blocks()[2]), 1);
    // reserve(0) copies nothing even when the partial block is shared.
    assert_true(rf.reserve(0, log.fn()));
    assert_int_equal(log.calls.size(), n_calls);
    assert_int_equal(rf.blocks()[1], r1);
}

// 6 ---------------------------------------------------------------------------------------------------
static void test_truncate(void **) {
    const uint32_t B = 4;
    BlockPool pool(8, B);
    CopyLog log;
    KvSequence s(pool);
    const auto t = iota_tokens(20);
    append(s, t, log);
    assert_int_equal(s.blocks().size(), 5);
    assert_int_equal(pool.n_free(), 3);

    s.truncate(9);
    assert_int_equal(s.size(), 9);
    assert_int_equal(s.blocks().size(), 3);
    assert_int_equal(pool.n_free(), 5);
    assert_true(std::equal(s.tokens().begin(), s.tokens().end(), t.begin()));
    s.truncate(9);  // no-op
    assert_int_equal(pool.n_free(), 5);
    assert_true(throws_internal([&] { s.truncate(10); }));

    // Regrow with different tokens: blocks 2.. are rewritten and republished under the new content.
    const auto u = iota_tokens(11, 900);
    append(s, u, log);
    assert_int_equal(s.size(), 20);
    assert_int_equal(s.blocks().size(), 5);
    assert_int_equal(pool.n_free(), 3);
    auto expect = std::vector<int32_t>(t.begin(), t.begin() + 9);
    expect.insert(expect.end(), u.begin(), u.end());
    assert_true(s.tokens() == expect);
    uint64_t parent = 0;
    for (uint32_t i = 0; i < 5; ++i) {
        parent = hash_of_block(expect, B, i, parent);
        assert_int_equal(pool.lookup(parent), s.blocks()[i]);
        pool.unref(s.blocks()[i]);
    }

    // A reservation is released by truncate(size()).
    assert_true(s.reserve(5, log.fn()));
    assert_int_equal(s.blocks().size(), 7);
    assert_int_equal(pool.n_free(), 1);
    s.truncate(20);
    assert_int_equal(s.blocks().size(), 5);
    assert_int_equal(pool.n_free(), 3);

    s.truncate(0);
    assert_int_equal(s.size(), 0);
    assert_true(s.blocks().empty());
    assert_int_equal(pool.n_free(), 8);
    // All five full blocks stay findable, and so does the original block 2 (t[8..12)), which the regrow
    // copied rather than overwrote; the original blocks 3 and 4 were evicted for the reservation.
    assert_int_equal(pool.n_cached(), 6);
    for (uint32_t b = 0; b < 8; ++b) assert_int_equal(pool.refcount(static_cast<int32_t>(b)), 0);
    {
        KvSequence again(pool);
        assert_int_equal(again.adopt_prefix(t.data(), 20), 12);
        KvSequence other(pool);
        assert_int_equal(other.adopt_prefix(expect.data(), 20), 16);
    }

    // Move leaves the source empty and owning nothing.
    KvSequence m(pool);
    append(m, iota_tokens(6), log);
    KvSequence n(std::move(m));
    assert_int_equal(m.size(), 0);
    assert_true(m.blocks().empty());
    assert_int_equal(n.blocks().size(), 2);
    KvSequence o(pool);
    append(o, iota_tokens(3, 50), log);
    const uint32_t free_before = pool.n_free();
    o = std::move(n);  // o's own block is released
    assert_int_equal(pool.n_free(), free_before + 1);
    assert_true(n.blocks().empty());
    assert_int_equal(o.size(), 6);
    m.clear();  // harmless on a moved-from sequence
    o.clear();
    assert_int_equal(pool.n_free(), 8);
}

// 7 ---------------------------------------------------------------------------------------------------
static void test_reserve_rollback(void **) {
    const uint32_t B = 4;
    BlockPool pool(5, B);
    CopyLog log;
    KvSequence cached(pool);
    const auto c_prompt = iota_tokens(5, 40);
    append(cached, c_prompt, log);  // block 0 full and published
    cached.clear();                 // 1 cached
    KvSequence a(pool);
    append(a, iota_tokens(6), log);  // 2 blocks
    KvSequence f = a.fork();
    assert_int_equal(pool.n_free(), 3);  // 2 free + 1 cached
    assert_int_equal(pool.n_cached(), 1);

    // 6 + 11 tokens need 5 blocks: 3 new plus a copy of the shared partial block, one more than the 3
    // available.
    const std::vector<int32_t> f_blocks = f.blocks();
    std::vector<uint32_t> refs;
    for (uint32_t b = 0; b < 5; ++b) refs.push_back(pool.refcount(static_cast<int32_t>(b)));
    assert_false(f.reserve(11, log.fn()));
    assert_true(f.blocks() == f_blocks);
    assert_int_equal(f.size(), 6);
    assert_int_equal(pool.n_free(), 3);
    assert_int_equal(pool.n_cached(), 1);  // nothing evicted by a reserve bound to fail
    for (uint32_t b = 0; b < 5; ++b) assert_int_equal(pool.refcount(static_cast<int32_t>(b)), refs[b]);
    assert_true(log.calls.empty());
    KvSequence probe(pool);
    assert_int_equal(probe.adopt_prefix(c_prompt.data(), 5), 4);
    probe.clear();

    // A copy that throws rolls back as well.
    bool threw = false;
    try {
        f.reserve(2, [](int32_t, int32_t) { throw std::runtime_error("backend"); });
    } catch (const std::runtime_error &) {
        threw = true;
    }
    assert_true(threw);
    assert_true(f.blocks() == f_blocks);
    assert_int_equal(pool.n_free(), 3);
    assert_int_equal(pool.n_cached(), 1);
    for (uint32_t b = 0; b < 5; ++b) assert_int_equal(pool.refcount(static_cast<int32_t>(b)), refs[b]);

    // Exactly enough succeeds, evicting the cached block last.
    assert_true(f.reserve(10, log.fn()));
    assert_int_equal(f.blocks().size(), 4);
    assert_int_equal(log.calls.size(), 1);
    assert_int_equal(pool.n_free(), 0);
    assert_int_equal(pool.n_cached(), 0);
    KvSequence probe2(pool);
    assert_int_equal(probe2.adopt_prefix(c_prompt.data(), 5), 0);

    // Nothing left: even a single token fails, for the owner of a private partial block too.
    assert_true(a.reserve(2, log.fn()));  // fits in a's partial block
    assert_false(a.reserve(3, log.fn()));
    assert_int_equal(a.blocks().size(), 2);
    assert_true(throws_internal([&] {
        const int32_t t[3] = {1, 2, 3};
        a.commit(t, 3);  // past the reservation
    }));
    assert_int_equal(a.size(), 6);
}

// 8 ---------------------------------------------------------------------------------------------------
// A shadow of the backend's K/V memory: what token each row of each block holds, and the chain hash of
// the prefix before the block when it was written. A sequence is sound when every one of its positions
// reads back its own token under its own prefix.
struct Shadow {
    uint32_t bs;
    std::vector<std::vector<int32_t>> rows;
    std::vector<uint64_t> ctx;
    std::vector<uint64_t> published_as;  // hash each published block was seen published under
    size_t copies = 0, evictions = 0;

    Shadow(uint32_t n_blocks, uint32_t bs_) : bs(bs_), rows(n_blocks, std::vector<int32_t>(bs_, -1)), ctx(n_blocks, 0),
                                              published_as(n_blocks, 0) {}
    CopyBlockFn copier() {
        return [this](int32_t src, int32_t dst) {
            rows[static_cast<size_t>(dst)] = rows[static_cast<size_t>(src)];
            ctx[static_cast<size_t>(dst)] = ctx[static_cast<size_t>(src)];
            ++copies;
        };
    }
};

static std::vector<uint64_t> chain_of(const std::vector<int32_t> &t, uint32_t bs) {
    std::vector<uint64_t> h;
    for (uint32_t i = 0; i < t.size() / bs; ++i) h.push_back(hash_of_block(t, bs, i, i == 0 ? 0 : h.back()));
    return h;
}

// The forward pass: writes the rows of positions size() .. size() + n - 1, then commits them.
static bool grow(KvSequence &s, const std::vector<int32_t> &add, Shadow &sh, BlockPool &pool) {
    const std::vector<int32_t> before = s.blocks();
    const uint32_t free_before = pool.n_free();
    const uint32_t at = s.size();
    const bool must_copy = at % sh.bs != 0 && !add.empty() &&
                           (pool.refcount(before[at / sh.bs]) > 1 || pool.is_published(before[at / sh.bs]));
    const size_t copies = sh.copies;
    if (!s.reserve(static_cast<uint32_t>(add.size()), sh.copier())) {
        if (s.blocks() != before || pool.n_free() != free_before || sh.copies != copies)
            fail_msg("failed reserve changed state");
        return false;
    }
    if (sh.copies != copies + (must_copy ? 1 : 0)) fail_msg("copy expected: %d, copies: %zu", must_copy, sh.copies - copies);
    std::vector<int32_t> all = s.tokens();
    all.insert(all.end(), add.begin(), add.end());
    const auto chain = chain_of(all, sh.bs);
    for (size_t p = at; p < all.size(); ++p) {
        const auto b = static_cast<size_t>(s.blocks()[p / sh.bs]);
        sh.rows[b][p % sh.bs] = all[p];
        sh.ctx[b] = p / sh.bs == 0 ? 0 : chain[p / sh.bs - 1];
    }
    s.commit(add.data(), static_cast<uint32_t>(add.size()));
    // Only the blocks written here can have been published now (possibly after an eviction in reserve).
    for (size_t i = at / sh.bs; i < s.size() / sh.bs; ++i) {
        if (pool.is_published(s.blocks()[i])) sh.published_as[static_cast<size_t>(s.blocks()[i])] = chain[i];
    }
    return true;
}

static void check_world(BlockPool &pool, std::vector<KvSequence> &seqs, Shadow &sh) {
    const uint32_t nb = pool.n_blocks(), bs = sh.bs;
    std::vector<uint32_t> held(nb, 0);
    uint64_t sum_held = 0, sum_refs = 0;
    for (auto &s : seqs) {
        if (s.blocks().size() != (s.size() + bs - 1) / bs) fail_msg("table of %zu blocks for %u tokens", s.blocks().size(), s.size());
        for (int32_t b : s.blocks()) ++held[static_cast<size_t>(b)], ++sum_held;
        const auto chain = chain_of(s.tokens(), bs);
        for (size_t p = 0; p < s.size(); ++p) {
            const auto b = static_cast<size_t>(s.blocks()[p / bs]);
            if (sh.rows[b][p % bs] != s.tokens()[p]) fail_msg("position %zu reads another token", p);
            if (sh.ctx[b] != (p / bs == 0 ? 0 : chain[p / bs - 1])) fail_msg("position %zu was written under another prefix", p);
        }
        // The index maps each published full block's chain hash to that block. (Only in-use blocks are
        // looked up: a lookup of a cached one would reorder the LRU.)
        for (size_t i = 0; i < chain.size(); ++i) {
            if (!pool.is_published(s.blocks()[i])) continue;
            const int32_t hit = pool.lookup(chain[i]);
            if (hit >= 0) pool.unref(hit);
            if (hit != s.blocks()[i]) fail_msg("published block %zu not found by its hash", i);
        }
    }
    uint32_t in_use = 0, cached = 0;
    for (uint32_t b = 0; b < nb; ++b) {
        const auto id = static_cast<int32_t>(b);
        const uint32_t r = pool.refcount(id);
        sum_refs += r;
        if (r != held[b]) fail_msg("block %u: refcount %u, held %u times", b, r, held[b]);
        in_use += r > 0;
        if (!pool.is_published(id)) {
            sh.evictions += sh.published_as[b] != 0;  // nothing else unpublishes
            sh.published_as[b] = 0;
            continue;
        }
        cached += r == 0;
        // Published content must still be what it was published as (no write into a published block).
        if (sh.published_as[b] == 0) fail_msg("block %u published behind the test's back", b);
        uint64_t h = BlockPool::chain_hash(sh.ctx[b], sh.rows[b].data(), bs);
        if (h != sh.published_as[b]) fail_msg("published block %u no longer holds its content", b);
    }
    if (sum_held != sum_refs) fail_msg("references %llu != refcounts %llu", (unsigned long long)sum_held, (unsigned long long)sum_refs);
    if (pool.n_free() + in_use != nb) fail_msg("n_free %u + in use %u != %u", pool.n_free(), in_use, nb);
    if (pool.n_cached() != cached) fail_msg("n_cached %u, cached blocks %u", pool.n_cached(), cached);
}

static void test_model_check(void **) {
    const uint32_t B = 3, NB = 14;
    BlockPool pool(NB, B);
    Shadow sh(NB, B);
    std::mt19937_64 rng(12345);
    auto rand_tokens = [&](size_t n) {
        std::vector<int32_t> t(n);
        for (auto &x : t) x = static_cast<int32_t>(rng() % 3);
        return t;
    };
    // Prompts start from a few shared stems, so that prefixes collide often.
    std::vector<std::vector<int32_t>> stems;
    for (int i = 0; i < 3; ++i) stems.push_back(rand_tokens(12));

    std::vector<KvSequence> seqs;
    size_t adopted_total = 0, failed_reserves = 0;
    for (int step = 0; step < 20000; ++step) {
        const unsigned op = static_cast<unsigned>(rng() % 10);
        if (seqs.empty() || (op < 2 && seqs.size() < 6)) {
            std::vector<int32_t> prompt(stems[rng() % stems.size()]);
            prompt.resize(rng() % 13);
            const auto tail = rand_tokens(rng() % 5);
            prompt.insert(prompt.end(), tail.begin(), tail.end());
            if (prompt.empty()) prompt.push_back(0);
            // Expected adoption: the longest run of prompt blocks whose chain hash is published.
            std::unordered_map<uint64_t, int> published;
            for (uint32_t b = 0; b < NB; ++b)
                if (pool.is_published(static_cast<int32_t>(b))) published[sh.published_as[b]] = 1;
            const auto chain = chain_of(prompt, B);
            size_t expect = 0;
            while (expect < (prompt.size() - 1) / B && published.count(chain[expect])) ++expect;
            KvSequence s(pool);
            const uint32_t got = s.adopt_prefix(prompt.data(), static_cast<uint32_t>(prompt.size()));
            if (got != expect * B) fail_msg("adopted %u tokens, expected %zu", got, expect * B);
            adopted_total += got;
            failed_reserves += !grow(s, std::vector<int32_t>(prompt.begin() + got, prompt.end()), sh, pool);
            seqs.push_back(std::move(s));
        } else {
            KvSequence &s = seqs[rng() % seqs.size()];
            if (op < 5) {
                failed_reserves += !grow(s, rand_tokens(1 + rng() % (2 * B)), sh, pool);
            } else if (op < 7) {
                s.truncate(static_cast<uint32_t>(rng() % (s.size() + 1)));
            } else if (op < 8) {
                if (seqs.size() < 6) seqs.push_back(s.fork());
            } else if (op < 9) {
                // A reservation, then given back.
                const uint32_t n = 1 + static_cast<uint32_t>(rng() % (2 * B));
                const size_t want = std::max(s.blocks().size(), size_t{(s.size() + n + B - 1) / B});
                if (s.reserve(n, sh.copier()) && s.blocks().size() != want) fail_msg("reserve left a wrong table");
                s.truncate(s.size());
            } else {
                seqs.erase(seqs.begin() + static_cast<long>(rng() % seqs.size()));
            }
        }
        check_world(pool, seqs, sh);
    }
    // The walk really went through the interesting paths.
    assert_true(adopted_total > 1000);
    assert_true(failed_reserves > 10);
    assert_true(sh.copies > 100);
    assert_true(sh.evictions > 10);
    seqs.clear();
    assert_int_equal(pool.n_free(), NB);
}

// 10 --------------------------------------------------------------------------------------------------
// Window tables: the K/V memory of window layers stays bounded however long the sequence grows.

// Every block a pass at the table's end may read is held; every block wholly before that is released.
static void check_window_retention(const WindowTable &w, uint32_t bs) {
    const uint32_t need = w.first_needed(w.size());
    for (size_t i = 0; i < (w.size() + bs - 1) / bs; ++i) {
        const bool readable = (i + 1) * bs > need;
        if (readable != (w.blocks()[i] >= 0))
            fail_msg("block %zu of a window table at %u (needed from %u): held %d", i, w.size(), need, w.blocks()[i]);
    }
}

// reserve + commit in passes of up to n_batch positions.
static void window_append(WindowTable &w, uint32_t n, uint32_t n_batch, CopyLog &log, uint32_t bs) {
    for (uint32_t off = 0; off < n; off += n_batch) {
        const uint32_t chunk = std::min(n_batch, n - off);
        if (!w.reserve(chunk, log.fn())) fail_msg("window reserve of %u at %u failed", chunk, w.size());
        w.commit(chunk);
        check_window_retention(w, bs);
    }
}

static void test_window_bounded(void **) {
    const uint32_t bs = 16, window = 40, keep = 4, n_batch = 24;
    const uint32_t per_seq = WindowTable::blocks_per_sequence(window, keep, n_batch, bs);
    assert_int_equal(per_seq, (40 - 1 + 4 + 24 + 15) / 16 + 2);
    BlockPool pool(per_seq, bs);
    WindowTable w(pool, window, keep);
    CopyLog log;
    // 4000 positions in every pass length from 1 to n_batch: a pool of per_seq blocks never runs short,
    // and what the table holds never exceeds it.
    uint32_t peak = 0;
    for (uint32_t chunk = 1; w.size() < 4000; chunk = chunk % n_batch + 1) {
        window_append(w, chunk, n_batch, log, bs);
        peak = std::max(peak, w.n_held());
    }
    assert_true(peak <= per_seq - 1);   // the last block is the copy-on-write spare, unused without forks
    assert_true(w.n_held() <= (window - 1 + keep + bs - 1) / bs + 1);
    assert_int_equal(w.first_held(), w.first_needed(w.size()) / bs * bs);
    assert_int_equal(pool.n_free(), per_seq - w.n_held());
    assert_true(log.calls.empty());
    // A window of 1 position and nothing kept: only the block being written survives a commit.
    BlockPool small(3, bs);
    WindowTable one(small, 1, 0);
    window_append(one, 100, 7, log, bs);
    assert_int_equal(one.n_held(), 1);
    window_append(one, 12, 7, log, bs);   // 112: a multiple of the block size, nothing left to read
    assert_int_equal(one.n_held(), 0);
    assert_int_equal(one.first_held(), 112);
    w.clear();
    assert_int_equal(pool.n_free(), per_seq);
    assert_true(throws_internal([&] { WindowTable bad(pool, 0, 0); }));
}

static void test_window_truncate(void **) {
    const uint32_t bs = 16, window = 40, keep = 4;
    BlockPool pool(64, bs);
    WindowTable w(pool, window, keep);
    CopyLog log;
    window_append(w, 1000, 32, log, bs);
    // first_needed(1000) = 1000 - 39 - 4 = 957, held from block 59 (position 944) on.
    assert_int_equal(w.first_held(), 944);
    // A pass at n reads n - 39 .. n - 1: fine down to n = 983 (reads from 944), not below.
    assert_true(w.can_truncate(1000));
    assert_true(w.can_truncate(1000 - keep));
    assert_true(w.can_truncate(983));
    assert_false(w.can_truncate(982));
    assert_false(w.can_truncate(1001));
    assert_true(w.can_truncate(0));
    assert_true(throws_internal([&] { w.truncate(982); }));
    assert_int_equal(w.size(), 1000);   // the refused truncation changed nothing
    const uint32_t held = w.n_held();
    w.truncate(983);
    assert_int_equal(w.size(), 983);
    assert_int_equal(w.n_held(), held - 1);   // block 62 (992..) went; 61 still holds 976..982
    // The table grows again from there; positions re-written after a truncation are released as before.
    window_append(w, 500, 32, log, bs);
    assert_int_equal(w.size(), 1483);
    w.truncate(0);
    assert_int_equal(w.n_held(), 0);
    assert_int_equal(pool.n_free(), 64);
    window_append(w, 10, 32, log, bs);   // and from 0
    assert_int_equal(w.first_held(), 0);

}

static void test_window_fork_restore(void **) {
    const uint32_t bs = 16, window = 20, keep = 0;
    BlockPool pool(32, bs);
    CopyLog log;
    WindowTable a(pool, window, keep);
    window_append(a, 105, 8, log, bs);   // 105: its last block (96..) is partial
    const uint32_t held = a.n_held();
    {
        WindowTable b = a.fork();
        assert_int_equal(b.size(), 105);
        assert_int_equal(b.n_held(), held);
        assert_int_equal(pool.n_free(), 32 - held);   // shared, not copied
        for (int32_t blk : a.blocks())
            if (blk >= 0) assert_int_equal(pool.refcount(blk), 2);
        // The fork's first write copies the shared partial block; the parent keeps its own.
        window_append(b, 1, 8, log, bs);
        assert_int_equal(log.calls.size(), 1);
        assert_int_equal(log.calls[0].first, a.blocks()[6]);
        assert_int_equal(log.calls[0].second, b.blocks()[6]);
        assert_true(a.blocks()[6] != b.blocks()[6]);
        // The fork moves on and releases its share of what it no longer reads; the parent keeps its rows.
        window_append(b, 100, 8, log, bs);
        assert_int_equal(a.n_held(), held);
        check_window_retention(a, bs);
    }
    assert_int_equal(pool.n_free(), 32 - held);
    // Restoring 1000 positions holds only the blocks a pass at 1000 reads (981..999: blocks 61 and 62).
    WindowTable r(pool, window, keep);
    assert_true(r.restore(1000));
    assert_int_equal(r.size(), 1000);
    assert_int_equal(r.n_held(), 2);
    assert_int_equal(r.first_held(), 976);
    check_window_retention(r, bs);
    assert_true(throws_internal([&] { r.restore(5); }));
    window_append(r, 50, 8, log, bs);
    BlockPool two(2, bs);
    WindowTable starved(two, 100, 0);
    assert_false(starved.restore(1000));   // needs 7 blocks: refused, nothing taken
    assert_int_equal(two.n_free(), 2);
    assert_int_equal(starved.size(), 0);
}

// Published window blocks (engines): released ones stay cached under their global twins' hashes, and an
// empty table adopts the longest prefix whose blocks a pass from its end reads are all found — not past
// a block that was evicted, and without the kept history.
static void test_window_publish_adopt(void **) {
    const uint32_t bs = 16, window = 20, keep = 15;
    BlockPool main(64, bs), pool(32, bs);
    KvSequence seq(main);
    WindowTable a(pool, window, keep);
    CopyLog log;
    std::vector<int32_t> toks(200);
    for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>(i * 7 % 100);
    for (uint32_t off = 0; off < 200; off += 8) {
        assert_true(seq.reserve(8, log.fn()));
        assert_true(a.reserve(8, log.fn()));
        seq.commit(toks.data() + off, 8);
        a.commit(8, &seq.hashes());
    }
    // 12 full blocks published; those wholly before 200 - 19 - 15 = 166 (blocks 0..9) released, cached.
    assert_int_equal(pool.n_cached(), 10);
    for (size_t i = 0; i < 12; ++i) assert_true(pool.contains(seq.hashes()[i]));
    {
        // At 192 a pass reads 173..191: blocks 10 and 11 (held by `a`, shared now).
        WindowTable b(pool, window, keep);
        assert_int_equal(b.adopt_prefix(seq.hashes(), 192), 192);
        assert_int_equal(b.n_held(), 2);
        assert_int_equal(b.first_held(), 160);
        assert_int_equal(pool.refcount(a.blocks()[11]), 2);
        assert_true(b.can_truncate(192));
        assert_false(b.can_truncate(150));
        // Its next write goes into a block of its own.
        assert_true(b.reserve(4, log.fn()));
        b.commit(4);
        assert_true(b.blocks()[12] != a.blocks()[12]);
        assert_true(throws_internal([&] { b.adopt_prefix(seq.hashes(), 16); }));   // not empty
    }
    // Block 10 no longer published (as if evicted): a pass from 192 or 176 reads it, one from 160 reads
    // 141..159 (blocks 8 and 9, cached), so 160 is the longest prefix adopted.
    assert_true(a.blocks()[10] >= 0);
    pool.unpublish(a.blocks()[10]);
    WindowTable c(pool, window, keep);
    assert_int_equal(c.adopt_prefix(seq.hashes(), 192), 160);
    assert_int_equal(c.n_held(), 2);
    assert_int_equal(c.first_held(), 128);
    c.clear();
    assert_true(throws_internal([&] { c.adopt_prefix(seq.hashes(), 100); }));   // not whole blocks
    assert_int_equal(c.adopt_prefix(seq.hashes(), 0), 0);
    // Nothing found at all: 0, nothing taken.
    std::vector<uint64_t> other(12, 12345);
    const uint32_t free_before = pool.n_free();
    assert_int_equal(c.adopt_prefix(other, 192), 0);
    assert_int_equal(pool.n_free(), free_before);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocation),   cmocka_unit_test(test_publish_lookup_lru),
        cmocka_unit_test(test_chain_hash),   cmocka_unit_test(test_commit_and_adopt),
        cmocka_unit_test(test_release_order), cmocka_unit_test(test_copy_on_write),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_reserve_rollback), cmocka_unit_test(test_model_check),
        cmocka_unit_test(test_window_bounded), cmocka_unit_test(test_window_truncate),
        cmocka_unit_test(test_window_fork_restore), cmocka_unit_test(test_window_publish_adopt),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
