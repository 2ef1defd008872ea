// kv_format.cpp — the KV cache's row format, shared by every backend (see backend.hpp).
#include "backend/backend.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cstring>

namespace ember {

void check_kv_type(const ember_mod_model_desc &d, DType kv_type) {
    switch (kv_type) {
    case DType::F16: return;
    case DType::Q8_0:
    case DType::Q4_0:
        // Rows are whole blocks of 32; attention reads a head eight values at a time, and eight values
        // starting at a multiple of 8 never straddle a block of 32 (nor, in Q4_0, the low and high
        // nibbles' halves of one).
        if (d.kv_width % 32 != 0 || d.head_dim % 8 != 0)
            fail(EMBER_ERR_UNSUPPORTED,
                 "a %s KV cache needs K/V rows of a multiple of 32 values and head_dim a multiple of 8 "
                 "(this model: %u and %u)",
                 dtype_name(kv_type), d.kv_width, d.head_dim);
        return;
    default:
        fail(EMBER_ERR_UNSUPPORTED, "KV cache type %s is not supported (F16, Q8_0 or Q4_0)", dtype_name(kv_type));
    }
}

size_t kv_row_bytes(const ember_mod_model_desc &d, DType kv_type) { return dtype_row_bytes(kv_type, d.kv_width); }

std::vector<bool> kv_layers(const ember_mod_model_desc &d) {
    std::vector<bool> has(d.n_layer, false);
    for (uint32_t i = 0; i < d.n_nodes; ++i) {
        ember_graph_node n;
        std::memcpy(&n, reinterpret_cast<const uint8_t *>(d.nodes) + size_t{i} * d.node_size,
                    std::min<size_t>(sizeof n, d.node_size));
        if (n.op == EMBER_GRAPH_KV_STORE && n.layer >= 0 && static_cast<uint32_t>(n.layer) < d.n_layer)
            has[static_cast<size_t>(n.layer)] = true;
    }
    return has;
}

uint32_t n_kv_layers(const ember_mod_model_desc &d) {
    uint32_t n = 0;
    for (bool b : kv_layers(d)) n += b ? 1 : 0;
    return n;
}

uint32_t n_recurrent_layers(const ember_mod_model_desc &d) {
    std::vector<bool> has(d.n_layer, false);
    for (uint32_t i = 0; i < d.n_nodes; ++i) {
        ember_graph_node n{};   // an older, shorter node has no state fields: zeros
        std::memcpy(&n, reinterpret_cast<const uint8_t *>(d.nodes) + size_t{i} * d.node_size,
                    std::min<size_t>(sizeof n, d.node_size));
        if (n.state_size > 0 && n.layer >= 0 && static_cast<uint32_t>(n.layer) < d.n_layer)
            has[static_cast<size_t>(n.layer)] = true;
    }
    return static_cast<uint32_t>(std::count(has.begin(), has.end(), true));
}

} // namespace ember
