// vk_ops.cpp — one kernel on host arrays, for the parity harness (module_api.h's run_op): the same
// Recorder calls the forward pass makes, on buffers made for the call.
#include "vk_ops.hpp"

#include "backend/state_runs.hpp"

#include "backend/attn_options.hpp"
#include "core/error.hpp"
#include "vk_moe.hpp"
#include "vk_program.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>

namespace ember::vk {

namespace {

// Host-side staging of one op: weights (words), activations (floats), io (words), caches (bytes), and
// the recurrent ops' one state slot (floats).
struct OpBuffers {
    std::vector<uint32_t> w;
    std::vector<float> acts;
    std::vector<int32_t> io;
    std::vector<float> state;
    uint32_t put_w(const void *data, size_t bytes) {
        const uint32_t at = static_cast<uint32_t>(w.size());
        w.resize(w.size() + (bytes + 3) / 4);
        std::memcpy(w.data() + at, data, bytes);
        return at;
    }
    uint32_t put_acts(const float *data, size_t n) {
        const uint32_t at = static_cast<uint32_t>(acts.size());
        acts.resize(acts.size() + ((n + 15) & ~size_t{15}), 0.0f);
        if (data) std::memcpy(acts.data() + at, data, n * 4);
        return at;
    }
    uint32_t put_io(const int32_t *data, size_t n) {
        const uint32_t at = static_cast<uint32_t>(io.size());
        io.resize(io.size() + n, 0);
        if (data) std::memcpy(io.data() + at, data, n * 4);
        return at;
    }
};

} // namespace

void run_op(Device &dev, const ember_mod_op &op) {
    OpBuffers hb;
    const DType type = static_cast<DType>(op.type);
    const uint32_t n = op.n_tokens;
    uint32_t y = 0;
    size_t y_count = 0;
    std::vector<uint8_t> kbytes, vbytes;  // the caches (attention reads them, kv_store writes them back)
    bool kv_out = false;
    std::function<void(Recorder &)> record;
    WeightRef w;
    auto weight = [&] {
        w.type = type, w.n_in = op.n_in, w.n_out = op.n_out;
        if (!weight_type_supported(type)) fail(EMBER_ERR_UNSUPPORTED, "vulkan: weight type %s unsupported", dtype_name(type));
        w.off = static_cast<uint32_t>(hb.w.size());
        pack_weight(type, op.w, op.n_in, op.n_out, hb.w);
    };
    auto put_rope_table = [&](uint32_t n_rot, const RopeScaling &y) {
        std::vector<float> cs(size_t{n} * n_rot);
        rope_table(rope_freq(n_rot, op.rope_theta, op.rope_freq_scale, op.norm, y), op.ids, n, cs.data(),
                   rope_mscale(op.rope_freq_scale, y));
        return hb.put_io(reinterpret_cast<const int32_t *>(cs.data()), cs.size());
    };
    // The ops from SCALE on read the fields appended to ember_mod_op: a caller's struct must have them.
    if (op.kind >= EMBER_GRAPH_SCALE && op.kind <= EMBER_GRAPH_MOE &&
        op.struct_size < offsetof(ember_mod_op, act_limit) + sizeof op.act_limit)
        fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan run_op: op %u needs ember_mod_op's fields of graph.h's new ops", op.kind);
    if (op.kind >= EMBER_GRAPH_COPY_COLS && op.kind <= EMBER_GRAPH_GATED_DELTA &&
        op.struct_size < offsetof(ember_mod_op, col_offset) + sizeof op.col_offset)
        fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan run_op: op %u needs ember_mod_op's fields of the recurrent ops", op.kind);
    // The recurrent ops: one sequence of n rows going on in place from the caller's state (slot 0), with
    // states_after each token's state kept in slot 1 + t (state_runs.glsl).
    float *const states_after = op_states_after(op);
    auto one_run = [&](const float *state, size_t floats) {
        if (!state) fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan run_op: op %u without a state", op.kind);
        hb.state.assign(state, state + floats);
        if (states_after) hb.state.resize(floats * (size_t{n} + 1));
        std::vector<int32_t> run = {0, static_cast<int32_t>(n), 0, 0, states_after ? 5 : -1};
        for (uint32_t t = 0; states_after && t < n; ++t) run.push_back(static_cast<int32_t>(t + 1));
        return Recorder::States{hb.put_io(run.data(), run.size()), 1, static_cast<uint32_t>(floats), 0};
    };

    switch (op.kind) {
    case EMBER_MOD_OP_MATMUL: {
        weight();
        const uint32_t bias = op.bias ? hb.put_w(op.bias, op.n_out * 4) : kNone;
        const uint32_t x = hb.put_acts(op.x, size_t{n} * op.n_in);
        y = hb.put_acts(nullptr, size_t{n} * op.n_out), y_count = size_t{n} * op.n_out;
        const uint32_t xq = hb.put_acts(nullptr, size_t{n} * op.n_in / 4 + 16);
        const uint32_t xd = hb.put_acts(nullptr, size_t{n} * op.n_in / 32 + 16);
        const uint32_t xs = hb.put_acts(nullptr, size_t{n} * op.n_in / 32 + 16);
        record = [=](Recorder &r) {
            const Recorder::QActs q{xq, xd, xs};
            if (w.quantized()) r.quantize(x, w.n_in, n, q);
            r.matmul(w, x, q, n, y, bias, false);
        };
        break;
    }
    case EMBER_MOD_OP_RMSNORM: {
        const uint32_t nw = op.norm ? hb.put_w(op.norm, op.n_in * 4) : kNone;
        const uint32_t x = hb.put_acts(op.x, size_t{n} * op.n_in);
        y = hb.put_acts(nullptr, size_t{n} * op.n_in), y_count = size_t{n} * op.n_in;
        const float eps = op.eps;
        const uint32_t dim = op.n_in;
        record = [=](Recorder &r) { r.rmsnorm(x, y, nw, dim, 1, n, kNone, eps); };
        break;
    }
    case EMBER_MOD_OP_ROPE:
    case EMBER_GRAPH_ROPE_YARN: {
        const size_t count = size_t{n} * op.n_head * op.head_dim;
        y = hb.put_acts(op.x, count), y_count = count;
        RopeScaling ys;
        if (op.kind == EMBER_GRAPH_ROPE_YARN) {
            ys.ext_factor = op.rope_ext_factor, ys.attn_factor = op.rope_attn_factor, ys.beta_fast = op.rope_beta_fast;
            ys.beta_slow = op.rope_beta_slow, ys.n_ctx_orig = op.rope_n_ctx_orig;
        }
        const uint32_t cs = put_rope_table(op.n_rot, ys);
        const ember_mod_op o = op;
        record = [=](Recorder &r) { r.rope(y, n, o.n_head, o.head_dim, o.n_rot, o.rope_mode == EMBER_GRAPH_ROPE_NEOX, cs); };
        break;
    }
    case EMBER_MOD_OP_SWIGLU: {
        const uint32_t g = hb.put_acts(op.x, op.n_in), u = hb.put_acts(op.x2, op.n_in);
        y = hb.put_acts(nullptr, op.n_in), y_count = op.n_in;
        const uint32_t cnt = op.n_in;
        record = [=](Recorder &r) { r.swiglu(g, u, y, cnt); };
        break;
    }
    case EMBER_GRAPH_SCALE:
    case EMBER_GRAPH_SOFTCAP:
    case EMBER_GRAPH_GEGLU: {
        if (op.kind == EMBER_GRAPH_SOFTCAP && !(op.softcap > 0))
            fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan softcap: cap %g", static_cast<double>(op.softcap));
        const uint32_t x = hb.put_acts(op.x, op.n_in);
        const uint32_t x2 = op.kind == EMBER_GRAPH_GEGLU ? hb.put_acts(op.x2, op.n_in) : kNone;
        y = hb.put_acts(nullptr, op.n_in), y_count = op.n_in;
        const Recorder::Ew ew = op.kind == EMBER_GRAPH_SCALE     ? Recorder::Ew::Scale
                                : op.kind == EMBER_GRAPH_SOFTCAP ? Recorder::Ew::Softcap
                                                                 : Recorder::Ew::Geglu;
        const float a = op.kind == EMBER_GRAPH_SCALE ? op.scale : op.softcap;
        const uint32_t cnt = op.n_in;
        record = [=](Recorder &r) { r.elementwise(ew, x, x2, y, cnt, a); };
        break;
    }
    case EMBER_GRAPH_MOE: {
        if (op.n_expert == 0 || op.n_expert_used == 0 || op.n_expert_used > op.n_expert || op.moe_act > EMBER_GRAPH_ACT_SWIGLU_OAI)
            fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan moe: %u of %u experts, activation %u", op.n_expert_used, op.n_expert,
                 op.moe_act);
        const uint32_t k = op.n_expert_used, ne = op.n_expert;
        // Each expert's matrix packed on its own, as Model packs a 3-D stack.
        auto experts = [&](uint32_t t, const void *data, uint32_t n_in, uint32_t n_out, uint32_t *stride) {
            WeightRef m;
            m.type = static_cast<DType>(t), m.n_in = n_in, m.n_out = n_out;
            if (!weight_type_supported(m.type) || (m.quantized() && n_in % 32 != 0))
                fail(EMBER_ERR_UNSUPPORTED, "vulkan moe: experts of type %s, rows of %u", dtype_name(m.type), n_in);
            m.off = static_cast<uint32_t>(hb.w.size());
            *stride = static_cast<uint32_t>(packed_words(m.type, n_in, n_out));
            const size_t bytes = dtype_row_bytes(m.type, n_in) * n_out;
            for (uint32_t e = 0; e < ne; ++e) pack_weight(m.type, static_cast<const uint8_t *>(data) + e * bytes, n_in, n_out, hb.w);
            return m;
        };
        MoeExperts e;
        e.gate = experts(op.type, op.w, op.n_in, op.n_ff, &e.gate_stride);
        e.up = experts(op.type2, op.w2, op.n_in, op.n_ff, &e.up_stride);
        e.down = experts(op.type3, op.w3, op.n_ff, op.n_out, &e.down_stride);
        e.gate_b = op.bias ? hb.put_w(op.bias, size_t{ne} * op.n_ff * 4) : kNone;
        e.up_b = op.bias2 ? hb.put_w(op.bias2, size_t{ne} * op.n_ff * 4) : kNone;
        e.down_b = op.bias3 ? hb.put_w(op.bias3, size_t{ne} * op.n_out * 4) : kNone;
        e.act = op.moe_act, e.alpha = op.act_alpha, e.limit = op.act_limit;
        const uint32_t x = hb.put_acts(op.x, size_t{n} * op.n_in);
        y = hb.put_acts(nullptr, size_t{n} * op.n_out), y_count = size_t{n} * op.n_out;
        MoeWork wk;
        wk.xin = hb.put_acts(nullptr, size_t{n} * op.n_in);
        wk.g = hb.put_acts(nullptr, size_t{n} * op.n_ff), wk.u = hb.put_acts(nullptr, size_t{n} * op.n_ff);
        wk.outs = hb.put_acts(nullptr, size_t{n} * k * op.n_out);
        const size_t qw = size_t{n} * std::max(op.n_in, op.n_ff);
        wk.q = {hb.put_acts(nullptr, qw / 4 + 16), hb.put_acts(nullptr, qw / 32 + 16), hb.put_acts(nullptr, qw / 32 + 16)};
        // The router logits are the caller's (x2): routed here, as the forward pass routes them once read back.
        const MoeRoute route = moe_route(op.x2, n, ne, k, op.moe_gating);
        MoeIo at;
        at.token = hb.put_io(nullptr, route.token.size()), at.pos = hb.put_io(nullptr, route.pos.size());
        at.gate = hb.put_io(nullptr, route.gate.size());
        if (!route.row_gate.empty()) at.row_gate = hb.put_io(nullptr, route.row_gate.size());
        moe_put_route(route, at, hb.io.data());
        record = [=](Recorder &r) { moe_record(r, e, route, at, wk, x, y, n, k); };
        break;
    }
    case EMBER_GRAPH_ADD: {
        y = hb.put_acts(op.x, op.n_in), y_count = op.n_in;
        const uint32_t x2 = hb.put_acts(op.x2, op.n_in), cnt = op.n_in;
        record = [=](Recorder &r) { r.add(y, x2, cnt); };
        break;
    }
    case EMBER_GRAPH_GATHER_LOGITS: {
        uint32_t n_src = 0;  // rows of x: up to the last one gathered
        for (uint32_t i = 0; i < n; ++i) {
            if (op.ids[i] < 0) fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan gather_logits: row %d", op.ids[i]);
            n_src = std::max(n_src, static_cast<uint32_t>(op.ids[i]) + 1);
        }
        const uint32_t x = hb.put_acts(op.x, size_t{n_src} * op.n_in), ids = hb.put_io(op.ids, n);
        y = hb.put_acts(nullptr, size_t{n} * op.n_in), y_count = size_t{n} * op.n_in;
        const uint32_t width = op.n_in;
        record = [=](Recorder &r) { r.gather(x, y, width, n, ids); };
        break;
    }
    case EMBER_GRAPH_KV_STORE: {
        if ((type != DType::F16 && type != DType::Q8_0 && type != DType::Q4_0) ||
            op.n_in % (type == DType::F16 ? 2 : 32) != 0)
            fail(EMBER_ERR_UNSUPPORTED, "vulkan kv_store: rows of %u values as %s", op.n_in, dtype_name(type));
        const size_t row_bytes = dtype_row_bytes(type, op.n_in);
        const size_t cache = size_t{op.n_blocks} * op.block_size * row_bytes;
        if (cache == 0) fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan kv_store: an empty cache");
        kbytes.assign(op.k_out, op.k_out + cache);  // rows no token writes keep their bytes
        vbytes.assign(op.v_out, op.v_out + cache);
        kv_out = true;
        const uint32_t k = hb.put_acts(op.x, size_t{n} * op.n_in), v = hb.put_acts(op.x2, size_t{n} * op.n_in);
        const uint32_t rows = hb.put_io(nullptr, n);
        for (uint32_t t = 0; t < n; ++t) {
            const int32_t p = op.ids[t], bs = static_cast<int32_t>(op.block_size);
            const int32_t block = p < 0 ? -1 : op.tables[t][p / bs];
            if (block < 0 || static_cast<uint32_t>(block) >= op.n_blocks)
                fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan kv_store: position %d maps to block %d of %u", p, block, op.n_blocks);
            hb.io[rows + t] = block * bs + p % bs;
        }
        const uint32_t width = op.n_in;
        record = [=](Recorder &r) { r.kv_store(k, v, n, width, rows, 0, static_cast<uint32_t>(row_bytes), type); };
        break;
    }
    case EMBER_MOD_OP_GET_ROWS: {
        weight();
        const uint32_t ids = hb.put_io(op.ids, n);
        y = hb.put_acts(nullptr, size_t{n} * op.n_in), y_count = size_t{n} * op.n_in;
        record = [=](Recorder &r) { r.get_rows(w, ids, n, y); };
        break;
    }
    case EMBER_MOD_OP_ATTENTION:
    case EMBER_GRAPH_ATTENTION_EXT: {
        if (type != DType::F16 && type != DType::Q8_0 && type != DType::Q4_0)
            fail(EMBER_ERR_UNSUPPORTED, "vulkan attention: KV type %u", op.type);
        const uint32_t n_kv = op.n_head_kv * op.head_dim;
        const size_t row_bytes = dtype_row_bytes(type, n_kv);
        const size_t cache = size_t{op.n_blocks} * op.block_size * row_bytes;
        kbytes.assign(op.k_cache, op.k_cache + cache);
        vbytes.assign(op.v_cache, op.v_cache + cache);
        const size_t q_count = size_t{n} * op.n_head * op.head_dim;
        const uint32_t q = hb.put_acts(op.x, q_count);
        y = hb.put_acts(nullptr, q_count), y_count = q_count;
        const uint32_t pos = hb.put_io(op.ids, n);
        const uint32_t tab = hb.put_io(nullptr, n);
        std::map<const int32_t *, uint32_t> at;
        for (uint32_t t = 0; t < n; ++t) {
            auto it = at.find(op.tables[t]);
            if (it == at.end()) {
                uint32_t len = 0;
                for (uint32_t u = 0; u < n; ++u)
                    if (op.tables[u] == op.tables[t]) len = std::max(len, static_cast<uint32_t>(op.ids[u]) / op.block_size + 1);
                it = at.emplace(op.tables[t], hb.put_io(op.tables[t], len)).first;
            }
            hb.io[tab + t] = static_cast<int32_t>(it->second);
        }
        Recorder::Attn a{q, y, op.n_head, op.n_head_kv, op.head_dim, pos, tab, op.block_size, 0,
                         static_cast<uint32_t>(row_bytes), type, op.scale};
        uint32_t max_keys = 0;
        for (uint32_t t = 0; t < n; ++t) max_keys = std::max(max_keys, static_cast<uint32_t>(op.ids[t]) + 1);
        if (op.kind == EMBER_GRAPH_ATTENTION_EXT) {
            a.window = op.window, a.softcap = op.softcap;
            a.sink_off = op.sinks ? hb.put_w(op.sinks, size_t{op.n_head} * 4) : kNone;
            if (a.window) max_keys = std::min(max_keys, a.window);  // the splits cover the window
            const AttnOptions ao = attn_options(op);
            a.local_chunk = ao.local_chunk, a.temp_scale = ao.temp_scale, a.temp_offset = ao.temp_offset;
            a.temp_floor = ao.temp_floor;
            if (a.local_chunk) max_keys = std::min(max_keys, a.local_chunk);   // and the chunk
        }
        a.chunk = op.attn_chunk == 0 ? attention_chunk(n, max_keys) : op.attn_chunk == UINT32_MAX ? 0 : op.attn_chunk;
        if (a.chunk) {
            a.n_split = (max_keys + a.chunk - 1) / a.chunk;
            a.part_off = hb.put_acts(nullptr, size_t{n} * op.n_head * a.n_split * (op.head_dim + 2));
        }
        record = [=](Recorder &r) { r.attention(a, n); };
        break;
    }
    case EMBER_GRAPH_COPY_COLS: {
        const uint32_t y_width = op.n_out ? op.n_out : op.n_head * op.head_dim;
        if (op.n_head == 0 || op.n_in % op.n_head != 0 || uint64_t{op.col_offset} + op.head_dim > op.n_in / op.n_head ||
            uint64_t{op.n_rot} + uint64_t{op.n_head} * op.head_dim > y_width)
            fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan copy_cols: %u groups of %u from column %u of rows of %u into column %u of %u",
                 op.n_head, op.head_dim, op.col_offset, op.n_in, op.n_rot, y_width);
        const uint32_t x = hb.put_acts(op.x, size_t{n} * op.n_in);
        // y's other columns keep the caller's values.
        y_count = size_t{n} * y_width, y = hb.put_acts(op.y, y_count);
        const Recorder::Cols c{op.n_in, op.n_head, op.col_offset, op.head_dim, y_width, op.n_rot};
        record = [=](Recorder &r) { r.copy_cols(x, y, n, c); };
        break;
    }
    case EMBER_GRAPH_SIGMOID_MUL: {
        const uint32_t g_width = op.n_out == 1 ? 1 : op.n_in, width = op.n_in;
        const uint32_t x = hb.put_acts(op.x, size_t{n} * width), g = hb.put_acts(op.x2, size_t{n} * g_width);
        y_count = size_t{n} * width, y = hb.put_acts(nullptr, y_count);
        record = [=](Recorder &r) { r.sigmoid_mul(x, g, y, n, width, g_width); };
        break;
    }
    case EMBER_GRAPH_SSM_CONV: {
        const uint32_t K = op.conv_kernel, C = op.n_in;
        if (K == 0 || K > kConvMaxKernel || !op.w)
            fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan ssm_conv: a kernel of %u taps (1 to %u)", K, kConvMaxKernel);
        const uint32_t wk = hb.put_w(op.w, size_t{C} * K * 4);
        const uint32_t x = hb.put_acts(op.x, size_t{n} * C);
        y_count = size_t{n} * C, y = hb.put_acts(nullptr, y_count);
        const Recorder::States st = one_run(op.state, size_t{K - 1} * C);
        const uint32_t bias = op.bias ? hb.put_w(op.bias, size_t{C} * 4) : Recorder::kNoBias;
        const bool silu = op.n_out == EMBER_GRAPH_SSM_CONV_SILU;
        record = [=](Recorder &r) { r.ssm_conv(x, y, C, K, wk, st, bias, silu); };
        break;
    }
    case EMBER_GRAPH_SSM_SCAN: {
        const uint32_t H = op.n_head, G = op.n_head_kv, P = op.head_dim, N = op.conv_kernel;
        if (H == 0 || G == 0 || H % G != 0 || P == 0 || P > kScanMaxHeadDim || N == 0 || N > kScanMaxState || !op.dt ||
            !op.decay_a || !op.norm)
            fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan ssm_scan: %u heads of %u (at most %u), %u groups of %u (at most %u)", H, P,
                 kScanMaxHeadDim, G, N, kScanMaxState);
        Recorder::Scan sc{};
        sc.xbc_off = hb.put_acts(op.x, size_t{n} * (H * P + 2 * G * N));
        sc.dt_off = hb.put_acts(op.x2, size_t{n} * H);
        y_count = size_t{n} * H * P, y = sc.y_off = hb.put_acts(nullptr, y_count);
        sc.n_head = H, sc.head_dim = P, sc.n_group = G, sc.d_state = N;
        sc.a_off = hb.put_w(op.decay_a, size_t{H} * 4), sc.d_off = hb.put_w(op.norm, size_t{H} * 4);
        sc.dtb_off = hb.put_w(op.dt, size_t{H} * 4);
        const Recorder::States st = one_run(op.state, size_t{H} * P * N);
        record = [=](Recorder &r) { r.ssm_scan(sc, st); };
        break;
    }
    case EMBER_GRAPH_MUL: {
        const uint32_t x = hb.put_acts(op.x, op.n_in), x2 = hb.put_acts(op.x2, op.n_in), cnt = op.n_in;
        y = hb.put_acts(nullptr, op.n_in), y_count = op.n_in;
        record = [=](Recorder &r) { r.elementwise(Recorder::Ew::Mul, x, x2, y, cnt); };
        break;
    }
    case EMBER_GRAPH_GATED_DELTA: {
        const uint32_t H = op.n_head, Hk = op.n_head_kv, S = op.head_dim;
        if (H == 0 || Hk == 0 || H % Hk != 0 || S == 0 || S > kDeltaMaxHeadDim || op.col_offset > 1 || !op.dt || !op.decay_a)
            fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan gated_delta: %u value heads, %u key heads of %u (at most %u), mapping %u",
                 H, Hk, S, kDeltaMaxHeadDim, op.col_offset);
        Recorder::Delta d{};
        d.qkv_off = hb.put_acts(op.x, size_t{n} * (2 * Hk + H) * S);
        d.a_off = hb.put_acts(op.x2, size_t{n} * H), d.b_off = hb.put_acts(op.x3, size_t{n} * H);
        y_count = size_t{n} * H * S, y = d.y_off = hb.put_acts(nullptr, y_count);
        d.n_head = H, d.n_head_k = Hk, d.head_dim = S, d.grouped = op.col_offset;
        d.dt_off = hb.put_w(op.dt, size_t{H} * 4), d.decay_off = hb.put_w(op.decay_a, size_t{H} * 4);
        d.eps = op.eps, d.scale = op.scale;
        const Recorder::States st = one_run(op.state, size_t{H} * S * S);
        record = [=](Recorder &r) { r.gated_delta(d, st); };
        break;
    }
    default: fail(EMBER_ERR_INVALID_ARGUMENT, "vulkan run_op: unknown op %u", op.kind);
    }

    if (hb.w.empty()) hb.w.push_back(0);
    if (hb.io.empty()) hb.io.push_back(0);
    if (kbytes.empty()) kbytes.resize(4), vbytes.resize(4);
    const bool state_out = !hb.state.empty();
    if (hb.state.empty()) hb.state.push_back(0);
    Buffer bw = dev.create_buffer(hb.w.size() * 4, false), ba{}, bk{}, bv{}, bio{}, bs{};
    Bindings bind;
    try {
        ba = dev.create_buffer(hb.acts.size() * 4, false);
        bk = dev.create_buffer(kbytes.size(), false);
        bv = dev.create_buffer(vbytes.size(), false);
        bio = dev.create_buffer(hb.io.size() * 4, true);
        bs = dev.create_buffer(hb.state.size() * 4, false);
        dev.upload(bw, 0, hb.w.data(), hb.w.size() * 4);
        dev.upload(ba, 0, hb.acts.data(), hb.acts.size() * 4);
        dev.upload(bk, 0, kbytes.data(), kbytes.size());
        dev.upload(bv, 0, vbytes.data(), vbytes.size());
        dev.upload(bs, 0, hb.state.data(), hb.state.size() * 4);
        std::memcpy(bio.map, hb.io.data(), hb.io.size() * 4);
        const Buffer *bufs[kBindingCount] = {&bw, &ba, &bk, &bv, &bio, &bs};
        bind.create(dev, bufs);
        dev.run_once([&](VkCommandBuffer cb) {
            Recorder r(dev, cb, bind.set);
            record(r);
        });
        if (y_count) dev.download(ba, size_t{y} * 4, op.y, y_count * 4);
        if (kv_out) {
            dev.download(bk, 0, op.k_out, kbytes.size());
            dev.download(bv, 0, op.v_out, vbytes.size());
        }
        if (state_out) {
            const size_t floats = states_after ? hb.state.size() / (size_t{n} + 1) : hb.state.size();
            dev.download(bs, 0, op.state, floats * 4);
            if (states_after) dev.download(bs, floats * 4, states_after, size_t{n} * floats * 4);
        }
    } catch (...) {
        bind.destroy(dev);
        for (Buffer *b : {&bw, &ba, &bk, &bv, &bio, &bs}) dev.destroy(*b);
        throw;
    }
    bind.destroy(dev);
    for (Buffer *b : {&bw, &ba, &bk, &bv, &bio, &bs}) dev.destroy(*b);
}

} // namespace ember::vk
