// attention.cpp — causal attention over the paged KV cache (f16, Q8_0 or Q4_0 rows): threading over (token,
// head) pairs, or (block of neighbouring tokens of one sequence, group of the query heads that share a
// KV head) where the level has a grouped kernel, and the scalar per-pair kernels (the AVX2 ones are in
// attention_avx2.cpp).
//
// Flash style: for one query, keys are visited in tiles of kAttnTile positions; a running maximum m,
// running sum l and an unnormalised output accumulator are rescaled by e^(m_old - m_new) whenever a
// tile raises the maximum. Memory is O(head_dim) per pair, whatever the context length.
//
// A tile is kAttnTile consecutive positions, not one cache block: its rows are found in the block table
// once per tile (attn_tile_runs, vec_dot.hpp) as a few runs of consecutive rows, along which the loops
// step a pointer as they did over a contiguous cache. Tiles the size of a block would, at block size
// 16, double the per-tile work (maximum, rescaling, the exp of the correction) for the same keys. And
// as tile boundaries depend on positions alone, so does every rounding: the output is bit-identical
// for any block size and any placement of the blocks in the pool (the AVX2 kernel sees to it that
// grouping keys by run changes no score either).
#include "backend/attn_options.hpp"
#include "core/error.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "cpu/vec_dot.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace ember::cpu {

namespace {
// As in matmul: below this many multiply-adds the pool costs more than it saves.
constexpr int64_t kMinParallelMacs = 16 * 1024;
} // namespace

void attention(ThreadPool &pool, const float *q, const int32_t *q_pos, const int32_t *const *q_table,
               int64_t n_tokens, const PagedKv &kv, float *out, const AttnParams &p) {
    if (p.head_dim <= 0 || p.head_dim > detail::kMaxHeadDim || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cpu attention: head_dim %d, n_head %d, n_head_kv %d unsupported", p.head_dim,
             p.n_head, p.n_head_kv);
    if (n_tokens <= 0) return;
    if (kv.block_size == 0 || !q_table)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cpu attention: block size %u, block tables %p", kv.block_size,
             static_cast<const void *>(q_table));
    // Quantized rows (Q8_0, Q4_0) are read by element offset within the row (head_off), f16 ones from
    // the head's first byte.
    const bool quant = kv.type == DType::Q8_0 || kv.type == DType::Q4_0;
    if (!quant && kv.type != DType::F16)
        fail(EMBER_ERR_UNSUPPORTED, "cpu attention: KV cache type %s unsupported", dtype_name(kv.type));
    if (quant && p.head_dim % 8 != 0)
        fail(EMBER_ERR_UNSUPPORTED, "cpu attention: a %s KV cache needs head_dim a multiple of 8 (got %d)",
             dtype_name(kv.type), p.head_dim);
    const detail::KernelTable &k = detail::kernels();
    const auto attend =
        kv.type == DType::Q8_0 ? k.attend_head_q8_0 : kv.type == DType::Q4_0 ? k.attend_head_q4_0 : k.attend_head;
    const auto attend_n =
        kv.type == DType::Q8_0 ? k.attend_heads_q8_0 : kv.type == DType::Q4_0 ? k.attend_heads_q4_0 : k.attend_heads;
    const int group = p.n_head / p.n_head_kv;
    const int64_t q_row = static_cast<int64_t>(p.n_head) * p.head_dim;
    const bool grouped = attend_n && p.head_dim % 8 == 0;
    // Query heads per item: those of a token that read the same KV head go together where the level
    // can (attend_heads widens their keys and values once for all; the same bits), as many as divide
    // the group while every thread still gets several items to take.
    int per_item = 1;
    if (grouped)
        for (int g = std::min(group, detail::kMaxAttnGroup); g > 1; --g)
            if (group % g == 0 && n_tokens * (p.n_head / g) >= 4 * static_cast<int64_t>(pool.size())) {
                per_item = g;
                break;
            }
    const int64_t items_per_token = p.n_head / per_item;

    // The keys each query sees: up to its own position (causal), or up to its sequence's last in this pass
    // (bidirectional; a sequence's tokens are consecutive and share one block table).
    std::vector<int32_t> last_pos;
    if (p.bidirectional) {
        last_pos.assign(q_pos, q_pos + n_tokens);
        for (int64_t t = n_tokens - 1; t > 0; --t)
            if (q_table[t - 1] == q_table[t]) last_pos[static_cast<size_t>(t - 1)] = std::max(last_pos[static_cast<size_t>(t - 1)], last_pos[static_cast<size_t>(t)]);
        for (int64_t t = 1; t < n_tokens; ++t)
            if (q_table[t - 1] == q_table[t]) last_pos[static_cast<size_t>(t)] = last_pos[static_cast<size_t>(t - 1)];
    }
    auto keys_of = [&](int64_t t) -> int64_t {
        return static_cast<int64_t>(p.bidirectional ? last_pos[static_cast<size_t>(t)] : q_pos[t]) + 1;
    };
    auto first_key = [&](int64_t t) {
        const int64_t n_keys = keys_of(t);
        if (p.local_chunk > 0) return static_cast<int64_t>(q_pos[t]) / p.local_chunk * p.local_chunk;
        return p.window > 0 && n_keys > p.window ? n_keys - p.window : int64_t{0};
    };
    // Blocks of tokens, consecutive in that order, of one sequence (the same block table) whose keys
    // start at the same position: their tiles are the same positions, so attend_heads widens each
    // tile once for the whole block (a prefill's neighbouring queries see nearly the same keys). As
    // many tokens as the kernel's state holds, while the threads still get several items each.
    int block_max = 1;
    if (grouped) {
        block_max = std::min(detail::kMaxAttnBlockHeads / per_item, detail::kAttnBlockFloats / (per_item * p.head_dim));
        const int64_t fair = n_tokens * items_per_token / (8 * static_cast<int64_t>(pool.size()));
        block_max = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(block_max, fair)));
    }
    // The order items go out in: each sequence's run of tokens (consecutive in the batch, one block
    // table) last token first, cut into blocks; then the blocks costliest first (a query's cost is its
    // number of keys), so the dynamic hand-out ends on small items and the threads finish together. The
    // blocks are cut before they are sorted: sorting tokens by position alone interleaved the sequences
    // of a batch that holds several (an encoder's packed texts, an engine's prompts), which left every
    // block one token long.
    // Rank r of the batch taken last token first is token n_tokens - 1 - r: each sequence's run last token
    // first, the runs last first.
    auto reversed = [n_tokens](int64_t r) { return n_tokens - 1 - r; };
    struct Block {
        int64_t begin, end, cost;  // ranks [begin, end) of the reversed batch
    };
    std::vector<Block> blocks;
    for (int64_t r = 0; r < n_tokens; ++r) {
        const int64_t t = reversed(r);
        const int64_t first = blocks.empty() ? -1 : reversed(blocks.back().begin);
        if (first < 0 || r - blocks.back().begin >= block_max || q_table[t] != q_table[first] || first_key(t) != first_key(first))
            blocks.push_back({r, r, keys_of(t) - first_key(t)});
        blocks.back().end = r + 1;
    }
    std::stable_sort(blocks.begin(), blocks.end(), [](const Block &a, const Block &b) { return a.cost > b.cost; });
    std::vector<int64_t> order;  // tokens by block, blocks in hand-out order
    std::vector<int64_t> block_start;  // ranks in `order` where a block starts, then n_tokens
    order.reserve(static_cast<size_t>(n_tokens));
    for (const Block &bl : blocks) {
        block_start.push_back(static_cast<int64_t>(order.size()));
        for (int64_t r = bl.begin; r < bl.end; ++r) order.push_back(reversed(r));
    }
    const int64_t n_blocks = static_cast<int64_t>(block_start.size());
    block_start.push_back(n_tokens);
    const int64_t n_items = n_blocks * items_per_token;

    // Head h of token t.
    auto head = [&](int64_t t, int h, detail::AttnHead &a) {
        a.q = q + t * q_row + static_cast<int64_t>(h) * p.head_dim;
        const int head_off = (h / group) * p.head_dim;
        const size_t head_bytes = quant ? 0 : static_cast<size_t>(head_off) * sizeof(uint16_t);
        a.k = kv.k + head_bytes;
        a.v = kv.v + head_bytes;
        a.kv_stride = kv.row_bytes;
        a.head_off = quant ? head_off : 0;
        a.table = q_table[t];
        a.block_size = kv.block_size;
        a.n_keys = keys_of(t);
        a.first_key = first_key(t);
        a.softcap = p.softcap;
        a.has_sink = p.sinks != nullptr;
        a.sink = p.sinks ? p.sinks[h] : 0.0f;
        a.head_dim = p.head_dim;
        a.scale = p.scale * attn_temperature(p.temp_scale, p.temp_offset, p.temp_floor, q_pos[t]);
        a.out = out + t * q_row + static_cast<int64_t>(h) * p.head_dim;
    };
    auto item = [&](int64_t c) {
        const int64_t b = c / items_per_token;
        const int h0 = static_cast<int>(c % items_per_token) * per_item;
        const int64_t r0 = block_start[static_cast<size_t>(b)];
        const int n_tok = static_cast<int>(block_start[static_cast<size_t>(b) + 1] - r0);
        detail::AttnHead a[detail::kMaxAttnBlockHeads];
        for (int u = 0; u < n_tok; ++u)
            for (int g = 0; g < per_item; ++g) head(order[static_cast<size_t>(r0 + u)], h0 + g, a[u * per_item + g]);
        if (grouped && (per_item > 1 || n_tok > 1)) attend_n(a, per_item, n_tok);
        else attend(a[0]);  // one head alone: widening on the fly costs less than widening first
    };

    int64_t macs = 0;
    for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t keys = std::max<int64_t>(keys_of(t), 0);
        macs += (keys - first_key(t)) * q_row * 2;
    }
    if (pool.size() == 1 || n_items < 2 || macs < kMinParallelMacs) {
        for (int64_t c = 0; c < n_items; ++c) item(c);
        return;
    }
    // Items are handed out one by one from the pool's counter, costliest first (see above).
    pool.run_chunks(n_items, item);
}

namespace detail {

namespace {

// Element i of this head in a cache row, as f32.
struct F16Row {
    int head_off;
    float at(const uint8_t *row, int i) const {
        uint16_t h;
        std::memcpy(&h, row + 2 * static_cast<size_t>(i), sizeof h);
        return fp16_to_fp32(h);
    }
};
struct Q8Row {
    int head_off;
    float at(const uint8_t *row, int i) const {
        const int e = head_off + i;
        const uint8_t *b = row + static_cast<size_t>(e / QK8_0) * sizeof(BlockQ8_0);
        uint16_t d;
        std::memcpy(&d, b, sizeof d);
        return fp16_to_fp32(d) * static_cast<float>(static_cast<int8_t>(b[2 + e % QK8_0]));
    }
};

struct Q4Row {
    int head_off;
    float at(const uint8_t *row, int i) const {
        const int e = head_off + i;
        const uint8_t *b = row + static_cast<size_t>(e / QK4_0) * sizeof(BlockQ4_0);
        const int o = e % QK4_0;
        const int c = (b[2 + o % (QK4_0 / 2)] >> (o >= QK4_0 / 2 ? 4 : 0)) & 15;
        uint16_t d;
        std::memcpy(&d, b, sizeof d);
        return fp16_to_fp32(d) * static_cast<float>(c - 8);
    }
};

template <class Row>
void attend_head(const AttnHead &a) {
    const Row row{a.head_off};
    const int hd = a.head_dim;
    float acc[detail::kMaxHeadDim];
    for (int i = 0; i < hd; ++i) acc[i] = 0;
    float m = -INFINITY, l = 0;
    float s[kAttnTile];
    AttnRuns runs;
    for (int64_t j0 = a.first_key; j0 < a.n_keys; j0 += kAttnTile) {
        const int nk = static_cast<int>(a.n_keys - j0 < kAttnTile ? a.n_keys - j0 : kAttnTile);
        attn_tile_runs(a, j0, nk, runs);
        float tmax = -INFINITY;
        for (int r = 0; r < runs.n; ++r) {
            const uint8_t *kr = a.k + runs.off[r];
            for (int j = runs.start[r]; j < runs.start[r + 1]; ++j, kr += a.kv_stride) {
                float dot = 0;
                for (int i = 0; i < hd; ++i) dot += a.q[i] * row.at(kr, i);
                s[j] = dot * a.scale;
            }
        }
        if (a.softcap > 0) attn_softcap(s, nk, a.softcap);
        for (int j = 0; j < nk; ++j) tmax = std::fmax(tmax, s[j]);
        const float m_new = std::fmax(m, tmax);
        const float corr = std::exp(m - m_new);  // 0 on the first tile (m = -inf)
        l *= corr;
        for (int i = 0; i < hd; ++i) acc[i] *= corr;
        for (int r = 0; r < runs.n; ++r) {
            const uint8_t *vr = a.v + runs.off[r];
            for (int j = runs.start[r]; j < runs.start[r + 1]; ++j, vr += a.kv_stride) {
                const float pj = std::exp(s[j] - m_new);
                l += pj;
                for (int i = 0; i < hd; ++i) acc[i] += pj * row.at(vr, i);
            }
        }
        m = m_new;
    }
    float corr;
    const float inv = attn_finish(a, m, l, &corr);
    for (int i = 0; i < hd; ++i) a.out[i] = acc[i] * inv;
}

} // namespace

void attend_head_scalar(const AttnHead &a) { attend_head<F16Row>(a); }
void attend_head_q8_0_scalar(const AttnHead &a) { attend_head<Q8Row>(a); }
void attend_head_q4_0_scalar(const AttnHead &a) { attend_head<Q4Row>(a); }

} // namespace detail

} // namespace ember::cpu
