// q4k_rows16.cpp — the interleaved Q4_K layout (q4k_rows16.hpp): packing, unpacking, and the products
// of the levels that read it through rows copied back to the file's layout.
#include "cpu/q4k_rows16.hpp"

#include "core/dtype.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace ember::cpu {

namespace {

constexpr size_t kBlock = sizeof(BlockQ4_K);
static_assert(kQ4KRows16Record == kQ4KRows16 * kBlock);
// Offsets of a block's fields, and of their places in a record.
constexpr size_t kD = offsetof(BlockQ4_K, d), kDmin = offsetof(BlockQ4_K, dmin);
constexpr size_t kScales = offsetof(BlockQ4_K, scales), kQs = offsetof(BlockQ4_K, qs);
constexpr size_t kRecD = 0, kRecDmin = 32, kRecScales = 64, kRecQs = 256;

// One record's bytes from (to) the 16 blocks of super-block s of rows at `rows`, row_bytes apart.
void pack_record(const uint8_t *rows, size_t row_bytes, int64_t s, uint8_t *rec) {
    for (int i = 0; i < kQ4KRows16; ++i) {
        const uint8_t *b = rows + i * row_bytes + static_cast<size_t>(s) * kBlock;
        std::memcpy(rec + kRecD + 2 * i, b + kD, 2);
        std::memcpy(rec + kRecDmin + 2 * i, b + kDmin, 2);
        for (int k = 0; k < 12; ++k) rec[kRecScales + 16 * k + i] = b[kScales + k];
        for (int c = 0; c < 32; ++c) std::memcpy(rec + kRecQs + 64 * c + 4 * i, b + kQs + 4 * c, 4);
    }
}
void unpack_record(const uint8_t *rec, uint8_t *rows, size_t row_bytes, int64_t s) {
    for (int i = 0; i < kQ4KRows16; ++i) {
        uint8_t *b = rows + i * row_bytes + static_cast<size_t>(s) * kBlock;
        std::memcpy(b + kD, rec + kRecD + 2 * i, 2);
        std::memcpy(b + kDmin, rec + kRecDmin + 2 * i, 2);
        for (int k = 0; k < 12; ++k) b[kScales + k] = rec[kRecScales + 16 * k + i];
        for (int c = 0; c < 32; ++c) std::memcpy(b + kQs + 4 * c, rec + kRecQs + 64 * c + 4 * i, 4);
    }
}

// Rows copied back for one product on this thread: grows to the largest request, never shrinks (a
// prefill chunk of a TinyLlama-sized FFN is ~0.5 MiB), 64-byte aligned for the panels' loads.
uint8_t *thread_rows(size_t bytes) {
    struct Free {
        void operator()(uint8_t *p) const { std::free(p); }
    };
    thread_local std::unique_ptr<uint8_t, Free> buf;
    thread_local size_t cap = 0;
    if (cap < bytes) {
        const size_t n = (bytes + 63) & ~size_t{63};
        buf.reset(static_cast<uint8_t *>(std::aligned_alloc(64, n)));
        if (!buf) std::abort();  // the kernels cannot fail; a 0.5 MiB allocation failing is the OS's end
        cap = n;
    }
    return buf.get();
}

} // namespace

void q4_k_rows16_pack(uint8_t *data, int64_t n_out, size_t row_bytes) {
    const int64_t nsb = static_cast<int64_t>(row_bytes / kBlock);
    std::vector<uint8_t> rows(kQ4KRows16 * row_bytes);
    for (int64_t g = 0; g + kQ4KRows16 <= n_out; g += kQ4KRows16) {
        uint8_t *grp = data + g * row_bytes;
        std::memcpy(rows.data(), grp, rows.size());
        for (int64_t s = 0; s < nsb; ++s) pack_record(rows.data(), row_bytes, s, grp + s * kQ4KRows16Record);
    }
}

void q4_k_rows16_unpack(const uint8_t *w, size_t row_bytes, int64_t g0, int64_t n_groups, uint8_t *dst) {
    const int64_t nsb = static_cast<int64_t>(row_bytes / kBlock);
    for (int64_t g = 0; g < n_groups; ++g) {
        const uint8_t *grp = w + (g0 + g * kQ4KRows16) * row_bytes;
        uint8_t *out = dst + g * kQ4KRows16 * row_bytes;
        for (int64_t s = 0; s < nsb; ++s) unpack_record(grp + s * kQ4KRows16Record, out, row_bytes, s);
    }
}

bool q4_k_rows16_native() { return detail::kernels().q4_k_rows16_native; }

namespace detail {

namespace {

// Rows [r0, r1) through `plain`: those in groups from a copy in the file's layout (whole groups), the
// last n_out % 16 in place.
void via_plain(MatmulRowsFn plain, const MatmulJob &job, int64_t r0, int64_t r1) {
    const int64_t n16 = job.n_rows16;
    MatmulJob j = job;
    j.n_rows16 = 0;
    if (r0 < n16) {
        const int64_t e = r1 < n16 ? r1 : n16;
        const int64_t g0 = r0 / kQ4KRows16 * kQ4KRows16, n_groups = (e - g0 + kQ4KRows16 - 1) / kQ4KRows16;
        uint8_t *rows = thread_rows(static_cast<size_t>(n_groups * kQ4KRows16) * job.row_bytes);
        q4_k_rows16_unpack(job.w, job.row_bytes, g0, n_groups, rows);
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

} // namespace

void q4_k_rows16_rows(MatmulRowsFn plain, MatmulRowsFn native, const MatmulJob &job, int64_t r0, int64_t r1) {
    if (!native || job.n_tokens > kTokTile) return via_plain(plain, job, r0, r1);
    // The whole groups inside [r0, r1) with the tile, the rest (a range that starts or ends inside a
    // group, the last rows) through plain.
    const int64_t n16 = job.n_rows16;
    const int64_t a = (r0 + kQ4KRows16 - 1) / kQ4KRows16 * kQ4KRows16;
    const int64_t e = r1 < n16 ? r1 : n16;
    const int64_t b = e / kQ4KRows16 * kQ4KRows16;
    if (a >= b) return via_plain(plain, job, r0, r1);
    if (r0 < a) via_plain(plain, job, r0, a);
    native(job, a, b);
    if (b < r1) via_plain(plain, job, b, r1);
}

} // namespace detail

} // namespace ember::cpu
