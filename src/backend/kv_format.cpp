// kv_format.cpp — the KV cache's row format, shared by every backend (see backend.hpp).
#include "backend/backend.hpp"

#include "core/error.hpp"

namespace ember {

void check_kv_type(const ember_mod_model_desc &d, DType kv_type) {
    switch (kv_type) {
    case DType::F16: return;
    case DType::Q8_0:
        // Rows are whole Q8_0 blocks; attention reads a head eight values at a time, and eight values
        // starting at a multiple of 8 never straddle a block of 32.
        if (d.kv_width % QK8_0 != 0 || d.head_dim % 8 != 0)
            fail(EMBER_ERR_UNSUPPORTED,
                 "a Q8_0 KV cache needs K/V rows of a multiple of 32 values and head_dim a multiple of 8 "
                 "(this model: %u and %u)",
                 d.kv_width, d.head_dim);
        return;
    default:
        fail(EMBER_ERR_UNSUPPORTED, "KV cache type %s is not supported (F16 or Q8_0)", dtype_name(kv_type));
    }
}

size_t kv_row_bytes(const ember_mod_model_desc &d, DType kv_type) { return dtype_row_bytes(kv_type, d.kv_width); }

} // namespace ember
