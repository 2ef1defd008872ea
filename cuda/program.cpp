// program.cpp — the program's checks, fusion decisions and context sizes (see program.hpp).
#include "program.hpp"

#include "attn_math.hpp"

#include "backend/fusion_plan.hpp"
#include "backend/program_read.hpp"
#include "backend/window_blocks.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "inputs.hpp"
#include "types.hpp"
#include "weights.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ember::cu {

namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Every op of graph.h but INPUT_ROWS (read_program refuses any other); ATTENTION_EXT with both of its masks.
constexpr uint32_t kCudaOps[] = {EMBER_GRAPH_GET_ROWS,  EMBER_GRAPH_RMS_NORM,     EMBER_GRAPH_MATMUL,
                                 EMBER_GRAPH_ROPE,      EMBER_GRAPH_KV_STORE,     EMBER_GRAPH_ATTENTION,
                                 EMBER_GRAPH_ADD,       EMBER_GRAPH_SWIGLU,       EMBER_GRAPH_GATHER_LOGITS,
                                 EMBER_GRAPH_SCALE,     EMBER_GRAPH_SOFTCAP,      EMBER_GRAPH_GEGLU,
                                 EMBER_GRAPH_ATTENTION_EXT, EMBER_GRAPH_ROPE_YARN, EMBER_GRAPH_MOE,
                                 EMBER_GRAPH_COPY_COLS, EMBER_GRAPH_SIGMOID_MUL, EMBER_GRAPH_SSM_CONV,
                                 EMBER_GRAPH_GATED_DELTA, EMBER_GRAPH_SSM_SCAN, EMBER_GRAPH_MUL,
                                 EMBER_GRAPH_LAYER_NORM, EMBER_GRAPH_GELU, EMBER_GRAPH_ADD_POS_ROWS};

// The fusions model.cpp's executor implements (backend/fusion_plan.hpp): a product accumulated into the
// residual, and a product reusing the input (Q8 codes, f16 copy) prepared by the product just before it,
// which Matmul::Input carries from one product to the next.
constexpr Fusion kCudaFusions[] = {Fusion::accumulate, Fusion::shared_input_next};

// MOE (graph.h): expert stacks [n_in, n_ff, E], [n_in, n_ff, E], [n_ff, n_out, E] of matrix types; biases
// F32 [n_ff, E], [n_ff, E], [n_out, E]; router logits of E per row.
template <class Tensor>
void check_moe(const ember_mod_model_desc &d, Program &pg, uint32_t i, Tensor &tensor) {
    const ember_graph_node &n = pg.nodes[i];
    auto invalid = [&](const char *why) { fail(EMBER_ERR_INVALID_MODEL, "cuda: node %u (moe): %s", i, why); };
    for (int32_t b : {n.dst, n.src, n.src2})
        if (b < 0 || static_cast<uint32_t>(b) >= d.n_bufs) invalid("a buffer out of range");
    if (n.src == n.dst || n.src2 == n.dst || pg.bufs[n.src].rows != pg.bufs[n.dst].rows ||
        pg.bufs[n.src2].rows != pg.bufs[n.dst].rows)
        invalid("writes its input, or maps rows of one kind to another");
    if (n.n_expert == 0 || n.n_expert_used == 0 || n.n_expert_used > n.n_expert || pg.width(n.src2) != n.n_expert)
        invalid("the router's width or the number of chosen experts");
    if (n.moe_act > EMBER_GRAPH_ACT_SWIGLU_OAI || n.moe_gating > EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT)
        fail(EMBER_ERR_UNSUPPORTED, "cuda: node %u (moe): activation %u, gating %u", i, n.moe_act, n.moe_gating);
    if (n.sel_bias >= 0) {
        const ember_mod_tensor *sb = tensor(n.sel_bias, Program::kVector, true);
        if (n.moe_gating != EMBER_GRAPH_MOE_GATE_SIGMOID || sb->n_dims != 1 || sb->ne[0] != n.n_expert)
            invalid("a choice bias of the wrong shape, or with a gating that takes none");
    }
    const int64_t n_in = pg.width(n.src), n_out = pg.width(n.dst);
    const ember_mod_tensor *g = tensor(n.w, Program::kExperts, true), *u = tensor(n.w2, Program::kExperts, true),
                           *dn = tensor(n.w3, Program::kExperts, true);
    const int64_t n_ff = g->ne[1];
    for (const ember_mod_tensor *t : {g, u})
        if (t->n_dims != 3 || t->ne[0] != n_in || t->ne[1] != n_ff || t->ne[2] != n.n_expert)
            invalid("gate/up experts of the wrong shape");
    if (dn->n_dims != 3 || dn->ne[0] != n_ff || dn->ne[1] != n_out || dn->ne[2] != n.n_expert)
        invalid("down experts of the wrong shape");
    const int32_t biases[3] = {n.b, n.b2, n.b3};
    const int64_t widths[3] = {n_ff, n_ff, n_out};
    for (int k = 0; k < 3; ++k) {
        const ember_mod_tensor *b = tensor(biases[k], Program::kVector, false);
        if (b && (b->ne[0] != widths[k] || (b->n_dims == 2 ? b->ne[1] : 1) != n.n_expert))
            invalid("an expert bias of the wrong shape");
    }
    pg.moe_in = std::max(pg.moe_in, static_cast<uint32_t>(n_in));
    pg.moe_ff = std::max(pg.moe_ff, static_cast<uint32_t>(n_ff));
    pg.moe_out = std::max(pg.moe_out, static_cast<uint32_t>(n_out));
    pg.moe_used = std::max(pg.moe_used, n.n_expert_used);
}

// The hybrid families' ops (graph.h gives the shapes); the two stateful ones own state_size floats of the
// sequence's state at state_offset, which must be their shape's and inside the model's state_floats.
template <class Tensor>
void check_hybrid(const ember_mod_model_desc &d, Program &pg, uint32_t i, Tensor &tensor) {
    const ember_graph_node &n = pg.nodes[i];
    const char *name = ember_graph_op_name(n.op);
    auto invalid = [&](const char *why) { fail(EMBER_ERR_INVALID_MODEL, "cuda: node %u (%s): %s", i, name, why); };
    const bool gd = n.op == EMBER_GRAPH_GATED_DELTA, two = gd || n.op == EMBER_GRAPH_SSM_SCAN || n.op == EMBER_GRAPH_MUL;
    for (int32_t b : {n.dst, n.src})
        if (b < 0 || static_cast<uint32_t>(b) >= d.n_bufs) invalid("a buffer out of range");
    if ((n.op == EMBER_GRAPH_SIGMOID_MUL || two) && (n.src2 < 0 || static_cast<uint32_t>(n.src2) >= d.n_bufs))
        invalid("a buffer out of range");
    if (gd && (n.src3 < 0 || static_cast<uint32_t>(n.src3) >= d.n_bufs)) invalid("a buffer out of range");
    const uint64_t ws = pg.width(n.src), wd = pg.width(n.dst);
    if (pg.bufs[n.src].rows != pg.bufs[n.dst].rows ||
        (n.op >= EMBER_GRAPH_SSM_CONV && n.op != EMBER_GRAPH_MUL && pg.logits_rows(n.dst)))
        invalid("maps rows of one kind to another, or runs over logits rows");
    auto f32_vector = [&](int32_t t, uint64_t len) {
        const ember_mod_tensor *v = tensor(t, Program::kVector, true);
        return v->n_dims == 1 && static_cast<uint64_t>(v->ne[0]) == len;
    };
    uint64_t floats = 0;  // the state the node owns
    switch (n.op) {
    case EMBER_GRAPH_COPY_COLS:
        if (n.n_head == 0 || ws % n.n_head != 0 || uint64_t{n.n} + n.head_dim > ws / n.n_head ||
            uint64_t{n.n_rot} + uint64_t{n.n_head} * n.head_dim > wd || n.src == n.dst)
            invalid("its groups do not fit the buffers");
        return;
    case EMBER_GRAPH_SIGMOID_MUL:
        if (ws != wd || (pg.width(n.src2) != ws && pg.width(n.src2) != 1) || pg.bufs[n.src2].rows != pg.bufs[n.dst].rows)
            invalid("widths");
        return;
    case EMBER_GRAPH_MUL:
        if (ws != wd || pg.width(n.src2) != ws || pg.bufs[n.src2].rows != pg.bufs[n.dst].rows) invalid("widths");
        return;
    case EMBER_GRAPH_SSM_SCAN:
        if (n.head_dim == 0 || n.n_head == 0 || n.n_head_kv == 0 || n.n_head % n.n_head_kv != 0 || n.n == 0 ||
            ws != uint64_t{n.n_head} * n.head_dim + 2ull * n.n_head_kv * n.n || wd != uint64_t{n.n_head} * n.head_dim ||
            pg.width(n.src2) != n.n_head || !f32_vector(n.w, n.n_head) || !f32_vector(n.w2, n.n_head) ||
            !f32_vector(n.b, n.n_head) || n.src == n.dst || n.src2 == n.dst)
            invalid("heads, groups, widths or its F32 [n_head] A / D / dt bias tensors");
        floats = uint64_t{n.n_head} * n.head_dim * n.n;
        break;
    case EMBER_GRAPH_SSM_CONV: {
        const ember_mod_tensor *k = tensor(n.w, Program::kVector, true);
        if (k->n_dims != 2 || k->ne[0] < 1 || k->ne[0] > kMaxConvKernel || static_cast<uint64_t>(k->ne[1]) != ws ||
            ws != wd || n.src == n.dst)
            invalid("the kernel must be F32 [K <= 64, channels] over rows of its channels");
        if (n.n > EMBER_GRAPH_SSM_CONV_LINEAR || (n.b >= 0 && !f32_vector(n.b, ws))) invalid("its activation or bias");
        floats = static_cast<uint64_t>(k->ne[0] - 1) * ws;
        break;
    }
    default:  // GATED_DELTA
        if (n.head_dim > kMaxDeltaDim)
            fail(EMBER_ERR_UNSUPPORTED, "cuda: node %u (gated_delta): head_dim %u (at most %u)", i, n.head_dim, kMaxDeltaDim);
        if (n.n_head == 0 || n.n_head_kv == 0 || n.n_head % n.n_head_kv != 0 || n.head_dim == 0 ||
            ws != uint64_t{2 * n.n_head_kv + n.n_head} * n.head_dim || wd != uint64_t{n.n_head} * n.head_dim ||
            pg.width(n.src2) != n.n_head || pg.width(n.src3) != n.n_head || !f32_vector(n.w, n.n_head) ||
            !f32_vector(n.w2, n.n_head) || n.src == n.dst || n.n > 1)
            invalid("heads, widths or its F32 [n_head] dt / decay tensors");
        floats = uint64_t{n.n_head} * n.head_dim * n.head_dim;
    }
    if (pg.state_floats == 0 || n.state_size != floats || uint64_t{n.state_offset} + floats > pg.state_floats)
        invalid("its share of the recurrent state does not fit the model's");
}

// Checks one node against the description; records the tensors' uses and the scratch it needs.
void check_node(const ember_mod_model_desc &d, Program &pg, uint32_t i) {
    const ember_graph_node &n = pg.nodes[i];
    const char *name = ember_graph_op_name(n.op);
    if (!name) fail(EMBER_ERR_UNSUPPORTED, "cuda: op %u (node %u) is not supported by this backend", n.op, i);
    auto invalid = [&](const char *why) { fail(EMBER_ERR_INVALID_MODEL, "cuda: node %u (%s): %s", i, name, why); };
    auto need_buf = [&](int32_t b) {
        if (b < 0 || static_cast<uint32_t>(b) >= d.n_bufs) invalid("a buffer out of range");
    };
    // The tensor t (-1: none, allowed when optional), marked as read for `use`.
    auto tensor = [&](int32_t t, uint8_t use, bool required) -> const ember_mod_tensor * {
        if (t == -1 && !required) return nullptr;
        if (t < 0 || static_cast<uint32_t>(t) >= d.n_tensors) invalid("a tensor out of range");
        pg.tensor_use[static_cast<size_t>(t)] |= use;
        return &d.tensors[t];
    };
    auto n_out = [](const ember_mod_tensor &t) { return t.n_dims > 1 ? t.ne[1] : 1; };
    auto same_shape = [&](int32_t a, int32_t b) { return pg.width(a) == pg.width(b) && pg.bufs[a].rows == pg.bufs[b].rows; };
    auto layer_ok = [&] { return n.layer >= 0 && static_cast<uint32_t>(n.layer) < d.n_layer; };

    switch (n.op) {
    case EMBER_GRAPH_GET_ROWS: {
        need_buf(n.dst);
        const ember_mod_tensor *w = tensor(n.w, Program::kMatrix, true);
        if (pg.logits_rows(n.dst) || w->ne[0] != pg.width(n.dst)) invalid("the rows do not fit the buffer");
        // The batch's token ids are checked against n_vocab: the table must have that many rows.
        if (n_out(*w) < d.n_vocab) invalid("fewer rows than the vocabulary");
        break;
    }
    case EMBER_GRAPH_RMS_NORM: {
        need_buf(n.dst), need_buf(n.src);
        if (!same_shape(n.dst, n.src) || n.n == 0 || pg.width(n.dst) % n.n != 0) invalid("groups do not divide the rows");
        const ember_mod_tensor *w = tensor(n.w, Program::kVector, false);
        if (w && w->ne[0] != n.n) invalid("the weight is not of the group's size");
        break;
    }
    case EMBER_GRAPH_MATMUL: {
        need_buf(n.dst), need_buf(n.src);
        const ember_mod_tensor *w = tensor(n.w, Program::kMatrix, true);
        if (n.dst == n.src || pg.bufs[n.dst].rows != pg.bufs[n.src].rows || w->ne[0] != pg.width(n.src) ||
            n_out(*w) != pg.width(n.dst))
            invalid("the matrix does not map its input's rows to its output's");
        const ember_mod_tensor *b = tensor(n.b, Program::kVector, false);
        if (b && b->ne[0] != pg.width(n.dst)) invalid("the bias is not of the output's width");
        break;
    }
    case EMBER_GRAPH_ROPE:
    case EMBER_GRAPH_ROPE_YARN: {
        need_buf(n.dst);
        if (n.rope_mode != EMBER_GRAPH_ROPE_NORMAL && n.rope_mode != EMBER_GRAPH_ROPE_NEOX)
            fail(EMBER_ERR_UNSUPPORTED, "cuda: node %u (rope): rope mode %u is not supported (normal, NEOX)", i, n.rope_mode);
        if (pg.logits_rows(n.dst) || n.n_head == 0 || n.head_dim == 0 || pg.width(n.dst) != n.n_head * n.head_dim ||
            n.n_rot % 2 != 0 || n.n_rot > n.head_dim)
            invalid("heads or rotated dimensions do not fit the rows");
        const ember_mod_tensor *f = tensor(n.w, Program::kVector, false);
        if (f && f->ne[0] < n.n_rot / 2) invalid("fewer frequency factors than rotated pairs");
        pg.max_rot = std::max(pg.max_rot, n.n_rot);
        break;
    }
    case EMBER_GRAPH_KV_STORE:
        need_buf(n.src), need_buf(n.src2);
        if (!layer_ok()) invalid("a layer out of range");
        if (pg.logits_rows(n.src) || !same_shape(n.src, n.src2) || pg.width(n.src) > d.kv_width)
            invalid("rows are not the cache's K/V rows");
        break;
    case EMBER_GRAPH_ATTENTION:
    case EMBER_GRAPH_ATTENTION_EXT:
        need_buf(n.dst), need_buf(n.src);
        if (!layer_ok()) invalid("a layer out of range");
        if (n.op == EMBER_GRAPH_ATTENTION_EXT) {
            const ember_mod_tensor *sinks = tensor(n.w, Program::kVector, false);
            if (sinks && sinks->ne[0] != n.n_head) invalid("sinks are not one per query head");
            if (!(n.softcap >= 0) || n.window > INT32_MAX) invalid("a negative softcap or a window beyond positions");
            if (n.attn_local_chunk > INT32_MAX || n.attn_temp_floor > INT32_MAX) invalid("a local chunk or temperature floor beyond positions");
            if (n.attn_mask == EMBER_GRAPH_MASK_SEQUENCE) {
                // Both ways, a query's keys end at its sequence's last position: a local chunk (about the
                // query's own position) or a temperature has no meaning the backends agree on.
                if (n.attn_local_chunk > 0 || n.attn_temp_scale != 0)
                    fail(EMBER_ERR_UNSUPPORTED, "cuda: node %u (attention_ext): the bidirectional mask with a local chunk "
                         "or an attention temperature", i);
                pg.seq_mask = true;
            }
        }
        if (n.head_dim > static_cast<uint32_t>(kMaxHeadDim))
            fail(EMBER_ERR_UNSUPPORTED, "cuda: node %u (attention): head_dim %u (at most %d)", i, n.head_dim, kMaxHeadDim);
        if (n.n_head_kv == 0 || n.head_dim == 0 || n.n_head % n.n_head_kv != 0 || pg.logits_rows(n.dst) ||
            !same_shape(n.dst, n.src) || pg.width(n.src) != n.n_head * n.head_dim || n.n_head_kv * n.head_dim > d.kv_width ||
            ember_graph_kv_layer(&n) < 0 || ember_graph_kv_layer(&n) > n.layer)
            invalid("heads do not fit the rows or the cache");
        pg.max_attn_heads = std::max(pg.max_attn_heads, n.n_head);
        pg.max_head_dim = std::max(pg.max_head_dim, n.head_dim);
        break;
    case EMBER_GRAPH_ADD:
    case EMBER_GRAPH_SCALE:
        need_buf(n.dst), need_buf(n.src);
        if (!same_shape(n.dst, n.src)) invalid("the buffers' shapes differ");
        break;
    case EMBER_GRAPH_SOFTCAP:
        need_buf(n.dst), need_buf(n.src);
        if (!same_shape(n.dst, n.src)) invalid("the buffers' shapes differ");
        if (!(n.softcap > 0)) invalid("a cap that is not positive");
        break;
    case EMBER_GRAPH_MOE: check_moe(d, pg, i, tensor); break;
    case EMBER_GRAPH_COPY_COLS:
    case EMBER_GRAPH_SIGMOID_MUL:
    case EMBER_GRAPH_SSM_CONV:
    case EMBER_GRAPH_GATED_DELTA:
    case EMBER_GRAPH_SSM_SCAN:
    case EMBER_GRAPH_MUL: check_hybrid(d, pg, i, tensor); break;
    case EMBER_GRAPH_SWIGLU:
    case EMBER_GRAPH_GEGLU:
        need_buf(n.dst), need_buf(n.src), need_buf(n.src2);
        if (!same_shape(n.dst, n.src) || !same_shape(n.dst, n.src2)) invalid("the buffers' shapes differ");
        break;
    case EMBER_GRAPH_LAYER_NORM: {
        need_buf(n.dst), need_buf(n.src);
        if (!same_shape(n.dst, n.src)) invalid("the buffers' shapes differ");
        if (!(n.eps >= 0)) invalid("a negative epsilon");
        for (int32_t t : {n.w, n.b}) {
            const ember_mod_tensor *v = tensor(t, Program::kVector, false);
            if (v && (v->n_dims != 1 || v->ne[0] != pg.width(n.dst))) invalid("a weight or bias not of the row's width");
        }
        break;
    }
    case EMBER_GRAPH_GELU:
        need_buf(n.dst), need_buf(n.src);
        if (!same_shape(n.dst, n.src)) invalid("the buffers' shapes differ");
        break;
    case EMBER_GRAPH_ADD_POS_ROWS: {
        need_buf(n.dst);
        const ember_mod_tensor *t = tensor(n.w, Program::kMatrix, true);
        if (pg.logits_rows(n.dst) || (t->type != 0 && t->type != 1) || t->n_dims > 2 || t->ne[0] != pg.width(n.dst) ||
            n_out(*t) < 1 || n_out(*t) > INT32_MAX)
            invalid("the table is not F32 or F16 rows of the buffer's width, or the rows are not per token");
        const uint32_t rows = static_cast<uint32_t>(n_out(*t));
        pg.n_pos_rows = pg.n_pos_rows ? std::min(pg.n_pos_rows, rows) : rows;
        break;
    }
    case EMBER_GRAPH_GATHER_LOGITS:
        need_buf(n.dst), need_buf(n.src);
        if (!pg.logits_rows(n.dst) || pg.logits_rows(n.src) || pg.width(n.dst) != pg.width(n.src))
            invalid("not token rows into logits rows of the same width");
        break;
    default: break;
    }
}

} // namespace

ember_mod_tensor expert_matrix(const ember_mod_tensor &t, uint32_t e) {
    ember_mod_tensor m = t;
    m.n_dims = 2, m.ne[2] = 1;
    m.n_bytes = dtype_row_bytes(static_cast<DType>(t.type), static_cast<size_t>(t.ne[0])) * static_cast<size_t>(t.ne[1]);
    m.data = static_cast<const uint8_t *>(t.data) + e * m.n_bytes;
    return m;
}

Program program_of(const ember_mod_model_desc &d) {
    Program pg;
    pg.nodes = read_program(d, "cuda", kCudaOps, true);
    pg.n_vocab = d.n_vocab, pg.n_layer = d.n_layer, pg.kv_width = d.kv_width, pg.logits_buf = d.logits_buf;
    pg.bufs.assign(d.bufs, d.bufs + d.n_bufs);
    pg.tensor_use.assign(d.n_tensors, 0);
    // An older description without the field has no state.
    if (d.struct_size >= offsetof(ember_mod_model_desc, state_floats) + sizeof d.state_floats) pg.state_floats = d.state_floats;
    for (uint32_t i = 0; i < d.n_nodes; ++i) check_node(d, pg, i);
    pg.has_kv.assign(pg.n_layer, false);
    for (const ember_graph_node &n : pg.nodes)
        if (n.op == EMBER_GRAPH_KV_STORE) pg.has_kv[static_cast<size_t>(n.layer)] = true;  // layer checked above
    for (uint32_t i = 0; i < d.n_nodes; ++i) {
        const ember_graph_node &n = pg.nodes[i];
        if ((n.op == EMBER_GRAPH_ATTENTION || n.op == EMBER_GRAPH_ATTENTION_EXT) &&
            !pg.has_kv[static_cast<size_t>(ember_graph_kv_layer(&n))])
            fail(EMBER_ERR_INVALID_MODEL, "cuda: node %u (attention) reads layer %d, which stores no K/V rows", i,
                 ember_graph_kv_layer(&n));
    }
    for (uint32_t t = 0; t < d.n_tensors; ++t) {
        const ember_mod_tensor &ten = d.tensors[t];
        const char *tname = ten.name ? ten.name : "a tensor";
        if (pg.tensor_use[t] & Program::kMatrix) check_weight_type(ten, tname);
        if (pg.tensor_use[t] & Program::kExperts) check_weight_type(expert_matrix(ten, 0), tname);
        if ((pg.tensor_use[t] & Program::kVector) && ten.type != 0)
            fail(EMBER_ERR_UNSUPPORTED, "cuda: tensor '%s' is %s; norms, biases and rope factors must be F32", tname,
                 dtype_name(ten.type));
    }

    const FusionPlan plan = plan_fusions(pg.nodes, pg.logits_buf, FusionRules{kCudaFusions, nullptr, nullptr, {}});
    pg.how.resize(pg.nodes.size());
    int32_t table = -1;  // the angle table the last rope filled
    for (size_t i = 0; i < pg.nodes.size(); ++i) {
        NodeRun &h = pg.how[i];
        const FusedRun &r = plan.runs[plan.run_of[i]];
        h.share_input = plan.input[i] == InputUse::share;
        h.accumulate = r.fused && r.kind == Fusion::accumulate && r.lead == i;
        h.skip = plan.folded(i);
        if (plan.rope_table[i] >= 0) {
            h.new_angles = plan.rope_table[i] != table;
            table = plan.rope_table[i];
        }
    }
    return pg;
}

ContextSizes context_sizes(const Program &pg, const ember_mod_context_params &p) {
    if (p.n_blocks == 0 || p.block_size == 0 || p.n_batch == 0 || p.n_logits == 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cuda: n_blocks, block_size, n_batch and n_logits must be positive");
    if (p.kv_type != 1 && p.kv_type != 8 && p.kv_type != 2)
        fail(EMBER_ERR_UNSUPPORTED, "cuda: KV cache type %u (F16, Q8_0 or Q4_0)", p.kv_type);
    ContextSizes z;
    z.kv_row_bytes = kv_cache_row_bytes(p.kv_type, pg.kv_width);
    if (z.kv_row_bytes == 0)
        fail(EMBER_ERR_UNSUPPORTED, "cuda: a quantized KV cache needs K/V rows of a multiple of 32 values (this model: %u)",
             pg.kv_width);
    z.n_window_blocks = context_window_blocks(p);
    z.windowed = window_pool_layers(pg.nodes, pg.n_layer, z.n_window_blocks);
    for (uint32_t il = 0; il < pg.n_layer; ++il) {
        z.kv_layer_off.push_back(z.kv_cache_bytes);
        if (!pg.has_kv[il]) continue;  // a recurrent layer: its state is in the state slots
        const uint32_t blocks = z.windowed[il] ? z.n_window_blocks : p.n_blocks;
        z.kv_cache_bytes += align_up(static_cast<size_t>(blocks) * p.block_size * z.kv_row_bytes);
    }
    z.kv_bytes = 2 * z.kv_cache_bytes;
    if (pg.state_floats > 0) {
        z.n_state_slots = p.struct_size >= offsetof(ember_mod_context_params, n_state_slots) + sizeof p.n_state_slots
                              ? p.n_state_slots : 0;
        if (z.n_state_slots == 0)
            fail(EMBER_ERR_INVALID_ARGUMENT, "cuda: a model with recurrent layers needs state slots in its context");
        z.state_bytes = align_up(size_t{z.n_state_slots} * pg.state_floats * sizeof(float));
    }
    z.rows = std::max(p.n_batch, p.n_logits);
    z.io_words = step_io_words(z.rows, p.n_logits, z.n_window_blocks > 0, z.n_state_slots > 0, pg.seq_mask);
    // Groups of at least 16 tokens (a whole tile of the tiled kernel), more while the partials stay near
    // 64k rows (34 MB at 128-wide heads); a 128k-token context's 2048 splits take 16 x heads x 2048 rows.
    z.attn_splits = splits_for(static_cast<int32_t>(std::min<uint64_t>(uint64_t{p.n_blocks} * p.block_size, INT32_MAX)),
                               kAttnSplitKeys);
    const size_t per_token = size_t{std::max(pg.max_attn_heads, 1u)} * static_cast<size_t>(z.attn_splits);
    z.attn_group = static_cast<uint32_t>(std::min<size_t>(p.n_batch, std::max<size_t>(16, 65536 / per_token)));
    z.partial_rows = per_token * z.attn_group;
    auto rows_of = [&](int32_t b) -> size_t { return pg.logits_rows(b) ? p.n_logits : p.n_batch; };
    size_t act = 0;  // values of the largest MATMUL input of a pass (MOE's products: up to every row)
    for (const ember_graph_node &n : pg.nodes)
        if (n.op == EMBER_GRAPH_MATMUL) act = std::max(act, rows_of(n.src) * pg.width(n.src));
    act = std::max(act, z.rows * std::max(pg.moe_in, pg.moe_ff));
    auto take = [&](size_t bytes) {
        const size_t at = z.total;
        z.total += align_up(bytes);
        return at;
    };
    const size_t f4 = sizeof(float), half = pg.max_rot / 2 + 1;
    for (size_t b = 0; b < pg.bufs.size(); ++b) z.buf_offset.push_back(take(rows_of(static_cast<int32_t>(b)) * pg.bufs[b].width * f4));
    z.act_codes = take(act);
    z.act_scales = take((act / 32 + 1) * 2 * f4);
    z.act16 = take(act * 2);
    z.rope_cos = take(size_t{p.n_batch} * half * f4);
    z.rope_sin = take(size_t{p.n_batch} * half * f4);
    z.partials = take(z.partial_rows * (pg.max_head_dim + 2) * f4);
    z.io = take(z.io_words * sizeof(int32_t));
    if (pg.has_moe()) {
        z.moe_slots = z.rows * pg.moe_used;
        z.moe_xin = take(z.rows * pg.moe_in * f4);
        z.moe_g = take(z.rows * pg.moe_ff * f4), z.moe_u = take(z.rows * pg.moe_ff * f4);
        z.moe_outs = take(z.moe_slots * pg.moe_out * f4);
        z.moe_token = take(z.moe_slots * 4), z.moe_pos = take(z.moe_slots * 4), z.moe_gate = take(z.moe_slots * 4);
        z.moe_row_gate = take(z.moe_slots * 4);
    }
    return z;
}

} // namespace ember::cu
