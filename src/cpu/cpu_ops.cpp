// cpu_ops.cpp — module_api.h's run_op on the CPU: one op of graph.h on host arrays, through the same
// kernels the forward pass calls (tests/test_parity.cpp holds every backend to the same bounds).
#include "cpu/cpu_ops.hpp"

#include "backend/attn_options.hpp"
#include "backend/state_runs.hpp"
#include "cpu/recurrent.hpp"
#include "core/error.hpp"

#include <algorithm>
#include <cstddef>
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
    case EMBER_GRAPH_ROPE:
    case EMBER_GRAPH_ROPE_YARN: {
        const size_t n = size_t{op.n_tokens} * op.n_head * op.head_dim;
        std::copy(op.x, op.x + n, op.y);
        RopeParams p;
        p.n_rot = static_cast<int>(op.n_rot), p.neox = op.rope_mode == EMBER_GRAPH_ROPE_NEOX, p.theta_base = op.rope_theta;
        p.freq_scale = op.rope_freq_scale, p.freq_factors = op.norm;
        if (op.kind == EMBER_GRAPH_ROPE_YARN) {
            p.ext_factor = op.rope_ext_factor, p.attn_factor = op.rope_attn_factor, p.beta_fast = op.rope_beta_fast;
            p.beta_slow = op.rope_beta_slow, p.n_ctx_orig = op.rope_n_ctx_orig;
        }
        rope(op.y, op.n_tokens, static_cast<int>(op.n_head), static_cast<int>(op.head_dim), op.ids, p);
        return;
    }
    case EMBER_GRAPH_SWIGLU: swiglu(op.x, op.x2, op.y, op.n_in); return;
    case EMBER_GRAPH_MUL: mul(op.x, op.x2, op.y, op.n_in); return;
    case EMBER_GRAPH_ADD:
        std::copy(op.x, op.x + op.n_in, op.y);
        add_inplace(op.y, op.x2, op.n_in);
        return;
    case EMBER_GRAPH_ATTENTION:
    case EMBER_GRAPH_ATTENTION_EXT: {
        AttnParams p;
        p.n_head = static_cast<int>(op.n_head), p.n_head_kv = static_cast<int>(op.n_head_kv);
        p.head_dim = static_cast<int>(op.head_dim), p.scale = op.scale;
        if (op.kind == EMBER_GRAPH_ATTENTION_EXT) {
            p.window = op.window, p.softcap = op.softcap, p.sinks = op.sinks;
            p.bidirectional = op.struct_size >= offsetof(ember_mod_op, attn_mask) + sizeof op.attn_mask &&
                              op.attn_mask == EMBER_GRAPH_MASK_SEQUENCE;
        }
        const AttnOptions ao = attn_options(op);
        p.local_chunk = ao.local_chunk, p.temp_scale = ao.temp_scale, p.temp_offset = ao.temp_offset;
        p.temp_floor = ao.temp_floor;
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
    case EMBER_GRAPH_SCALE: scale(op.x, op.scale, op.y, op.n_in); return;
    case EMBER_GRAPH_LAYER_NORM: layer_norm(op.x, op.norm, op.bias, op.y, op.n_tokens, op.n_in, op.eps); return;
    case EMBER_GRAPH_GELU: gelu(op.x, op.y, op.n_in); return;
    case EMBER_GRAPH_SOFTCAP: softcap(op.x, op.softcap, op.y, op.n_in); return;
    case EMBER_GRAPH_GEGLU: geglu(op.x, op.x2, op.y, op.n_in); return;
    case EMBER_GRAPH_MOE: {
        // Expert matrices as 3-D tensors' slices: n_ff rows of n_in (gate, up), n_out rows of n_ff (down).
        auto view = [](uint32_t t, const void *data, uint32_t n_in, uint32_t n_out) {
            WeightView w;
            w.type = static_cast<DType>(t), w.n_in = n_in, w.n_out = n_out, w.data = data;
            w.row_bytes = dtype_row_bytes(w.type, n_in);
            return w;
        };
        MoeParams p;
        p.gate = view(op.type, op.w, op.n_in, op.n_ff), p.up = view(op.type2, op.w2, op.n_in, op.n_ff);
        p.down = view(op.type3, op.w3, op.n_ff, op.n_out);
        p.gate_b = op.bias, p.up_b = op.bias2, p.down_b = op.bias3;
        p.n_expert = static_cast<int>(op.n_expert), p.n_used = static_cast<int>(op.n_expert_used);
        p.gating = op.moe_gating, p.act = op.moe_act, p.alpha = op.act_alpha, p.limit = op.act_limit;
        std::vector<float> work;  // per call: run_op may be called from several threads at once
        moe(pool, scratch, p, op.x, op.x2, op.n_tokens, op.y, work);
        return;
    }
    case EMBER_GRAPH_COPY_COLS: {
        const uint32_t y_width = op.n_out ? op.n_out : op.n_head * op.head_dim;
        copy_cols(op.x, op.y, op.n_tokens, op.n_in, y_width, op.n_rot, op.n_head, op.col_offset, op.head_dim);
        return;
    }
    case EMBER_GRAPH_SIGMOID_MUL: sigmoid_mul(op.x, op.x2, op.y, op.n_tokens, op.n_in, op.n_out == 1 ? 1 : op.n_in); return;
    case EMBER_GRAPH_SSM_CONV:
    case EMBER_GRAPH_GATED_DELTA:
    case EMBER_GRAPH_SSM_SCAN: {
        // One sequence, going on in place from the caller's state.
        StateRun r;
        r.t0 = 0, r.t1 = op.n_tokens, r.state = op.state, r.from = op.state;
        // states_after: each token's state kept, as a verifying pass keeps them (module_api.h).
        std::vector<float *> keep;
        if (float *after = op_states_after(op)) {
            const size_t floats = op_state_floats(op);
            for (uint32_t t = 0; t < op.n_tokens; ++t) keep.push_back(after + t * floats);
            r.keep = keep.data();
        }
        if (op.kind == EMBER_GRAPH_SSM_CONV) {
            ssm_conv(pool, op.x, op.y, op.n_in, op.conv_kernel, static_cast<const float *>(op.w), &r, 1, 0, op.bias,
                     op.n_out == EMBER_GRAPH_SSM_CONV_SILU);
        } else if (op.kind == EMBER_GRAPH_SSM_SCAN) {
            ScanParams p;
            p.n_head = static_cast<int>(op.n_head), p.head_dim = static_cast<int>(op.head_dim);
            p.n_group = static_cast<int>(op.n_head_kv), p.d_state = static_cast<int>(op.conv_kernel);
            p.A = op.decay_a, p.D = op.norm, p.dt_bias = op.dt;
            ssm_scan(pool, op.x, op.x2, op.y, p, &r, 1, 0);
        } else {
            DeltaParams p;
            p.n_head = static_cast<int>(op.n_head), p.n_head_k = static_cast<int>(op.n_head_kv);
            p.head_dim = static_cast<int>(op.head_dim), p.dt = op.dt, p.decay = op.decay_a, p.eps = op.eps, p.scale = op.scale;
            p.grouped = op.col_offset == 1;
            gated_delta(pool, op.x, op.x2, op.x3, op.y, p, &r, 1, 0);
        }
        return;
    }
    default: fail(EMBER_ERR_UNSUPPORTED, "cpu: op %u is not supported", op.kind);
    }
}

} // namespace ember::cpu
