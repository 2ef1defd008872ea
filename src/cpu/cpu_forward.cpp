// cpu_forward.cpp — the CPU backend runs a model's program (backend/graph.h), node by node.
//
// Matrix products and attention are threaded inside the kernels. Two fusions keep a pass's thread
// dispatches few, with results identical to running the nodes one by one: consecutive products of one
// input (Q/K/V, gate/up) run as one product that quantizes the input once; consecutive row-local nodes
// of one layer (norms, rope, cache stores, adds, SwiGLU) run as one pass over chunks of token rows, on
// the calling thread when a pass has few rows (decode: a dispatch would cost more than the work).
#include "cpu/cpu_context.hpp"
#include "cpu/rows16.hpp"

#include "backend/backend.hpp"
#include "backend/program_read.hpp"
#include "backend/state_runs.hpp"
#include "backend/window_blocks.hpp"
#include "core/error.hpp"
#include "core/fp16.hpp"

#include <algorithm>
#include <climits>
#include <cstring>

namespace ember::cpu {

namespace {

// Below this many token rows a row-local run stays on the calling thread.
constexpr uint32_t kMinRowsToSplit = 4;

// Every op of graph.h: the CPU runs them all.
constexpr uint32_t kCpuOps[] = {EMBER_GRAPH_GET_ROWS,  EMBER_GRAPH_RMS_NORM,     EMBER_GRAPH_MATMUL,
                                EMBER_GRAPH_ROPE,      EMBER_GRAPH_KV_STORE,     EMBER_GRAPH_ATTENTION,
                                EMBER_GRAPH_ADD,       EMBER_GRAPH_SWIGLU,       EMBER_GRAPH_GATHER_LOGITS,
                                EMBER_GRAPH_SCALE,     EMBER_GRAPH_SOFTCAP,      EMBER_GRAPH_GEGLU,
                                EMBER_GRAPH_ATTENTION_EXT, EMBER_GRAPH_ROPE_YARN, EMBER_GRAPH_MOE,
                                EMBER_GRAPH_COPY_COLS, EMBER_GRAPH_SIGMOID_MUL, EMBER_GRAPH_SSM_CONV,
                                EMBER_GRAPH_GATED_DELTA, EMBER_GRAPH_INPUT_ROWS, EMBER_GRAPH_LAYER_NORM, EMBER_GRAPH_GELU,
                                EMBER_GRAPH_ADD_POS_ROWS, EMBER_GRAPH_SSM_SCAN, EMBER_GRAPH_MUL};

bool row_local(uint32_t op) {
    return op == EMBER_GRAPH_RMS_NORM || op == EMBER_GRAPH_ROPE || op == EMBER_GRAPH_KV_STORE || op == EMBER_GRAPH_ADD ||
           op == EMBER_GRAPH_SWIGLU || op == EMBER_GRAPH_SCALE || op == EMBER_GRAPH_SOFTCAP || op == EMBER_GRAPH_GEGLU ||
           op == EMBER_GRAPH_ROPE_YARN || op == EMBER_GRAPH_COPY_COLS || op == EMBER_GRAPH_SIGMOID_MUL ||
           op == EMBER_GRAPH_LAYER_NORM || op == EMBER_GRAPH_GELU || op == EMBER_GRAPH_ADD_POS_ROWS ||
           op == EMBER_GRAPH_MUL;
}

// The state floats a stateful node owns, from its shape (graph.h).
uint64_t node_state_floats(const ember_mod_model_desc &d, const ember_graph_node &n) {
    if (n.op == EMBER_GRAPH_SSM_CONV) return static_cast<uint64_t>(d.tensors[n.w].ne[0] - 1) * d.bufs[n.src].width;
    if (n.op == EMBER_GRAPH_SSM_SCAN) return uint64_t{n.n_head} * n.head_dim * n.n;
    return uint64_t{n.n_head} * n.head_dim * n.head_dim;
}

bool is_rope(uint32_t op) { return op == EMBER_GRAPH_ROPE || op == EMBER_GRAPH_ROPE_YARN; }
bool is_attention(uint32_t op) { return op == EMBER_GRAPH_ATTENTION || op == EMBER_GRAPH_ATTENTION_EXT; }

// The buffer whose rows a node runs over.
int32_t row_buf(const ember_graph_node &n) { return n.op == EMBER_GRAPH_KV_STORE ? n.src : n.dst; }

} // namespace

CpuModel::CpuModel(const ember_mod_model_desc &d) : desc(d), nodes(read_program(d, "cpu", kCpuOps, true)) {
    for (uint32_t i = 0; i < d.n_tensors; ++i) {
        const ember_mod_tensor &t = d.tensors[i];
        WeightView w;
        // The host layout of cpu_module.cpp's host_layout_rewrite: Q4_K, Q6_K, Q4_0, Q8_0 interleaved 16
        // rows at a time.
        w.rows16 = (t.type & EMBER_MOD_TYPE_HOST_LAYOUT) != 0;
        w.type = static_cast<DType>(t.type & ~EMBER_MOD_TYPE_HOST_LAYOUT);
        if (w.rows16 && !rows16_type(w.type))
            fail(EMBER_ERR_INVALID_MODEL, "cpu: tensor %s in a host layout of type %s", t.name ? t.name : "?", dtype_name(w.type));
        w.n_in = t.ne[0];
        w.n_out = t.n_dims > 1 ? t.ne[1] : 1;
        w.data = t.data;
        w.row_bytes = dtype_row_bytes(w.type, static_cast<uint64_t>(t.ne[0]));
        views.push_back(w);
    }
    auto buf_ok = [&](int32_t b) { return b >= 0 && static_cast<uint32_t>(b) < d.n_bufs; };
    if (desc_input_buf(desc) >= 0 && (!buf_ok(desc.input_buf) || d.bufs[desc.input_buf].rows != EMBER_GRAPH_ROWS_TOKENS))
        fail(EMBER_ERR_INVALID_MODEL, "cpu: the program's input buffer %d is not a buffer of token rows", desc.input_buf);
    auto tensor_ok = [&](int32_t t) { return t >= -1 && t < static_cast<int32_t>(d.n_tensors); };
    for (uint32_t i = 0; i < d.n_nodes; ++i) {
        const ember_graph_node &n = node(i);
        if (!ember_graph_op_name(n.op)) fail(EMBER_ERR_UNSUPPORTED, "cpu: op %u (node %u) is not supported by this build", n.op, i);
        // Every op reads src but GET_ROWS and the ropes (in place on dst); SWIGLU, GEGLU, MOE and KV_STORE
        // read src2; all write dst but KV_STORE.
        const bool reads_src = n.op != EMBER_GRAPH_GET_ROWS && n.op != EMBER_GRAPH_INPUT_ROWS && !is_rope(n.op) &&
                               n.op != EMBER_GRAPH_ADD_POS_ROWS;
        const bool reads_src2 = n.op == EMBER_GRAPH_SWIGLU || n.op == EMBER_GRAPH_GEGLU || n.op == EMBER_GRAPH_MOE ||
                                n.op == EMBER_GRAPH_KV_STORE || n.op == EMBER_GRAPH_SIGMOID_MUL ||
                                n.op == EMBER_GRAPH_GATED_DELTA || n.op == EMBER_GRAPH_SSM_SCAN || n.op == EMBER_GRAPH_MUL;
        if (!tensor_ok(n.w) || !tensor_ok(n.b) || !tensor_ok(n.w2) || !tensor_ok(n.w3) || !tensor_ok(n.b2) ||
            !tensor_ok(n.b3) || (n.op != EMBER_GRAPH_KV_STORE && !buf_ok(n.dst)) || (reads_src && !buf_ok(n.src)) ||
            (reads_src2 && !buf_ok(n.src2)) || (n.op == EMBER_GRAPH_GATED_DELTA && !buf_ok(n.src3)))
            fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (%s) refers to a missing buffer or tensor", i, ember_graph_op_name(n.op));
        if ((n.op >= EMBER_GRAPH_COPY_COLS && n.op <= EMBER_GRAPH_GATED_DELTA) || n.op == EMBER_GRAPH_SSM_SCAN || n.op == EMBER_GRAPH_MUL)
            check_hybrid(i, n);
        if (n.op == EMBER_GRAPH_INPUT_ROWS && d.bufs[n.dst].rows != EMBER_GRAPH_ROWS_TOKENS)
            fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (input_rows) writes a logits-row buffer", i);
        if (n.op == EMBER_GRAPH_SOFTCAP && !(n.softcap > 0))
            fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (softcap) of cap %g", i, static_cast<double>(n.softcap));
        if (n.op == EMBER_GRAPH_MOE) check_moe(i, n);
        if (n.op == EMBER_GRAPH_LAYER_NORM &&
            (d.bufs[n.src].width != d.bufs[n.dst].width ||
             (n.w >= 0 && (d.tensors[n.w].type != static_cast<uint32_t>(DType::F32) || d.tensors[n.w].ne[0] != d.bufs[n.dst].width)) ||
             (n.b >= 0 && (d.tensors[n.b].type != static_cast<uint32_t>(DType::F32) || d.tensors[n.b].ne[0] != d.bufs[n.dst].width))))
            fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (layer_norm): widths or an F32 weight / bias of the row's width", i);
        if (n.op == EMBER_GRAPH_GELU && d.bufs[n.src].width != d.bufs[n.dst].width)
            fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (gelu): widths", i);
        if (n.op == EMBER_GRAPH_ADD_POS_ROWS) {
            const ember_mod_tensor *t = n.w >= 0 ? &d.tensors[n.w] : nullptr;
            if (!t || t->ne[0] != d.bufs[n.dst].width ||
                (t->type != static_cast<uint32_t>(DType::F32) && t->type != static_cast<uint32_t>(DType::F16)))
                fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (add_pos_rows): an F32 or F16 table of the row's width", i);
            n_pos_rows = std::min<int64_t>(n_pos_rows, t->n_dims > 1 ? t->ne[1] : 1);
        }
        if (n.op == EMBER_GRAPH_RMS_NORM && (n.n == 0 || d.bufs[n.dst].width % n.n != 0))
            fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (rms_norm) groups of %u", i, n.n);
        if ((n.op == EMBER_GRAPH_KV_STORE || is_attention(n.op)) &&
            (n.layer < 0 || static_cast<uint32_t>(n.layer) >= d.n_layer || ember_graph_kv_layer(&n) < 0 ||
             ember_graph_kv_layer(&n) > n.layer))
            fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (%s) of layer %d", i, ember_graph_op_name(n.op), n.layer);
        if (n.op == EMBER_GRAPH_KV_STORE &&
            (d.bufs[n.src].width > d.kv_width || d.bufs[n.src2].width != d.bufs[n.src].width))
            fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (kv_store) rows wider than the cache's", i);
        if (is_attention(n.op) && uint64_t{n.n_head_kv} * n.head_dim > d.kv_width)
            fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (attention) heads wider than the cache's rows", i);
    }
}

// The hybrid families' ops: their widths, tensors and state (graph.h gives the shapes).
void CpuModel::check_hybrid(uint32_t i, const ember_graph_node &n) const {
    auto bad = [&](const char *why) { fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (%s): %s", i, ember_graph_op_name(n.op), why); };
    const uint64_t ws = desc.bufs[n.src].width, wd = desc.bufs[n.dst].width;
    auto f32_vector = [&](int32_t t, uint64_t len) {
        return t >= 0 && desc.tensors[t].type == static_cast<uint32_t>(DType::F32) && desc.tensors[t].n_dims == 1 &&
               static_cast<uint64_t>(desc.tensors[t].ne[0]) == len;
    };
    switch (n.op) {
    case EMBER_GRAPH_COPY_COLS:
        if (n.n_head == 0 || ws % n.n_head != 0 || uint64_t{n.n} + n.head_dim > ws / n.n_head ||
            uint64_t{n.n_rot} + uint64_t{n.n_head} * n.head_dim > wd)
            bad("its groups do not fit the buffers");
        return;
    case EMBER_GRAPH_SIGMOID_MUL:
        if (ws != wd || (desc.bufs[n.src2].width != ws && desc.bufs[n.src2].width != 1)) bad("widths");
        return;
    case EMBER_GRAPH_MUL:
        if (ws != wd || desc.bufs[n.src2].width != ws) bad("widths");
        return;
    case EMBER_GRAPH_SSM_CONV: {
        if (n.w < 0) bad("no kernel");
        const ember_mod_tensor &k = desc.tensors[n.w];
        if (k.type != static_cast<uint32_t>(DType::F32) || k.n_dims != 2 || k.ne[0] < 1 || k.ne[0] > 64 ||
            static_cast<uint64_t>(k.ne[1]) != ws || ws != wd || n.src == n.dst)
            bad("the kernel must be F32 [K <= 64, channels] over rows of its channels");
        if (n.n > EMBER_GRAPH_SSM_CONV_LINEAR || (n.b >= 0 && !f32_vector(n.b, ws))) bad("its activation or bias");
        break;
    }
    case EMBER_GRAPH_SSM_SCAN:
        if (n.n_head == 0 || n.n_head_kv == 0 || n.n_head % n.n_head_kv != 0 || n.head_dim == 0 || n.n == 0 ||
            n.n > 1024 || ws != uint64_t{n.n_head} * n.head_dim + 2ull * n.n_head_kv * n.n ||
            wd != uint64_t{n.n_head} * n.head_dim || desc.bufs[n.src2].width != n.n_head || !f32_vector(n.w, n.n_head) ||
            !f32_vector(n.w2, n.n_head) || !f32_vector(n.b, n.n_head) || n.src == n.dst || n.src2 == n.dst)
            bad("heads, groups, widths or its F32 [n_head] A / D / dt bias tensors");
        break;
    case EMBER_GRAPH_GATED_DELTA:
        if (n.n_head == 0 || n.n_head_kv == 0 || n.n_head % n.n_head_kv != 0 || n.head_dim == 0 || n.head_dim > 1024 ||
            ws != uint64_t{2 * n.n_head_kv + n.n_head} * n.head_dim || wd != uint64_t{n.n_head} * n.head_dim ||
            desc.bufs[n.src2].width != n.n_head || desc.bufs[n.src3].width != n.n_head || !f32_vector(n.w, n.n_head) ||
            !f32_vector(n.w2, n.n_head) || n.src == n.dst || n.n > 1)
            bad("heads, widths or its F32 [n_head] dt / decay tensors");
        break;
    default: fail(EMBER_ERR_UNSUPPORTED, "cpu: op %u (node %u) is not supported by this build", n.op, i);
    }
    const uint64_t floats = node_state_floats(desc, n);
    if (state_bytes(desc) == 0 || n.state_size != floats || uint64_t{n.state_offset} + floats > desc.state_floats)
        bad("its share of the recurrent state does not fit the model's");
}

// MOE's tensors: 3-D experts of one shape family, biases of the experts' widths, a router of n_expert.
void CpuModel::check_moe(uint32_t i, const ember_graph_node &n) const {
    auto bad = [&](const char *why) { fail(EMBER_ERR_INVALID_MODEL, "cpu: node %u (moe): %s", i, why); };
    if (n.w < 0 || n.w2 < 0 || n.w3 < 0) bad("an expert tensor is missing");
    const ember_mod_tensor &g = desc.tensors[n.w], &u = desc.tensors[n.w2], &dn = desc.tensors[n.w3];
    const int64_t n_in = desc.bufs[n.src].width, n_out = desc.bufs[n.dst].width, ne = n.n_expert;
    if (n.src == n.dst || n.n_expert_used == 0 || n.n_expert_used > n.n_expert || desc.bufs[n.src2].width != n.n_expert)
        bad("the router's width or the number of chosen experts");
    for (const ember_mod_tensor *t : {&g, &u})
        if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != g.ne[1] || t->ne[2] != ne) bad("gate/up experts of the wrong shape");
    if (dn.n_dims != 3 || dn.ne[0] != g.ne[1] || dn.ne[1] != n_out || dn.ne[2] != ne) bad("down experts of the wrong shape");
    const int32_t biases[3] = {n.b, n.b2, n.b3};
    const int64_t widths[3] = {g.ne[1], g.ne[1], n_out};
    for (int k = 0; k < 3; ++k) {
        if (biases[k] < 0) continue;
        const ember_mod_tensor &b = desc.tensors[biases[k]];
        if (b.type != static_cast<uint32_t>(DType::F32) || b.ne[0] != widths[k] || (b.n_dims == 2 ? b.ne[1] : 1) != ne)
            bad("an expert bias of the wrong shape or type");
    }
    if (n.moe_act > EMBER_GRAPH_ACT_SWIGLU_OAI || n.moe_gating > EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT)
        fail(EMBER_ERR_UNSUPPORTED, "cpu: node %u (moe): activation %u, gating %u", i, n.moe_act, n.moe_gating);
    if (n.sel_bias >= static_cast<int32_t>(desc.n_tensors) ||
        (n.sel_bias >= 0 && (n.moe_gating != EMBER_GRAPH_MOE_GATE_SIGMOID || desc.tensors[n.sel_bias].type != static_cast<uint32_t>(DType::F32) ||
                             desc.tensors[n.sel_bias].ne[0] != ne)))
        bad("a choice bias of the wrong shape or type, or with a gating that takes none");
}

CpuContextSizes cpu_context_sizes(const ember_mod_model_desc &d, const ember_mod_context_params &p) {
    CpuContextSizes z;
    const uint32_t n_window_blocks = context_window_blocks(p);
    // The layers sessions and engines sized the window pool for (one function reads them for both).
    z.windowed = window_pool_layers(d, n_window_blocks);
    z.has_kv = kv_layers(d);
    for (uint32_t il = 0; il < d.n_layer; ++il) {
        z.layer_row.push_back(z.kv_rows);
        if (z.has_kv[il]) z.kv_rows += static_cast<size_t>(z.windowed[il] ? n_window_blocks : p.n_blocks) * p.block_size;
    }
    const uint32_t n_slots = p.struct_size >= offsetof(ember_mod_context_params, n_state_slots) + sizeof p.n_state_slots
                                 ? p.n_state_slots : 0;
    z.state_floats = size_t{n_slots} * (state_bytes(d) / sizeof(float));
    z.kv_row_bytes = kv_row_bytes(d, static_cast<DType>(p.kv_type));
    auto rows = [&](int32_t b) -> size_t { return d.bufs[b].rows == EMBER_GRAPH_ROWS_LOGITS ? p.n_logits : p.n_batch; };
    for (uint32_t i = 0; i < d.n_bufs; ++i)
        z.buf_floats.push_back(static_cast<int32_t>(i) == d.logits_buf ? 0 : rows(static_cast<int32_t>(i)) * d.bufs[i].width);
    // The widest quantized matmul input.
    for (const ember_graph_node &n : read_program(d, "cpu", kCpuOps, true)) {
        if (n.op == EMBER_GRAPH_MOE && n.w >= 0 && static_cast<uint32_t>(n.w) < d.n_tensors) {
            // Its gathered inputs (n_in, then n_ff wide) are quantized like a matmul's.
            const int64_t n_in = d.tensors[n.w].ne[0], n_ff = d.tensors[n.w].ne[1], n_out = d.bufs[n.dst].width;
            const size_t r = p.n_batch;
            for (int64_t w : {n_in, n_ff})
                if (w % 32 == 0) z.scratch = std::max(z.scratch, matmul_scratch_bytes(w, static_cast<int64_t>(r)));
            z.moe_floats = std::max(z.moe_floats, r * static_cast<size_t>(n_in + 2 * n_ff + n_out) +
                                                      r * n.n_expert_used * static_cast<size_t>(n_out));
            continue;
        }
        if (n.op != EMBER_GRAPH_MATMUL || n.src < 0 || static_cast<uint32_t>(n.src) >= d.n_bufs) continue;
        const int64_t n_in = d.bufs[n.src].width;
        if (n_in % 32 == 0)
            z.scratch = std::max(z.scratch, matmul_scratch_bytes(n_in, static_cast<int64_t>(rows(n.src))));
    }
    return z;
}

CpuContext::CpuContext(const CpuModel &model, const ember_mod_context_params &params, CpuContext *share)
    : m_(model), params_(params) {
    if (share)
        pool_ = share->pool_;
    else
        pool_ = std::make_shared<ThreadPool>(static_cast<int>(params.n_threads < 1 ? 1 : params.n_threads));
    if (params_.n_blocks == 0 || params_.block_size == 0 || params_.n_batch == 0 || params_.n_logits == 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "n_blocks, block_size, n_batch and n_logits must be positive");
    check_kv_type(m_.desc, static_cast<DType>(params_.kv_type));
    if (params_.struct_size < sizeof params_) params_.n_window_blocks = 0;   // an older core's params
    sizes_ = cpu_context_sizes(m_.desc, params_);
    const CpuContextSizes &z = sizes_;
    row_bytes_ = z.kv_row_bytes;
    k_cache_.assign(z.kv_rows * row_bytes_, 0);
    v_cache_.assign(z.kv_rows * row_bytes_, 0);
    if (params_.struct_size < offsetof(ember_mod_context_params, n_state_slots) + sizeof params_.n_state_slots)
        params_.n_state_slots = 0;
    if (state_bytes(m_.desc) > 0 && params_.n_state_slots == 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cpu: a model with recurrent layers needs state slots in its context");
    states_.assign(z.state_floats, 0.0f);
    storage_.resize(z.buf_floats.size());
    bufs_.resize(z.buf_floats.size());
    for (size_t i = 0; i < z.buf_floats.size(); ++i) {
        storage_[i].assign(z.buf_floats[i], 0.0f);
        bufs_[i] = storage_[i].data();
    }
    scratch_.get(z.scratch);
    moe_work_.reserve(z.moe_floats);
}

// Layout: for each layer, the K rows of positions 0..n-1, then their V rows. With window blocks the
// window layers' blocks follow the others' in `table` (backend.hpp); a released window block (-1) reads
// as zeros, rows no window layer reads again, and is skipped on the way back.
void CpuContext::read_kv(const int32_t *table, uint32_t n, uint8_t *dst) const {
    const size_t row = row_bytes_;
    const uint32_t bs = params_.block_size, nb = (n + bs - 1) / bs;
    for (uint32_t il = 0; il < m_.desc.n_layer; ++il) {
        if (!has_kv(il)) continue;
        const int32_t *t = windowed(il) ? table + nb : table;
        for (const auto *cache : {&k_cache_, &v_cache_})
            for (uint32_t p = 0; p < n; ++p, dst += row) {
                if (t[p / bs] < 0) std::memset(dst, 0, row);
                else std::memcpy(dst, cache->data() + row_offset(il, t[p / bs], p), row);
            }
    }
}

void CpuContext::write_kv(const int32_t *table, uint32_t n, const uint8_t *src) {
    const size_t row = row_bytes_;
    const uint32_t bs = params_.block_size, nb = (n + bs - 1) / bs;
    for (uint32_t il = 0; il < m_.desc.n_layer; ++il) {
        if (!has_kv(il)) continue;
        const int32_t *t = windowed(il) ? table + nb : table;
        for (auto *cache : {&k_cache_, &v_cache_})
            for (uint32_t p = 0; p < n; ++p, src += row)
                if (t[p / bs] >= 0) std::memcpy(cache->data() + row_offset(il, t[p / bs], p), src, row);
    }
}

void CpuContext::copy_block(int32_t src, int32_t dst) {
    const CopyBlockIds ids = copy_block_ids(src, dst, params_.n_blocks, params_.n_window_blocks, "cpu");
    const size_t block = static_cast<size_t>(params_.block_size) * row_bytes_;
    for (uint32_t il = 0; il < m_.desc.n_layer; ++il) {
        if (windowed(il) != ids.window || !has_kv(il)) continue;
        std::memcpy(k_layer(il) + ids.dst * block, k_layer(il) + ids.src * block, block);
        std::memcpy(v_layer(il) + ids.dst * block, v_layer(il) + ids.src * block, block);
    }
}

void CpuContext::check_slot(int32_t slot, const char *what) const {
    if (slot < 0 || static_cast<uint32_t>(slot) >= params_.n_state_slots)
        fail(EMBER_ERR_INTERNAL, "cpu %s: state slot %d of %u", what, slot, params_.n_state_slots);
}

void CpuContext::copy_state(int32_t src, int32_t dst) {
    check_slot(src, "copy_state");
    check_slot(dst, "copy_state");
    if (src != dst) std::memcpy(state_slot(dst), state_slot(src), state_bytes(m_.desc));
}

void CpuContext::read_state(int32_t slot, float *dst) const {
    check_slot(slot, "read_state");
    std::memcpy(dst, states_.data() + static_cast<size_t>(slot) * m_.desc.state_floats, state_bytes(m_.desc));
}

void CpuContext::write_state(int32_t slot, const float *src) {
    check_slot(slot, "write_state");
    std::memcpy(state_slot(slot), src, state_bytes(m_.desc));
}

void CpuContext::prepare_state_runs(const ember_mod_batch &b) {
    runs_.clear();
    if (state_bytes(m_.desc) == 0) return;
    const std::vector<SlotRun> runs = slot_runs(b, params_.n_state_slots, "cpu forward");
    const int32_t *keep = kept_slots(b, params_.n_state_slots, runs, "cpu forward");
    if (keep) {
        keep_.resize(b.n_tokens);
        for (uint32_t t = 0; t < b.n_tokens; ++t) keep_[t] = keep[t] < 0 ? nullptr : state_slot(keep[t]);
    }
    for (const SlotRun &r : runs) {
        StateRun run;
        run.t0 = r.t0, run.t1 = r.t1, run.state = state_slot(r.slot);
        run.from = r.from == -1 ? nullptr : state_slot(r.from);
        run.keep = keep ? keep_.data() + r.t0 : nullptr;
        runs_.push_back(run);
    }
}

void CpuContext::run_node(const ember_graph_node &n, const ember_mod_batch &b, int64_t r0, int64_t r1) {
    switch (n.op) {
    case EMBER_GRAPH_COPY_COLS:
        copy_cols(buf(n.src) + r0 * width(n.src), buf(n.dst) + r0 * width(n.dst), r1 - r0, width(n.src), width(n.dst),
                  n.n_rot, n.n_head, n.n, n.head_dim);
        break;
    case EMBER_GRAPH_SIGMOID_MUL: {
        const int64_t w = width(n.dst), gw = width(n.src2);
        sigmoid_mul(buf(n.src) + r0 * w, buf(n.src2) + r0 * gw, buf(n.dst) + r0 * w, r1 - r0, w, gw);
        break;
    }
    case EMBER_GRAPH_RMS_NORM: {
        const int64_t w = width(n.dst);
        rms_norm(buf(n.src) + r0 * w, m_.f32(n.w), buf(n.dst) + r0 * w, (r1 - r0) * (w / n.n), n.n, n.eps);
        break;
    }
    case EMBER_GRAPH_ROPE:
    case EMBER_GRAPH_ROPE_YARN: {
        RopeParams rp;
        rp.n_rot = static_cast<int>(n.n_rot);
        rp.neox = n.rope_mode == EMBER_GRAPH_ROPE_NEOX;
        rp.theta_base = n.rope_theta;
        rp.freq_scale = n.rope_freq_scale;
        rp.freq_factors = m_.f32(n.w);
        if (n.op == EMBER_GRAPH_ROPE_YARN) {
            rp.ext_factor = n.rope_ext_factor, rp.attn_factor = n.rope_attn_factor;
            rp.beta_fast = n.rope_beta_fast, rp.beta_slow = n.rope_beta_slow, rp.n_ctx_orig = n.rope_n_ctx_orig;
        }
        rope(buf(n.dst) + r0 * width(n.dst), r1 - r0, static_cast<int>(n.n_head), static_cast<int>(n.head_dim), b.pos + r0, rp);
        break;
    }
    case EMBER_GRAPH_KV_STORE: {
        // Each token's K/V row goes to its own sequence's block at its position.
        const auto il = static_cast<uint32_t>(n.layer);
        const int64_t kvw = width(n.src);   // at most the cache's row: a narrower one fills its start
        const DType kv_type = static_cast<DType>(params_.kv_type);
        const float *k = buf(n.src), *v = buf(n.src2);
        uint8_t *kc = k_layer(il), *vc = v_layer(il);
        const uint32_t bs = params_.block_size;
        const int32_t *const *tables = windowed(il) ? b.window_tables : b.tables;
        for (int64_t t = r0; t < r1; ++t) {
            const int32_t p = b.pos[t];
            const size_t row = (static_cast<size_t>(tables[t][p / bs]) * bs + p % bs) * row_bytes_;
            store_kv_row(kv_type, k + t * kvw, kc + row, kvw);
            store_kv_row(kv_type, v + t * kvw, vc + row, kvw);
        }
        break;
    }
    case EMBER_GRAPH_ADD: {
        const int64_t w = width(n.dst);
        add_inplace(buf(n.dst) + r0 * w, buf(n.src) + r0 * w, (r1 - r0) * w);
        break;
    }
    case EMBER_GRAPH_SWIGLU: {
        const int64_t w = width(n.dst);
        swiglu(buf(n.src) + r0 * w, buf(n.src2) + r0 * w, buf(n.dst) + r0 * w, (r1 - r0) * w);
        break;
    }
    case EMBER_GRAPH_MUL: {
        const int64_t w = width(n.dst);
        mul(buf(n.src) + r0 * w, buf(n.src2) + r0 * w, buf(n.dst) + r0 * w, (r1 - r0) * w);
        break;
    }
    case EMBER_GRAPH_SCALE: {
        const int64_t w = width(n.dst);
        scale(buf(n.src) + r0 * w, n.scale, buf(n.dst) + r0 * w, (r1 - r0) * w);
        break;
    }
    case EMBER_GRAPH_SOFTCAP: {
        const int64_t w = width(n.dst);
        softcap(buf(n.src) + r0 * w, n.softcap, buf(n.dst) + r0 * w, (r1 - r0) * w);
        break;
    }
    case EMBER_GRAPH_GEGLU: {
        const int64_t w = width(n.dst);
        geglu(buf(n.src) + r0 * w, buf(n.src2) + r0 * w, buf(n.dst) + r0 * w, (r1 - r0) * w);
        break;
    }
    case EMBER_GRAPH_LAYER_NORM: {
        const int64_t w = width(n.dst);
        layer_norm(buf(n.src) + r0 * w, m_.f32(n.w), m_.f32(n.b), buf(n.dst) + r0 * w, r1 - r0, w, n.eps);
        break;
    }
    case EMBER_GRAPH_GELU: {
        const int64_t w = width(n.dst);
        gelu(buf(n.src) + r0 * w, buf(n.dst) + r0 * w, (r1 - r0) * w);
        break;
    }
    case EMBER_GRAPH_ADD_POS_ROWS: {
        // (forward() checked the positions against the table.)
        const int64_t w = width(n.dst);
        const ember_mod_tensor &t = m_.desc.tensors[n.w];
        for (int64_t r = r0; r < r1; ++r) {
            float *x = buf(n.dst) + r * w;
            const int64_t p = b.pos[r];
            if (t.type == static_cast<uint32_t>(DType::F32)) {
                add_inplace(x, static_cast<const float *>(t.data) + p * w, w);
            } else {
                const uint16_t *h = static_cast<const uint16_t *>(t.data) + p * w;
                for (int64_t i = 0; i < w; ++i) x[i] += fp16_to_fp32(h[i]);
            }
        }
        break;
    }
    default: fail(EMBER_ERR_INTERNAL, "cpu: op %u is not row-local", n.op);
    }
}

uint32_t CpuContext::run_rowwise(uint32_t i, const ember_mod_batch &b) {
    const ember_graph_node &first = m_.node(i);
    const uint32_t space = m_.desc.bufs[row_buf(first)].rows;
    uint32_t end = i + 1;
    while (end < m_.desc.n_nodes) {
        const ember_graph_node &n = m_.node(end);
        if (!row_local(n.op) || n.layer != first.layer || m_.desc.bufs[row_buf(n)].rows != space) break;
        ++end;
    }
    const uint32_t n_rows = rows(row_buf(first), b);
    auto fn = [&](int64_t r0, int64_t r1) {
        for (uint32_t j = i; j < end; ++j) run_node(m_.node(j), b, r0, r1);
    };
    if (n_rows < kMinRowsToSplit || pool_->size() == 1)
        fn(int64_t{0}, int64_t{n_rows});
    else
        pool_->parallel_for(n_rows, fn);
    return end;
}

uint32_t CpuContext::run_matmuls(uint32_t i, uint32_t n_rows) {
    const ember_graph_node &first = m_.node(i);
    const WeightView *w[4];
    float *y[4];
    const float *bias[4];
    uint32_t k = 0, j = i;
    for (; j < m_.desc.n_nodes && k < 4; ++j, ++k) {
        const ember_graph_node &n = m_.node(j);
        if (n.op != EMBER_GRAPH_MATMUL || n.src != first.src || n.layer != first.layer || n.dst == n.src) break;
        w[k] = &m_.views[static_cast<size_t>(n.w)];
        y[k] = buf(n.dst);
        bias[k] = m_.f32(n.b);
    }
    if (k == 1)
        matmul(*pool_, scratch_, *w[0], buf(first.src), n_rows, y[0], bias[0], precise_);
    else
        matmul_multi(*pool_, scratch_, w, static_cast<int>(k), buf(first.src), n_rows, y, bias, precise_);
    return j;
}

void CpuContext::forward(const ember_mod_batch &b) {
    const ember_mod_model_desc &d = m_.desc;
    if (b.n_tokens == 0 || b.n_tokens > params_.n_batch || b.n_logits > params_.n_logits)
        fail(EMBER_ERR_INTERNAL, "cpu forward: %u tokens / %u logits exceed the context's %u / %u", b.n_tokens,
             b.n_logits, params_.n_batch, params_.n_logits);
    // EMBER_PRECISION_HIGH (1): activations with ~15 bits in the quantized products (matmul.cpp).
    precise_ = b.struct_size >= offsetof(ember_mod_batch, precision) + sizeof b.precision && b.precision == 1;
    const bool split = params_.n_window_blocks > 0;
    if (split && (b.struct_size < offsetof(ember_mod_batch, window_tables) + sizeof b.window_tables || !b.window_tables))
        fail(EMBER_ERR_INTERNAL, "cpu forward: a context with window blocks needs the batch's window tables");
    for (uint32_t t = 0; t < b.n_tokens; ++t) {
        const int32_t block = b.pos[t] < 0 ? -1 : b.tables[t][b.pos[t] / static_cast<int32_t>(params_.block_size)];
        if (b.pos[t] < 0 || block < 0 || static_cast<uint32_t>(block) >= params_.n_blocks)
            fail(EMBER_ERR_INTERNAL, "cpu forward: token %u at position %d maps to block %d of %u", t, b.pos[t],
                 block, params_.n_blocks);
        // (Only the token's own window block is checked: the window layers read no further back than the
        // window, which the window table keeps; see kv/window_table.hpp.)
        const int32_t wblock = split ? b.window_tables[t][b.pos[t] / static_cast<int32_t>(params_.block_size)] : 0;
        if (split && (wblock < 0 || static_cast<uint32_t>(wblock) >= params_.n_window_blocks))
            fail(EMBER_ERR_INTERNAL, "cpu forward: token %u at position %d maps to window block %d of %u", t,
                 b.pos[t], wblock, params_.n_window_blocks);
    }
    for (uint32_t t = 0; t < b.n_tokens; ++t)
        if (b.pos[t] >= m_.n_pos_rows)
            fail(EMBER_ERR_INVALID_ARGUMENT, "cpu forward: position %d is past the model's %lld position embeddings",
                 b.pos[t], static_cast<long long>(m_.n_pos_rows));
    for (uint32_t i = 0; i < b.n_logits; ++i)
        if (b.logits_rows[i] < 0 || static_cast<uint32_t>(b.logits_rows[i]) >= b.n_tokens)
            fail(EMBER_ERR_INTERNAL, "cpu forward: logits row %d of %u", b.logits_rows[i], b.n_tokens);
    bufs_[static_cast<size_t>(d.logits_buf)] = b.logits;
    if (const int32_t in = desc_input_buf(d); in >= 0) {
        // A part of a program cut across devices: it starts from the activations of the part before.
        if (b.struct_size < offsetof(ember_mod_batch, input) + sizeof b.input || !b.input)
            fail(EMBER_ERR_INTERNAL, "cpu forward: a program with an input buffer needs the batch's input rows");
        std::memcpy(buf(in), b.input, size_t{b.n_tokens} * d.bufs[in].width * sizeof(float));
    }
    prepare_state_runs(b);

    int32_t layer = INT_MIN;
    for (uint32_t i = 0; i < d.n_nodes;) {
        const ember_graph_node &n = m_.node(i);
        if (n.layer != layer) {
            layer = n.layer;
            // Between layers, before any logits are written (the caller keeps its old ones).
            if (layer >= 0 && static_cast<uint32_t>(layer) < d.n_layer && b.cancel && b.cancel(b.cancel_data))
                fail(EMBER_ERR_CANCELLED, "cpu forward: cancelled after layer %d of %u", layer, d.n_layer);
        }
        const uint32_t n_rows = rows(row_buf(n), b);
        if (n_rows == 0) {  // no logits wanted: the output's nodes have nothing to do
            ++i;
            continue;
        }
        if (row_local(n.op)) {
            i = run_rowwise(i, b);
            continue;
        }
        switch (n.op) {
        case EMBER_GRAPH_MATMUL: i = run_matmuls(i, n_rows); continue;
        case EMBER_GRAPH_GET_ROWS:
            for (uint32_t t = 0; t < b.n_tokens; ++t)
                if (b.tokens[t] < 0 || b.tokens[t] >= m_.views[static_cast<size_t>(n.w)].n_out)
                    fail(EMBER_ERR_INTERNAL, "cpu forward: token %d out of range", b.tokens[t]);
            get_rows(m_.views[static_cast<size_t>(n.w)], b.tokens, b.n_tokens, buf(n.dst));
            break;
        case EMBER_GRAPH_ATTENTION:
        case EMBER_GRAPH_ATTENTION_EXT: {
            AttnParams ap;
            ap.n_head = static_cast<int>(n.n_head);
            ap.n_head_kv = static_cast<int>(n.n_head_kv);
            ap.head_dim = static_cast<int>(n.head_dim);
            ap.scale = n.scale;
            if (n.op == EMBER_GRAPH_ATTENTION_EXT) {
                ap.window = n.window, ap.softcap = n.softcap, ap.sinks = m_.f32(n.w);
                ap.local_chunk = n.attn_local_chunk, ap.temp_scale = n.attn_temp_scale;
                ap.temp_offset = n.attn_temp_offset, ap.temp_floor = n.attn_temp_floor;
                ap.bidirectional = n.attn_mask == EMBER_GRAPH_MASK_SEQUENCE;
            }
            const auto il = static_cast<uint32_t>(ember_graph_kv_layer(&n));
            PagedKv kv;
            kv.k = k_layer(il);
            kv.v = v_layer(il);
            kv.type = static_cast<DType>(params_.kv_type);
            kv.row_bytes = row_bytes_;
            kv.block_size = params_.block_size;
            attention(*pool_, buf(n.src), b.pos, windowed(il) ? b.window_tables : b.tables,
                      b.n_tokens, kv, buf(n.dst), ap);
            break;
        }
        case EMBER_GRAPH_MOE: {
            MoeParams mp;
            mp.gate = m_.views[static_cast<size_t>(n.w)], mp.up = m_.views[static_cast<size_t>(n.w2)];
            mp.down = m_.views[static_cast<size_t>(n.w3)];
            mp.gate_b = m_.f32(n.b), mp.up_b = m_.f32(n.b2), mp.down_b = m_.f32(n.b3);
            mp.n_expert = static_cast<int>(n.n_expert), mp.n_used = static_cast<int>(n.n_expert_used);
            mp.gating = n.moe_gating, mp.act = n.moe_act, mp.alpha = n.act_alpha, mp.limit = n.act_limit;
            mp.sel_bias = m_.f32(n.sel_bias);
            mp.precise = precise_;
            moe(*pool_, scratch_, mp, buf(n.src), buf(n.src2), n_rows, buf(n.dst), moe_work_);
            break;
        }
        case EMBER_GRAPH_SSM_CONV: {
            const ember_mod_tensor &k = d.tensors[n.w];
            ssm_conv(*pool_, buf(n.src), buf(n.dst), width(n.src), k.ne[0], static_cast<const float *>(k.data), runs_.data(),
                     static_cast<uint32_t>(runs_.size()), n.state_offset, m_.f32(n.b), n.n == EMBER_GRAPH_SSM_CONV_SILU);
            // Later recurrent nodes of this pass go on from the slots just written.
            break;
        }
        case EMBER_GRAPH_GATED_DELTA: {
            DeltaParams p;
            p.n_head = static_cast<int>(n.n_head), p.n_head_k = static_cast<int>(n.n_head_kv);
            p.head_dim = static_cast<int>(n.head_dim);
            p.dt = m_.f32(n.w), p.decay = m_.f32(n.w2), p.eps = n.eps, p.scale = n.scale, p.grouped = n.n == 1;
            gated_delta(*pool_, buf(n.src), buf(n.src2), buf(n.src3), buf(n.dst), p, runs_.data(),
                        static_cast<uint32_t>(runs_.size()), n.state_offset);
            break;
        }
        case EMBER_GRAPH_INPUT_ROWS:
            if (b.struct_size < offsetof(ember_mod_batch, inputs) + sizeof b.inputs || !b.inputs)
                fail(EMBER_ERR_INTERNAL, "cpu forward: the program reads input rows the batch does not have");
            std::memcpy(buf(n.dst), b.inputs, size_t{b.n_tokens} * width(n.dst) * sizeof(float));
            break;
        case EMBER_GRAPH_SSM_SCAN: {
            ScanParams p;
            p.n_head = static_cast<int>(n.n_head), p.head_dim = static_cast<int>(n.head_dim);
            p.n_group = static_cast<int>(n.n_head_kv), p.d_state = static_cast<int>(n.n);
            p.A = m_.f32(n.w), p.D = m_.f32(n.w2), p.dt_bias = m_.f32(n.b);
            ssm_scan(*pool_, buf(n.src), buf(n.src2), buf(n.dst), p, runs_.data(), static_cast<uint32_t>(runs_.size()),
                     n.state_offset);
            break;
        }
        case EMBER_GRAPH_GATHER_LOGITS: {
            const size_t w = width(n.dst);
            for (uint32_t r = 0; r < b.n_logits; ++r)
                std::memcpy(buf(n.dst) + r * w, buf(n.src) + static_cast<size_t>(b.logits_rows[r]) * w, w * sizeof(float));
            break;
        }
        default: fail(EMBER_ERR_INTERNAL, "cpu: op %u", n.op);
        }
        ++i;
    }
    if (float *hidden = batch_hidden(b)) {
        const int32_t h = desc_hidden_buf(d);
        if (h < 0) fail(EMBER_ERR_INTERNAL, "cpu forward: hidden rows asked of a program without them");
        std::memcpy(hidden, buf(h), size_t{b.n_tokens} * width(h) * sizeof(float));
    }
}

} // namespace ember::cpu
