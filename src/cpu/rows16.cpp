// rows16.cpp — the interleaved K-quant layout (rows16.hpp): packing, unpacking, and the products of the
// levels that read it through rows copied back to the file's layout.
#include "cpu/rows16.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace ember::cpu {

namespace {

// A block field: where it lies in the block, its bytes, and the unit whose copies of 16 rows lie side
// by side in the record.
struct Field {
    size_t offset, bytes, unit;
};
// The record's fields, in record order (rows16.hpp).
constexpr Field kQ4KFields[] = {{offsetof(BlockQ4_K, d), 2, 2}, {offsetof(BlockQ4_K, dmin), 2, 2},
                                {offsetof(BlockQ4_K, scales), 12, 1}, {offsetof(BlockQ4_K, qs), 128, 4}};
constexpr Field kQ6KFields[] = {{offsetof(BlockQ6_K, d), 2, 2}, {offsetof(BlockQ6_K, scales), 16, 1},
                                {offsetof(BlockQ6_K, ql), 128, 4}, {offsetof(BlockQ6_K, qh), 64, 4}};
constexpr Field kQ40Fields[] = {{offsetof(BlockQ4_0, d), 2, 2}, {offsetof(BlockQ4_0, qs), 16, 4}};
constexpr Field kQ80Fields[] = {{offsetof(BlockQ8_0, d), 2, 2}, {offsetof(BlockQ8_0, qs), 32, 4}};
// The record offsets rows16.hpp names for the kernels, from these tables: field k starts after 16 copies
// of fields 0 .. k - 1.
constexpr size_t record_at(const Field *f, int k) { return k == 0 ? 0 : record_at(f, k - 1) + kRows16 * f[k - 1].bytes; }
static_assert(record_at(kQ4KFields, 1) == kQ4KRecDmin && record_at(kQ4KFields, 2) == kQ4KRecScales &&
              record_at(kQ4KFields, 3) == kQ4KRecQs && record_at(kQ4KFields, 4) == kQ4KRecord && kQ4KRecD == 0);
static_assert(record_at(kQ6KFields, 1) == kQ6KRecScales && record_at(kQ6KFields, 2) == kQ6KRecQl &&
              record_at(kQ6KFields, 3) == kQ6KRecQh && record_at(kQ6KFields, 4) == kQ6KRecord && kQ6KRecD == 0);
static_assert(record_at(kQ40Fields, 1) == kB32RecQs && record_at(kQ40Fields, 2) == kQ40Record && kB32RecD == 0);
static_assert(record_at(kQ80Fields, 1) == kB32RecQs && record_at(kQ80Fields, 2) == kQ80Record);

struct Format {
    const Field *fields;
    int n_fields;
    size_t block;
};
Format format(DType type) {
    switch (type) {
    case DType::Q6_K: return {kQ6KFields, 4, sizeof(BlockQ6_K)};
    case DType::Q4_0: return {kQ40Fields, 2, sizeof(BlockQ4_0)};
    case DType::Q8_0: return {kQ80Fields, 2, sizeof(BlockQ8_0)};
    default: return {kQ4KFields, 4, sizeof(BlockQ4_K)};
    }
}

// n units of `unit` bytes: block's u-th at b + unit u, the record's at r + 16 unit u (or back).
template <size_t unit, bool kUnpack>
inline void units(uint8_t *b, uint8_t *r, size_t n) {
    for (size_t u = 0; u < n; ++u) {
        if constexpr (kUnpack) std::memcpy(b + unit * u, r + kRows16 * unit * u, unit);
        else std::memcpy(r + kRows16 * unit * u, b + unit * u, unit);
    }
}

// Super-block (Q4_0, Q8_0: block) s of 16 rows (row_bytes apart at rows) to the record at rec, or back (unpack).
template <bool kUnpack>
void record(const Format &f, uint8_t *rows, size_t row_bytes, int64_t s, uint8_t *rec) {
    size_t at = 0;
    for (int k = 0; k < f.n_fields; ++k) {
        const Field &fd = f.fields[k];
        for (int i = 0; i < kRows16; ++i) {
            uint8_t *b = rows + i * row_bytes + static_cast<size_t>(s) * f.block + fd.offset;
            switch (fd.unit) {  // constant-size copies (a call per unit made loading a TinyLlama 0.7 s slower)
            case 1: units<1, kUnpack>(b, rec + at + i, fd.bytes); break;
            case 2: units<2, kUnpack>(b, rec + at + 2 * i, fd.bytes / 2); break;
            default: units<4, kUnpack>(b, rec + at + 4 * i, fd.bytes / 4); break;
            }
        }
        at += kRows16 * fd.bytes;
    }
}

std::atomic<bool> g_fail_copies{false};   // rows16_fail_copies_for_testing

// Rows copied back for one product on this thread: grows to the largest request, never shrinks (a
// prefill chunk of a TinyLlama-sized FFN is ~0.5 MiB), 64-byte aligned for the panels' loads. nullptr
// when the memory is not there (the caller reports it: MatmulJob::failed).
uint8_t *thread_rows(size_t bytes) {
    struct Free {
        void operator()(uint8_t *p) const { std::free(p); }
    };
    thread_local std::unique_ptr<uint8_t, Free> buf;
    thread_local size_t cap = 0;
    if (g_fail_copies.load(std::memory_order_relaxed)) return nullptr;
    if (cap < bytes) {
        const size_t n = (bytes + 63) & ~size_t{63};
        buf.reset(static_cast<uint8_t *>(std::aligned_alloc(64, n)));
        cap = buf ? n : 0;
    }
    return buf.get();
}

} // namespace

int rows16_kind(DType type) {
    switch (type) {
    case DType::Q4_K: return kR16Q4_K;
    case DType::Q6_K: return kR16Q6_K;
    case DType::Q4_0: return kR16Q4_0;
    case DType::Q8_0: return kR16Q8_0;
    default: return -1;
    }
}

bool rows16_type(DType type) { return rows16_kind(type) >= 0; }

void rows16_pack(DType type, uint8_t *data, int64_t n_out, size_t row_bytes) {
    const Format f = format(type);
    const int64_t nsb = static_cast<int64_t>(row_bytes / f.block);
    std::vector<uint8_t> rows(kRows16 * row_bytes);
    for (int64_t g = 0; g + kRows16 <= n_out; g += kRows16) {
        uint8_t *grp = data + g * row_bytes;
        std::memcpy(rows.data(), grp, rows.size());
        for (int64_t s = 0; s < nsb; ++s) record<false>(f, rows.data(), row_bytes, s, grp + s * kRows16 * f.block);
    }
}

void rows16_unpack(DType type, const uint8_t *w, size_t row_bytes, int64_t g0, int64_t n_groups, uint8_t *dst) {
    const Format f = format(type);
    const int64_t nsb = static_cast<int64_t>(row_bytes / f.block);
    for (int64_t g = 0; g < n_groups; ++g) {
        // record<true> only reads the record (const_cast: one template for both directions).
        auto *grp = const_cast<uint8_t *>(w + (g0 + g * kRows16) * row_bytes);
        uint8_t *out = dst + g * kRows16 * row_bytes;
        for (int64_t s = 0; s < nsb; ++s) record<true>(f, out, row_bytes, s, grp + s * kRows16 * f.block);
    }
}

bool rows16_native(DType type) { return rows16_type(type) && detail::kernels().rows16_native; }

void rows16_fail_copies_for_testing(bool on) { g_fail_copies.store(on); }

namespace detail {

namespace {

// Rows [r0, r1) through `plain`: those in groups from a copy in the file's layout (whole groups), the
// last n_out % 16 in place.
void via_plain(DType type, MatmulRowsFn plain, const MatmulJob &job, int64_t r0, int64_t r1) {
    const int64_t n16 = job.n_rows16;
    MatmulJob j = job;
    j.n_rows16 = 0;
    if (r0 < n16) {
        const int64_t e = r1 < n16 ? r1 : n16;
        const int64_t g0 = r0 / kRows16 * kRows16, n_groups = (e - g0 + kRows16 - 1) / kRows16;
        uint8_t *rows = thread_rows(static_cast<size_t>(n_groups * kRows16) * job.row_bytes);
        if (!rows) {
            // A kernel cannot throw on a pool thread: the product's caller sees the flag and throws
            // EMBER_ERR_OUT_OF_MEMORY once every thread is done (matmul.cpp's run_segments).
            job.failed->store(true, std::memory_order_relaxed);
            return;
        }
        rows16_unpack(type, job.w, job.row_bytes, g0, n_groups, rows);
        // The copy's row 0 is row g0: the output and bias move with it.
        MatmulJob c = j;
        c.w = rows;
        c.y = job.y + g0;
        c.bias = job.bias ? job.bias + g0 : nullptr;
        plain(c, r0 - g0, e - g0);
        r0 = e;
    }
    if (r0 < r1) plain(j, r0, r1);
}

// Up to this many tokens the tiles (4 tokens per pass over a group's rows, which then come from L1/L2)
// beat the prefill panels on rows copied back. Measured, TinyLlama-shaped Q4_K_M prefill at 2 threads
// (AVX-512 Xeon VM with AMX, under load), tokens/s, tiles against panels: P 8 133 / 63, P 16 172 / 105,
// P 32 206 / 146, P 64 221 / 198 (the file's layout: 63 / 103 / 159 / 212).
constexpr int64_t kNativeMaxTokens = 64;
// From this many tokens the panels packed from the records beat the tiles, at both levels. Measured as
// above, 2026-11-26, tiles against panels: AMX (3 runs each) P 4 93 / 61, P 8 139 / 106, P 12 168 / 138,
// P 16 184 / 199, P 32 223 / 274, P 64 239 / 302; AVX-512 (2 runs each) P 6 127 / 117, P 8 149 / 140,
// P 12 175 / 167, P 16 191 / 193, P 32 227 / 239, P 64 237 / 272.
constexpr int64_t kPanelMinTokens = 16;

} // namespace

void rows16_rows(DType type, MatmulRowsFn plain, MatmulRowsFn native, MatmulRowsFn panel, const MatmulJob &job,
                 int64_t r0, int64_t r1) {
    const MatmulRowsFn tile = panel && job.n_tokens >= kPanelMinTokens ? panel : job.n_tokens <= kNativeMaxTokens ? native : nullptr;
    if (!tile) return via_plain(type, plain, job, r0, r1);
    // The whole groups inside [r0, r1) with the tile, the rest (a range that starts or ends inside a
    // group, the last rows) through plain.
    const int64_t n16 = job.n_rows16;
    const int64_t a = (r0 + kRows16 - 1) / kRows16 * kRows16;
    const int64_t e = r1 < n16 ? r1 : n16;
    const int64_t b = e / kRows16 * kRows16;
    if (a >= b) return via_plain(type, plain, job, r0, r1);
    if (r0 < a) via_plain(type, plain, job, r0, a);
    tile(job, a, b);
    if (b < r1) via_plain(type, plain, job, b, r1);
}

} // namespace detail

} // namespace ember::cpu
