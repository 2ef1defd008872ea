// ops.cpp — one kernel on host arrays (module_api.h's run_op, for tests/test_parity.cpp): the inputs
// are copied to the device, the same launchers as the forward pass run, the outputs are copied back.
#include "ops.hpp"

#include "backend/attn_options.hpp"
#include "backend/state_runs.hpp"
#include "attn_math.hpp"
#include "core/dtype.hpp"
#include "cu_check.hpp"
#include "family_kernels.hpp"
#include "inputs.hpp"
#include "model.hpp"
#include "moe.hpp"
#include "program.hpp"
#include "recurrent.hpp"
#include "weights.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ember::cu {

namespace {

template <class T>
T *upload(std::vector<DevBuf> &keep, const T *src, size_t n) {
    keep.emplace_back(std::max<size_t>(n * sizeof(T), 16));
    if (src && n) EMBER_CU(cudaMemcpy(keep.back().data(), src, n * sizeof(T), cudaMemcpyHostToDevice));
    return reinterpret_cast<T *>(keep.back().data());
}

DevWeight upload_weight(std::vector<DevBuf> &keep, const ember_mod_op &op) {
    ember_mod_tensor t{};
    t.type = op.type, t.n_dims = 2, t.ne[0] = op.n_in, t.ne[1] = op.n_out, t.data = op.w, t.n_bytes = op.w_bytes;
    check_weight_type(t, "the op's weight");
    std::vector<uint8_t> host(weight_device_bytes(t));
    keep.emplace_back(host.size());
    const DevWeight w = weight_pack(t, host.data(), keep.back().data());
    EMBER_CU(cudaMemcpy(keep.back().data(), host.data(), host.size(), cudaMemcpyHostToDevice));
    return w;
}

// n_expert matrices of n_out rows of n_in (type t) at data, each packed on its own as Model packs a stack.
std::vector<DevWeight> upload_experts(std::vector<DevBuf> &keep, uint32_t t, const void *data, uint32_t n_in,
                                      uint32_t n_out, uint32_t n_expert) {
    ember_mod_tensor stack{};
    stack.type = t, stack.n_dims = 3, stack.ne[0] = n_in, stack.ne[1] = n_out, stack.ne[2] = n_expert, stack.data = data;
    std::vector<DevWeight> out;
    for (uint32_t e = 0; e < n_expert; ++e) {
        const ember_mod_tensor m = expert_matrix(stack, e);
        check_weight_type(m, "the op's experts");
        std::vector<uint8_t> host(weight_device_bytes(m));
        keep.emplace_back(host.size());
        out.push_back(weight_pack(m, host.data(), keep.back().data()));
        EMBER_CU(cudaMemcpy(keep.back().data(), host.data(), host.size(), cudaMemcpyHostToDevice));
    }
    return out;
}

// One sequence of n tokens whose state (one slot, `floats` of it) goes up from the host and comes back: the
// stateful kernels' runs for it, in place.
// With `after` (ember_mod_op.states_after), token t also keeps its state in slot 1 + t.
StateRuns one_run(std::vector<DevBuf> &keep, float *host_state, size_t floats, uint32_t n, bool after = false) {
    std::vector<int32_t> io(StateIo::words(n), 0);  // every token in run 0; it reads and writes slot 0
    io[StateIo::kT1 * n] = static_cast<int32_t>(n);
    for (uint32_t t = 0; t < n; ++t) io[StateIo::kKeep * n + t] = after ? static_cast<int32_t>(t + 1) : -1;
    io.back() = 1;
    const int32_t *d = upload(keep, io.data(), io.size());
    StateRuns r;
    r.run_of = d + StateIo::kRunOf * n, r.t0 = d + StateIo::kT0 * n, r.t1 = d + StateIo::kT1 * n;
    r.from = d + StateIo::kFrom * n, r.slot = d + StateIo::kSlot * n, r.n_runs = d + io.size() - 1;
    r.keep = d + StateIo::kKeep * n;
    std::vector<float> slots(host_state, host_state + floats);
    if (after) slots.resize(floats * (size_t{n} + 1));
    r.states = upload(keep, slots.data(), slots.size()), r.state_floats = floats;
    return r;
}

} // namespace

void run_op(Device &dev, const ember_mod_op &op) {
    dev.make_current();
    cudaStream_t s = nullptr;  // the legacy default stream: run_op is synchronous anyway
    std::vector<DevBuf> keep;
    keep.reserve(32);
    size_t out_n = 0;  // floats of y, the output of most ops
    float *y = nullptr;
    // What goes back to the host once the op has run.
    struct Download {
        void *host;
        const void *dev;
        size_t bytes;
    };
    std::vector<Download> back;
    // The ops from SCALE on read the fields appended to ember_mod_op: a caller's struct must have them.
    if (op.kind >= EMBER_GRAPH_SCALE && op.kind <= EMBER_GRAPH_MOE &&
        op.struct_size < offsetof(ember_mod_op, act_limit) + sizeof op.act_limit)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cuda run_op: op %u needs ember_mod_op's fields of graph.h's new ops", op.kind);
    if (op.kind >= EMBER_GRAPH_COPY_COLS && op.kind <= EMBER_GRAPH_MUL &&
        op.struct_size < offsetof(ember_mod_op, col_offset) + sizeof op.col_offset)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cuda run_op: op %u needs ember_mod_op's fields of the hybrid ops", op.kind);
    std::vector<DevWeight> experts[3];  // MOE: alive until the op has run
    switch (op.kind) {
    case EMBER_MOD_OP_MATMUL: {
        const DevWeight w = upload_weight(keep, op);
        const size_t nx = size_t{op.n_tokens} * op.n_in;
        out_n = size_t{op.n_tokens} * op.n_out;
        y = upload<float>(keep, nullptr, out_n);
        Matmul mm;
        Matmul::Input in{upload(keep, op.x, nx), op.n_tokens, op.n_in,
                         {upload<int8_t>(keep, nullptr, nx), upload<float>(keep, nullptr, 2 * (nx / 32 + 1))},
                         upload<uint16_t>(keep, nullptr, nx)};
        mm.run(w, in, y, op.bias ? upload(keep, op.bias, op.n_out) : nullptr, false, s);
        break;
    }
    case EMBER_MOD_OP_GET_ROWS: {
        const DevWeight w = upload_weight(keep, op);
        out_n = size_t{op.n_tokens} * op.n_in;
        y = upload<float>(keep, nullptr, out_n);
        get_rows(w, upload(keep, op.ids, op.n_tokens), op.n_tokens, y, s);
        break;
    }
    case EMBER_MOD_OP_RMSNORM:
        out_n = size_t{op.n_tokens} * op.n_in;
        y = upload<float>(keep, nullptr, out_n);
        rms_norm(upload(keep, op.x, out_n), op.norm ? upload(keep, op.norm, op.n_in) : nullptr, y, op.n_tokens, op.n_in,
                 op.eps, s);
        break;
    case EMBER_MOD_OP_SWIGLU:
        out_n = op.n_in;
        y = upload<float>(keep, nullptr, out_n);
        swiglu(upload(keep, op.x, out_n), upload(keep, op.x2, out_n), y, op.n_in, s);
        break;
    case EMBER_MOD_OP_ROPE:
    case EMBER_GRAPH_ROPE_YARN: {
        out_n = size_t{op.n_tokens} * op.n_head * op.head_dim;
        y = upload(keep, op.x, out_n);
        const size_t half = op.n_rot / 2 + 1;
        float *cs = upload<float>(keep, nullptr, op.n_tokens * half), *sn = upload<float>(keep, nullptr, op.n_tokens * half);
        const int32_t *pos = upload(keep, op.ids, op.n_tokens);
        const float *factors = op.norm ? upload(keep, op.norm, op.n_rot / 2) : nullptr;
        if (op.kind == EMBER_GRAPH_ROPE_YARN)
            rope_angles_yarn(pos, op.n_tokens, static_cast<int>(op.n_rot), op.rope_theta, op.rope_freq_scale, factors,
                             RopeYarn{op.rope_ext_factor, op.rope_attn_factor, op.rope_beta_fast, op.rope_beta_slow,
                                      op.rope_n_ctx_orig},
                             cs, sn, s);
        else
            rope_angles(pos, op.n_tokens, static_cast<int>(op.n_rot), op.rope_theta, op.rope_freq_scale, factors, cs, sn, s);
        rope_apply(y, op.n_tokens, static_cast<int>(op.n_head), static_cast<int>(op.head_dim), static_cast<int>(op.n_rot),
                   op.rope_mode == EMBER_GRAPH_ROPE_NEOX, cs, sn, s);
        break;
    }
    case EMBER_MOD_OP_ATTENTION:
    case EMBER_GRAPH_ATTENTION_EXT: {
        const size_t nkv = size_t{op.n_head_kv} * op.head_dim;
        const size_t rb = kv_cache_row_bytes(op.type, nkv);
        if (rb == 0) fail(EMBER_ERR_UNSUPPORTED, "cuda attention: KV type %u with rows of %zu values", op.type, nkv);
        const size_t cache = size_t{op.n_blocks} * op.block_size * rb;
        // The tables as a pass's (inputs.hpp's TablePack).
        TablePack pack;
        std::vector<int32_t> tabs, off(op.n_tokens);
        int32_t max_keys = 1;
        for (uint32_t t = 0; t < op.n_tokens; ++t) {
            pack.need(op.tables[t], op.ids[t], static_cast<int32_t>(op.block_size));
            max_keys = std::max(max_keys, op.ids[t] + 1);
        }
        pack.pack(tabs);
        for (uint32_t t = 0; t < op.n_tokens; ++t) off[t] = pack.offset(op.tables[t]);
        AttnExt x;
        bool bidirectional = false;
        if (op.kind == EMBER_GRAPH_ATTENTION_EXT) {
            x.window = static_cast<int32_t>(std::min<uint32_t>(op.window, INT32_MAX)), x.softcap = op.softcap;
            x.sinks = op.sinks ? upload(keep, op.sinks, op.n_head) : nullptr;
            const AttnOptions ao = attn_options(op);
            x.local_chunk = static_cast<int32_t>(std::min<uint32_t>(ao.local_chunk, INT32_MAX));
            x.temp_floor = static_cast<int32_t>(std::min<uint32_t>(ao.temp_floor, INT32_MAX));
            x.temp_scale = ao.temp_scale, x.temp_offset = ao.temp_offset;
            bidirectional = op.struct_size >= offsetof(ember_mod_op, attn_mask) + sizeof op.attn_mask &&
                            op.attn_mask == EMBER_GRAPH_MASK_SEQUENCE;
            if (bidirectional && (x.local_chunk > 0 || x.temp_scale != 0))
                fail(EMBER_ERR_UNSUPPORTED, "cuda attention: the bidirectional mask with a local chunk or a temperature");
        }
        out_n = size_t{op.n_tokens} * op.n_head * op.head_dim;
        y = upload<float>(keep, nullptr, out_n);
        AttnArgs a;
        a.q = upload(keep, op.x, out_n);
        a.k = upload(keep, op.k_cache, cache), a.v = upload(keep, op.v_cache, cache);
        a.kv_type = op.type, a.row_bytes = rb, a.block_size = op.block_size;
        a.pos = upload(keep, op.ids, op.n_tokens), a.tab_off = upload(keep, off.data(), off.size());
        if (bidirectional) {  // each token's sequence's last position, as a pass computes it (inputs.cpp)
            ember_mod_batch b{};
            b.struct_size = sizeof b, b.n_tokens = op.n_tokens, b.pos = op.ids, b.tables = op.tables;
            std::vector<int32_t> last(op.n_tokens);
            sequence_last(b, last.data());
            a.last = upload(keep, last.data(), last.size());
        }
        a.tables = upload(keep, tabs.data(), tabs.size());
        a.n_tokens = static_cast<int>(op.n_tokens), a.n_head = static_cast<int>(op.n_head);
        a.n_head_kv = static_cast<int>(op.n_head_kv), a.head_dim = static_cast<int>(op.head_dim), a.scale = op.scale;
        bool one_table = true;
        for (uint32_t t = 1; t < op.n_tokens; ++t) one_table = one_table && op.tables[t] == op.tables[0];
        a.q_tile = attention_q_tile(a.n_head, a.n_head_kv, one_table);
        // A caller's chunk size (keys per split; whole 32-key tiles here): none, one split.
        const bool chunked = op.struct_size >= offsetof(ember_mod_op, attn_chunk) + sizeof op.attn_chunk && op.attn_chunk != 0;
        a.split_keys = !chunked ? kAttnSplitKeys
                       : op.attn_chunk == UINT32_MAX
                           ? round_up32(max_keys)
                           : round_up32(static_cast<int32_t>(std::min<uint32_t>(op.attn_chunk, 1u << 20)));
        a.n_splits = splits_for(max_keys, a.split_keys);
        a.partials = upload<float>(keep, nullptr, size_t{op.n_tokens} * op.n_head * static_cast<size_t>(a.n_splits) * (op.head_dim + 2));
        a.out = y;
        attention_ext(a, x, s);
        break;
    }
    case EMBER_GRAPH_LAYER_NORM:
        out_n = size_t{op.n_tokens} * op.n_in;
        y = upload<float>(keep, nullptr, out_n);
        layer_norm(upload(keep, op.x, out_n), op.norm ? upload(keep, op.norm, op.n_in) : nullptr,
                   op.bias ? upload(keep, op.bias, op.n_in) : nullptr, y, op.n_tokens, op.n_in, op.eps, s);
        break;
    case EMBER_GRAPH_GELU:
        out_n = op.n_in;
        y = upload<float>(keep, nullptr, out_n);
        elementwise(Ew::Gelu, upload(keep, op.x, out_n), nullptr, y, op.n_in, 0, 0, s);
        break;
    case EMBER_GRAPH_SCALE:
    case EMBER_GRAPH_SOFTCAP:
    case EMBER_GRAPH_GEGLU: {
        if (op.kind == EMBER_GRAPH_SOFTCAP && !(op.softcap > 0))
            fail(EMBER_ERR_INVALID_ARGUMENT, "cuda softcap: cap %g", static_cast<double>(op.softcap));
        out_n = op.n_in;
        y = upload<float>(keep, nullptr, out_n);
        const Ew ew = op.kind == EMBER_GRAPH_SCALE ? Ew::Scale : op.kind == EMBER_GRAPH_SOFTCAP ? Ew::Softcap : Ew::Geglu;
        elementwise(ew, upload(keep, op.x, out_n), op.kind == EMBER_GRAPH_GEGLU ? upload(keep, op.x2, out_n) : nullptr, y,
                    op.n_in, op.kind == EMBER_GRAPH_SCALE ? op.scale : op.softcap, 0, s);
        break;
    }
    case EMBER_GRAPH_MOE: {
        if (op.n_expert == 0 || op.n_expert_used == 0 || op.n_expert_used > op.n_expert || op.moe_act > EMBER_GRAPH_ACT_SWIGLU_OAI)
            fail(EMBER_ERR_INVALID_ARGUMENT, "cuda moe: %u of %u experts, activation %u", op.n_expert_used, op.n_expert,
                 op.moe_act);
        const uint32_t n = op.n_tokens, k = op.n_expert_used, ne = op.n_expert;
        experts[0] = upload_experts(keep, op.type, op.w, op.n_in, op.n_ff, ne);
        experts[1] = upload_experts(keep, op.type2, op.w2, op.n_in, op.n_ff, ne);
        experts[2] = upload_experts(keep, op.type3, op.w3, op.n_ff, op.n_out, ne);
        MoeExperts e;
        e.gate = experts[0].data(), e.up = experts[1].data(), e.down = experts[2].data();
        e.gate_b = op.bias ? upload(keep, op.bias, size_t{ne} * op.n_ff) : nullptr;
        e.up_b = op.bias2 ? upload(keep, op.bias2, size_t{ne} * op.n_ff) : nullptr;
        e.down_b = op.bias3 ? upload(keep, op.bias3, size_t{ne} * op.n_out) : nullptr;
        e.act = op.moe_act, e.alpha = op.act_alpha, e.limit = op.act_limit;
        // The caller's router logits (x2) routed here, as Context::moe_node routes those it reads back.
        const MoeRoute route = moe_route(op.x2, n, ne, k, op.moe_gating);
        const size_t slots = size_t{n} * k, wide = size_t{n} * std::max(op.n_in, op.n_ff);
        MoeWork w;
        w.xin = upload<float>(keep, nullptr, size_t{n} * op.n_in);
        w.g = upload<float>(keep, nullptr, size_t{n} * op.n_ff), w.u = upload<float>(keep, nullptr, size_t{n} * op.n_ff);
        w.outs = upload<float>(keep, nullptr, slots * op.n_out);
        w.token = upload<int32_t>(keep, nullptr, slots), w.pos = upload<int32_t>(keep, nullptr, slots);
        w.gate = upload<float>(keep, nullptr, slots), w.row_gate = upload<float>(keep, nullptr, slots);
        w.q = ActQ8{upload<int8_t>(keep, nullptr, wide), upload<float>(keep, nullptr, 2 * (wide / 32 + 1))};
        w.x16 = upload<uint16_t>(keep, nullptr, wide);
        std::vector<int32_t> staging(4 * slots);
        moe_upload_route(route, w, s, staging.data());
        EMBER_CU(cudaStreamSynchronize(s));  // staging is pageable and goes out of scope
        out_n = size_t{n} * op.n_out;
        y = upload<float>(keep, nullptr, out_n);
        Matmul mm;
        moe_enqueue(mm, e, route, w, upload(keep, op.x, size_t{n} * op.n_in), y, n, static_cast<int>(k), s);
        break;
    }
    case EMBER_GRAPH_KV_STORE: {
        const size_t rb = kv_cache_row_bytes(op.type, op.n_in);
        if (rb == 0) fail(EMBER_ERR_UNSUPPORTED, "cuda kv_store: KV type %u with rows of %u values", op.type, op.n_in);
        const size_t cache = size_t{op.n_blocks} * op.block_size * rb, nx = size_t{op.n_tokens} * op.n_in;
        std::vector<int32_t> slots(op.n_tokens);
        for (uint32_t t = 0; t < op.n_tokens; ++t) slots[t] = static_cast<int32_t>(cache_row(op.tables[t], op.ids[t], op.block_size));
        // The caches go up and come back whole: rows this op does not write keep their bytes.
        uint8_t *kc = upload(keep, static_cast<const uint8_t *>(op.k_out), cache);
        uint8_t *vc = upload(keep, static_cast<const uint8_t *>(op.v_out), cache);
        const int32_t *ds = upload(keep, slots.data(), slots.size());
        kv_store(upload(keep, op.x, nx), ds, op.n_tokens, op.n_in, op.type, kc, rb, s);
        kv_store(upload(keep, op.x2, nx), ds, op.n_tokens, op.n_in, op.type, vc, rb, s);
        back.push_back({op.k_out, kc, cache});
        back.push_back({op.v_out, vc, cache});
        break;
    }
    case EMBER_GRAPH_ADD:
        out_n = op.n_in;
        y = upload(keep, op.x, out_n);
        add_inplace(y, upload(keep, op.x2, out_n), op.n_in, s);
        break;
    case EMBER_GRAPH_GATHER_LOGITS: {
        // x holds as many rows as the largest id needs.
        size_t x_rows = 0;
        for (uint32_t i = 0; i < op.n_tokens; ++i) {
            if (op.ids[i] < 0) fail(EMBER_ERR_INVALID_ARGUMENT, "cuda gather_logits: row %d", op.ids[i]);
            x_rows = std::max(x_rows, static_cast<size_t>(op.ids[i]) + 1);
        }
        out_n = size_t{op.n_tokens} * op.n_in;
        y = upload<float>(keep, nullptr, out_n);
        const float *x = upload(keep, op.x, x_rows * op.n_in);
        gather_rows(reinterpret_cast<const uint8_t *>(x), upload(keep, op.ids, op.n_tokens), op.n_tokens,
                    size_t{op.n_in} * sizeof(float), reinterpret_cast<uint8_t *>(y), s);
        break;
    }
    case EMBER_GRAPH_COPY_COLS: {
        if (op.n_head == 0 || op.n_in % op.n_head != 0 || uint64_t{op.col_offset} + op.head_dim > op.n_in / op.n_head)
            fail(EMBER_ERR_INVALID_ARGUMENT, "cuda copy_cols: %u groups of %u from column %u of rows of %u", op.n_head,
                 op.head_dim, op.col_offset, op.n_in);
        const uint32_t y_width = op.n_out ? op.n_out : op.n_head * op.head_dim;
        if (uint64_t{op.n_rot} + uint64_t{op.n_head} * op.head_dim > y_width)
            fail(EMBER_ERR_INVALID_ARGUMENT, "cuda copy_cols: columns from %u past rows of %u", op.n_rot, y_width);
        out_n = size_t{op.n_tokens} * y_width;
        y = upload<float>(keep, op.y, out_n);   // the columns around the copied ones keep the caller's values
        copy_cols(upload(keep, op.x, size_t{op.n_tokens} * op.n_in), y, op.n_tokens, op.n_in, y_width, op.n_rot, op.n_head,
                  op.col_offset, op.head_dim, s);
        break;
    }
    case EMBER_GRAPH_SIGMOID_MUL: {
        const size_t gw = op.n_out == 1 ? 1 : op.n_in;
        out_n = size_t{op.n_tokens} * op.n_in;
        y = upload<float>(keep, nullptr, out_n);
        sigmoid_mul(upload(keep, op.x, out_n), upload(keep, op.x2, size_t{op.n_tokens} * gw), y, op.n_tokens, op.n_in,
                    static_cast<int64_t>(gw), s);
        break;
    }
    case EMBER_GRAPH_SSM_CONV: {
        if (op.conv_kernel < 1 || op.conv_kernel > kMaxConvKernel || !op.state)
            fail(EMBER_ERR_INVALID_ARGUMENT, "cuda ssm_conv: kernel of %u (1..%lld) or no state", op.conv_kernel,
                 static_cast<long long>(kMaxConvKernel));
        const size_t floats = size_t{op.conv_kernel - 1} * op.n_in;
        float *const after = op_states_after(op);
        const StateRuns r = one_run(keep, op.state, floats, op.n_tokens, after != nullptr);
        if (after && floats) back.push_back({after, r.states + floats, size_t{op.n_tokens} * floats * sizeof(float)});
        out_n = size_t{op.n_tokens} * op.n_in;
        y = upload<float>(keep, nullptr, out_n);
        ssm_conv(upload(keep, op.x, out_n), y, op.n_tokens, op.n_in, static_cast<int>(op.conv_kernel),
                 upload(keep, static_cast<const float *>(op.w), size_t{op.n_in} * op.conv_kernel), r, 0, s,
                 op.bias ? upload(keep, op.bias, op.n_in) : nullptr, op.n_out == EMBER_GRAPH_SSM_CONV_SILU);
        if (floats) back.push_back({op.state, r.states, floats * sizeof(float)});
        break;
    }
    case EMBER_GRAPH_SSM_SCAN: {
        const size_t H = op.n_head, P = op.head_dim, G = op.n_head_kv, N = op.conv_kernel, n = op.n_tokens;
        if (H == 0 || G == 0 || H % G != 0 || P == 0 || N == 0 || !op.state || !op.dt || !op.decay_a || !op.norm)
            fail(EMBER_ERR_INVALID_ARGUMENT, "cuda ssm_scan: %zu heads of %zu, %zu groups of %zu", H, P, G, N);
        const size_t floats = H * P * N;
        float *const after = op_states_after(op);
        const StateRuns r = one_run(keep, op.state, floats, op.n_tokens, after != nullptr);
        if (after && floats) back.push_back({after, r.states + floats, size_t{op.n_tokens} * floats * sizeof(float)});
        ScanShape p;
        p.n_head = static_cast<int>(H), p.head_dim = static_cast<int>(P), p.n_group = static_cast<int>(G);
        p.d_state = static_cast<int>(N);
        p.A = upload(keep, op.decay_a, H), p.D = upload(keep, op.norm, H), p.dt_bias = upload(keep, op.dt, H);
        out_n = n * H * P;
        y = upload<float>(keep, nullptr, out_n);
        ssm_scan(upload(keep, op.x, n * (H * P + 2 * G * N)), upload(keep, op.x2, n * H), y, op.n_tokens, p, r, 0, s);
        back.push_back({op.state, r.states, floats * sizeof(float)});
        break;
    }
    case EMBER_GRAPH_MUL: {
        out_n = op.n_in;
        y = upload<float>(keep, nullptr, out_n);
        elementwise(Ew::Mul, upload(keep, op.x, out_n), upload(keep, op.x2, out_n), y, op.n_in, 0, 0, s);
        break;
    }
    case EMBER_GRAPH_GATED_DELTA: {
        if (op.n_head == 0 || op.n_head_kv == 0 || op.n_head % op.n_head_kv != 0 || op.head_dim == 0 ||
            op.head_dim > kMaxDeltaDim || op.col_offset > 1 || !op.state || !op.dt || !op.decay_a)
            fail(EMBER_ERR_INVALID_ARGUMENT, "cuda gated_delta: %u value heads, %u key heads of %u (at most %u), mapping %u",
                 op.n_head, op.n_head_kv, op.head_dim, kMaxDeltaDim, op.col_offset);
        const size_t S = op.head_dim, H = op.n_head, n = op.n_tokens, floats = H * S * S;
        float *const after = op_states_after(op);
        const StateRuns r = one_run(keep, op.state, floats, op.n_tokens, after != nullptr);
        if (after && floats) back.push_back({after, r.states + floats, size_t{op.n_tokens} * floats * sizeof(float)});
        DeltaShape p;
        p.n_head = static_cast<int>(H), p.n_head_k = static_cast<int>(op.n_head_kv), p.head_dim = static_cast<int>(S);
        p.dt = upload(keep, op.dt, H), p.decay = upload(keep, op.decay_a, H);
        p.eps = op.eps, p.scale = op.scale, p.grouped = op.col_offset == 1;
        out_n = n * H * S;
        y = upload<float>(keep, nullptr, out_n);
        gated_delta(upload(keep, op.x, n * (2 * op.n_head_kv + H) * S), upload(keep, op.x2, n * H), upload(keep, op.x3, n * H),
                    y, op.n_tokens, p, r, 0, s);
        back.push_back({op.state, r.states, floats * sizeof(float)});
        break;
    }
    case EMBER_MOD_OP_VALIDATION_PROBE:
        fail(EMBER_ERR_UNSUPPORTED, "cuda: no validation layer (compute-sanitizer is the CUDA equivalent)");
    default: fail(EMBER_ERR_INVALID_ARGUMENT, "cuda: unknown op %u", op.kind);
    }
    check_launch("run_op");
    EMBER_CU(cudaDeviceSynchronize());
    if (out_n) back.push_back({op.y, y, out_n * sizeof(float)});
    for (const Download &d : back) EMBER_CU(cudaMemcpy(d.host, d.dev, d.bytes, cudaMemcpyDeviceToHost));
}

} // namespace ember::cu
