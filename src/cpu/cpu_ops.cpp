// cpu_ops.cpp — module_api.h's run_op on the CPU: one op of graph.h on host arrays, through the same
// kernels the forward pass calls (tests/test_parity.cpp holds every backend to the same bounds).
#include "cpu/cpu_ops.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cstring>

namespace ember::cpu {

void run_op(const ember_mod_op &op) {
    static ThreadPool pool(2);
    static Scratch scratch;
    const DType type = static_cast<DType>(op.type);
    switch (op.kind) {
    case EMBER_GRAPH_MATMUL:
    case EMBER_GRAPH_GET_ROWS: {
        WeightView w;
        w.type = type, w.n_in = op.n_in, w.n_out = op.n_out, w.data = op.w;
        w.row_bytes = dtype_row_bytes(type, op.n_in);
        if (op.kind == EMBER_GRAPH_MATMUL) matmul(pool, scratch, w, op.x, op.n_tokens, op.y, op.bias);
        else get_rows(w, op.ids, op.n_tokens, op.y);
        return;
    }
    case EMBER_GRAPH_RMS_NORM: rms_norm(op.x, op.norm, op.y, op.n_tokens, op.n_in, op.eps); return;
    case EMBER_GRAPH_ROPE: {
        const size_t n = size_t{op.n_tokens} * op.n_head * op.head_dim;
        std::copy(op.x, op.x + n, op.y);
        RopeParams p;
        p.n_rot = static_cast<int>(op.n_rot), p.neox = op.rope_mode == EMBER_GRAPH_ROPE_NEOX, p.theta_base = op.rope_theta;
        p.freq_scale = op.rope_freq_scale, p.freq_factors = op.norm;
        rope(op.y, op.n_tokens, static_cast<int>(op.n_head), static_cast<int>(op.head_dim), op.ids, p);
        return;
    }
    case EMBER_GRAPH_SWIGLU: swiglu(op.x, op.x2, op.y, op.n_in); return;
    case EMBER_GRAPH_ADD:
        std::copy(op.x, op.x + op.n_in, op.y);
        add_inplace(op.y, op.x2, op.n_in);
        return;
    case EMBER_GRAPH_ATTENTION: {
        AttnParams p;
        p.n_head = static_cast<int>(op.n_head), p.n_head_kv = static_cast<int>(op.n_head_kv);
        p.head_dim = static_cast<int>(op.head_dim), p.scale = op.scale;
        PagedKv kv;
        kv.k = op.k_cache, kv.v = op.v_cache, kv.type = type, kv.block_size = op.block_size;
        kv.row_bytes = dtype_row_bytes(type, size_t{op.n_head_kv} * op.head_dim);
        attention(pool, op.x, op.ids, op.tables, op.n_tokens, kv, op.y, p);
        return;
    }
    case EMBER_GRAPH_KV_STORE: {
        const size_t row = dtype_row_bytes(type, op.n_in);
        for (uint32_t t = 0; t < op.n_tokens; ++t) {
            const int32_t p = op.ids[t];
            const size_t at = (static_cast<size_t>(op.tables[t][p / static_cast<int32_t>(op.block_size)]) * op.block_size +
                               p % op.block_size) * row;
            store_kv_row(type, op.x + size_t{t} * op.n_in, op.k_out + at, op.n_in);
            store_kv_row(type, op.x2 + size_t{t} * op.n_in, op.v_out + at, op.n_in);
        }
        return;
    }
    case EMBER_GRAPH_GATHER_LOGITS:
        for (uint32_t i = 0; i < op.n_tokens; ++i)
            std::memcpy(op.y + size_t{i} * op.n_in, op.x + static_cast<size_t>(op.ids[i]) * op.n_in, op.n_in * sizeof(float));
        return;
    default: fail(EMBER_ERR_UNSUPPORTED, "cpu: op %u is not supported", op.kind);
    }
}

} // namespace ember::cpu
