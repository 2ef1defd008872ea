// weights.cpp — the device layout of weights (see weights.hpp).
#include "weights.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "quant_math.hpp"

#include <cstring>

namespace ember::cu {

namespace {
constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
bool quantized(uint32_t type) { return type == 8 || type == 2; }
size_t code_bytes(const ember_mod_tensor &t) {
    const size_t n = static_cast<size_t>(t.ne[0]) * static_cast<size_t>(t.n_dims > 1 ? t.ne[1] : 1);
    switch (t.type) {
    case 0: return n * 4;
    case 8: return n;
    case 2: return n / 2;
    case 12: return n / 256 * 144;
    case 13: return n / 256 * 176;
    case 14: return n / 256 * 210;
    case 1: case 30: return n * 2;
    default: return n / fb_block_elems(t.type) * fb_block_bytes(t.type);  // the other block formats
    }
}
} // namespace

void check_weight_type(const ember_mod_tensor &t, const char *what) {
    switch (t.type) {
    case 0: case 1: case 30: return;
    case 8: case 2:
        if (t.ne[0] % 32 == 0) return;
        break;
    case 12: case 13: case 14:
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
    const size_t rows = static_cast<size_t>(t.n_dims > 1 ? t.ne[1] : 1);
    return align_up(code_bytes(t)) + (quantized(t.type) ? align_up(rows * (t.ne[0] / 32) * 2) : 0);
}

DevWeight weight_pack(const ember_mod_tensor &t, uint8_t *out, void *base) {
    DevWeight w;
    w.type = t.type;
    w.n_in = t.ne[0];
    w.n_out = t.n_dims > 1 ? t.ne[1] : 1;
    w.codes = base;
    const size_t cb = code_bytes(t);
    if (!quantized(t.type)) {  // plain rows, and the other block formats as in the file
        std::memcpy(out, t.data, cb);
        return w;
    }
    const size_t nb = static_cast<size_t>(w.n_out) * (w.n_in / 32);
    const size_t block = t.type == 8 ? 34 : 18, codes = block - 2;
    uint8_t *scales = out + align_up(cb);
    const uint8_t *src = static_cast<const uint8_t *>(t.data);
    for (size_t b = 0; b < nb; ++b) {
        std::memcpy(scales + 2 * b, src + b * block, 2);
        std::memcpy(out + b * codes, src + b * block + 2, codes);
    }
    w.scales = reinterpret_cast<const uint16_t *>(static_cast<uint8_t *>(base) + align_up(cb));
    return w;
}

} // namespace ember::cu
