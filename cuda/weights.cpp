// weights.cpp — the device layout of weights (see weights.hpp).
#include "weights.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "quant_math.hpp"
#include "tile_layout.hpp"

#include <cstring>

namespace ember::cu {

namespace {
constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
// Q8_0 and Q4_0 keep their scales apart from the tiles (tile_layout.hpp).
bool split_scales(uint32_t type) { return type == kQ8_0 || type == kQ4_0; }
size_t code_bytes(const ember_mod_tensor &t) {
    const size_t rows = static_cast<size_t>(t.n_dims > 1 ? t.ne[1] : 1), n = static_cast<size_t>(t.ne[0]) * rows;
    const size_t tiled_rows = static_cast<size_t>(tile_groups(static_cast<int64_t>(rows))) * kTileRows;
    switch (t.type) {
    case kF32: return n * 4;
    case kQ8_0: return tiled_rows * static_cast<size_t>(t.ne[0]);  // whole tiles of 16 rows
    case kQ4_0: return tiled_rows * static_cast<size_t>(t.ne[0]) / 2;
    case kQ4_K: case kQ6_K: return tiled_rows / kTileRows * static_cast<size_t>(t.ne[0]) / 256 * unit_bytes(t.type);
    case kQ5_K: return n / 256 * 176;
    case kF16: case kBF16: return n * 2;
    default: return n / fb_block_elems(t.type) * fb_block_bytes(t.type);  // the other block formats
    }
}

// One row's blocks of a tiled type into its group's tiles (codes: the tensor's tile area; scales: Q8_0's
// and Q4_0's scale area). Each block's codes go four at a time to the lanes that read them.
void pack_row(uint32_t type, const uint8_t *src, int64_t r, int64_t nb, uint8_t *codes, uint8_t *scales) {
    const int rr = static_cast<int>(r % kTileRows);
    const int64_t group = r / kTileRows;
    if (type == kQ4_K) {
        for (int64_t sb = 0; sb < nb / 8; ++sb) {
            const uint8_t *blk = src + sb * 144;
            std::memcpy(codes + unit_start(type, group, nb, sb * 8) + rr * 16, blk, 16);  // d, dmin, scales
            for (int j = 0; j < 8; ++j) {
                // Block j's 32 codes (the nibbles of qs[32 (j / 2) ..], low for even j) in Q4_0's order.
                const uint8_t *qs = blk + 16 + 32 * (j / 2);
                uint8_t q[16];
                for (int m = 0; m < 16; ++m) {
                    const int lo = j % 2 ? qs[m] >> 4 : qs[m] & 15, hi = j % 2 ? qs[m + 16] >> 4 : qs[m + 16] & 15;
                    q[m] = static_cast<uint8_t>(lo | hi << 4);
                }
                uint8_t *dst = codes + tile_start(type, group, nb, sb * 8 + j);
                for (int k = 0; k < 16; k += 4) std::memcpy(dst + tile_code_offset(type, rr, k), q + k, 4);
            }
        }
        return;
    }
    if (type == kQ6_K) {
        for (int64_t sb = 0; sb < nb / 8; ++sb) {
            const uint8_t *blk = src + sb * 210, *ql = blk, *qh = blk + 128;
            uint8_t *unit = codes + unit_start(type, group, nb, sb * 8);
            std::memcpy(unit + 2 * rr, blk + 208, 2);                 // d
            std::memcpy(unit + 2 * kTileRows + 16 * rr, blk + 192, 16);  // the scales
            for (int j = 0; j < 8; ++j) {
                const int h = j / 4, k = j % 4;  // block j: elements 32 j ..; core/dtype.hpp's Q6_K layout
                uint8_t q[32];
                for (int l = 0; l < 32; ++l) {
                    const uint8_t lo = ql[64 * h + 32 * (k & 1) + l];
                    const int code = (k < 2 ? lo & 15 : lo >> 4) | ((qh[32 * h + l] >> (2 * k)) & 3) << 4;
                    q[l] = static_cast<uint8_t>(code - 32);
                }
                uint8_t *dst = codes + tile_start(type, group, nb, sb * 8 + j);
                for (int l = 0; l < 32; l += 4) std::memcpy(dst + tile_code_offset(type, rr, l), q + l, 4);
            }
        }
        return;
    }
    const size_t block = type == kQ8_0 ? 34 : 18;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *blk = src + static_cast<size_t>(b) * block;
        std::memcpy(scales + 2 * ((group * nb + b) * kTileRows + tile_scale_slot(rr)), blk, 2);
        uint8_t *dst = codes + tile_start(type, group, nb, b);
        for (int k = 0; k < (type == kQ8_0 ? 32 : 16); k += 4) std::memcpy(dst + tile_code_offset(type, rr, k), blk + 2 + k, 4);
    }
}
} // namespace

void check_weight_type(const ember_mod_tensor &t, const char *what) {
    switch (t.type) {
    case kF32: case kF16: case kBF16: return;
    case kQ8_0: case kQ4_0:
        if (t.ne[0] % 32 == 0) return;
        break;
    case kQ4_K: case kQ5_K: case kQ6_K:
        if (t.ne[0] % 256 == 0) return;
        break;
    default:
        if (fb_block_elems(t.type) != 0 && t.ne[0] % fb_block_elems(t.type) == 0) return;
        break;
    }
    fail(EMBER_ERR_UNSUPPORTED,
         "cuda: %s is %s, which this backend does not run yet (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, "
         "Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4 in whole blocks)",
         what, dtype_name(t.type));
}

size_t weight_device_bytes(const ember_mod_tensor &t) {
    const size_t rows = static_cast<size_t>(tile_groups(t.n_dims > 1 ? t.ne[1] : 1)) * kTileRows;
    return align_up(code_bytes(t)) + (split_scales(t.type) ? align_up(rows * (t.ne[0] / 32) * 2) : 0);
}

DevWeight weight_pack(const ember_mod_tensor &t, uint8_t *out, void *base) {
    DevWeight w;
    w.type = t.type;
    w.n_in = t.ne[0];
    w.n_out = t.n_dims > 1 ? t.ne[1] : 1;
    w.codes = base;
    const size_t cb = code_bytes(t);
    if (!tiled_type(t.type)) {  // plain rows, and the other block formats as in the file
        std::memcpy(out, t.data, cb);
        return w;
    }
    // The padding rows of the last group stay zero (the caller's buffer is zeroed).
    const int64_t nb = w.n_in / 32;
    const size_t row_bytes = dtype_row_bytes(static_cast<DType>(t.type), w.n_in);
    const uint8_t *src = static_cast<const uint8_t *>(t.data);
    for (int64_t r = 0; r < w.n_out; ++r) pack_row(t.type, src + static_cast<size_t>(r) * row_bytes, r, nb, out, out + align_up(cb));
    if (split_scales(t.type)) w.scales = reinterpret_cast<const uint16_t *>(static_cast<uint8_t *>(base) + align_up(cb));
    return w;
}

} // namespace ember::cu
