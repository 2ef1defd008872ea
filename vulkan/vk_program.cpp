// vk_program.cpp — checking a model's program against what the shaders run, and planning its steps
// (see vk_program.hpp).
#include "vk_program.hpp"

#include "backend/fusion_plan.hpp"
#include "backend/program_read.hpp"
#include "backend/rope_math.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "backend/backend.hpp"
#include "vk_exec.hpp"
#include "vk_weights.hpp"

#include <algorithm>
#include <cmath>

namespace ember::vk {

namespace {

bool quantized_type(uint32_t t) {
    return t != static_cast<uint32_t>(DType::F32) && t != static_cast<uint32_t>(DType::F16);
}

// Every op of graph.h: this backend runs them all (read_program refuses any other).
constexpr uint32_t kVulkanOps[] = {EMBER_GRAPH_GET_ROWS,  EMBER_GRAPH_RMS_NORM,     EMBER_GRAPH_MATMUL,
                                   EMBER_GRAPH_ROPE,      EMBER_GRAPH_KV_STORE,     EMBER_GRAPH_ATTENTION,
                                   EMBER_GRAPH_ADD,       EMBER_GRAPH_SWIGLU,       EMBER_GRAPH_GATHER_LOGITS,
                                   EMBER_GRAPH_SCALE,     EMBER_GRAPH_SOFTCAP,      EMBER_GRAPH_GEGLU,
                                   EMBER_GRAPH_ATTENTION_EXT, EMBER_GRAPH_ROPE_YARN, EMBER_GRAPH_MOE,
                                   EMBER_GRAPH_COPY_COLS, EMBER_GRAPH_SIGMOID_MUL, EMBER_GRAPH_SSM_CONV,
                                   EMBER_GRAPH_GATED_DELTA, EMBER_GRAPH_INPUT_ROWS,
                                   EMBER_GRAPH_SSM_SCAN, EMBER_GRAPH_MUL,
                                   EMBER_GRAPH_LAYER_NORM, EMBER_GRAPH_GELU, EMBER_GRAPH_ADD_POS_ROWS};

// Checks one node's buffers, tensors and options (the shapes the shaders assume).
class Checker {
public:
    Checker(const ember_mod_model_desc &d, const Program &p) : d_(d), p_(p) {}

    void node(uint32_t i, const ember_graph_node &n) {
        i_ = i;
        name_ = ember_graph_op_name(n.op);
        if (!name_) fail(EMBER_ERR_UNSUPPORTED, "vulkan: op %u (node %u) is not supported by this backend", n.op, i);
        if (n.op != EMBER_GRAPH_KV_STORE) buf(n.dst);
        switch (n.op) {
        case EMBER_GRAPH_GET_ROWS:
            expect(p_.bufs[n.dst].rows == EMBER_GRAPH_ROWS_TOKENS, "its output is not per token");
            matrix(n.w, p_.width(n.dst), 0);
            break;
        case EMBER_GRAPH_INPUT_ROWS:
            expect(p_.bufs[n.dst].rows == EMBER_GRAPH_ROWS_TOKENS, "its output is not per token");
            break;
        case EMBER_GRAPH_RMS_NORM:
            same(n.src, n.dst);
            expect(n.n > 0 && p_.width(n.dst) % n.n == 0, "groups do not divide the row");
            vector(n.w, n.n);
            break;
        case EMBER_GRAPH_LAYER_NORM:
            same(n.src, n.dst);
            vector(n.w, p_.width(n.dst)), vector(n.b, p_.width(n.dst));
            break;
        case EMBER_GRAPH_GELU: same(n.src, n.dst); break;
        case EMBER_GRAPH_ADD_POS_ROWS:
            expect(p_.bufs[n.dst].rows == EMBER_GRAPH_ROWS_TOKENS, "its output is not per token");
            matrix(n.w, p_.width(n.dst), 0);
            if (d_.tensors[n.w].type != static_cast<uint32_t>(DType::F32))
                fail(EMBER_ERR_UNSUPPORTED, "vulkan: position table '%s' of type %s (node %u; F32 only)",
                     d_.tensors[n.w].name ? d_.tensors[n.w].name : "?", dtype_name(d_.tensors[n.w].type), i);
            break;
        case EMBER_GRAPH_MATMUL:
            buf(n.src);
            expect(n.src != n.dst, "writes its input");
            expect(p_.bufs[n.src].rows == p_.bufs[n.dst].rows, "maps rows of one kind to another");
            matrix(n.w, p_.width(n.src), p_.width(n.dst));
            vector(n.b, p_.width(n.dst));
            if (quantized_type(d_.tensors[n.w].type))
                expect(p_.width(n.src) % 32 == 0, "quantized weights need rows of whole blocks of 32");
            break;
        case EMBER_GRAPH_ROPE:
        case EMBER_GRAPH_ROPE_YARN:
            if (n.rope_mode != EMBER_GRAPH_ROPE_NORMAL && n.rope_mode != EMBER_GRAPH_ROPE_NEOX)
                fail(EMBER_ERR_UNSUPPORTED, "vulkan: rope mode %u (node %u) is not supported (normal, neox)", n.rope_mode, i);
            expect(p_.bufs[n.dst].rows == EMBER_GRAPH_ROWS_TOKENS, "rotates rows that are not per token");
            expect(n.head_dim > 0 && uint64_t{n.n_head} * n.head_dim == p_.width(n.dst), "heads do not fill the row");
            expect(n.n_rot % 2 == 0 && n.n_rot <= n.head_dim, "rotates an odd count or more than a head");
            vector(n.w, n.n_rot / 2);
            break;
        case EMBER_GRAPH_KV_STORE:
            buf(n.src), buf(n.src2);
            layer(n);
            expect(p_.width(n.src) <= d_.kv_width && p_.width(n.src2) == p_.width(n.src), "rows wider than the cache's");
            expect(p_.bufs[n.src].rows == EMBER_GRAPH_ROWS_TOKENS && p_.bufs[n.src2].rows == EMBER_GRAPH_ROWS_TOKENS,
                   "stores rows that are not per token");
            break;
        case EMBER_GRAPH_ATTENTION:
        case EMBER_GRAPH_ATTENTION_EXT:
            same(n.src, n.dst);
            layer(n);
            expect(p_.bufs[n.dst].rows == EMBER_GRAPH_ROWS_TOKENS, "queries are not per token");
            if (n.head_dim == 0 || n.head_dim > 512)
                fail(EMBER_ERR_UNSUPPORTED, "vulkan: attention (node %u) of head dimension %u (1 to 512)", i, n.head_dim);
            expect(n.n_head_kv > 0 && n.n_head % n.n_head_kv == 0, "query heads are not a multiple of the KV heads");
            expect(uint64_t{n.n_head} * n.head_dim == p_.width(n.dst), "heads do not fill the row");
            expect(uint64_t{n.n_head_kv} * n.head_dim <= d_.kv_width, "KV heads wider than the cache's row");
            expect(ember_graph_kv_layer(&n) >= 0 && ember_graph_kv_layer(&n) <= n.layer, "reads a later layer's cache");
            if (n.op == EMBER_GRAPH_ATTENTION_EXT) {
                vector(n.w, n.n_head);  // the sinks
                expect(n.softcap >= 0, "a negative softcap");
                // Under the SEQUENCE mask attention.comp reads the sequence's last position as the query's.
                expect(n.attn_mask != EMBER_GRAPH_MASK_SEQUENCE || (n.attn_temp_scale == 0 && n.attn_local_chunk == 0),
                       "attends both ways with a temperature or local chunks");
            }
            break;
        case EMBER_GRAPH_ADD:
        case EMBER_GRAPH_SCALE: same(n.src, n.dst); break;
        case EMBER_GRAPH_SOFTCAP:
            same(n.src, n.dst);
            expect(n.softcap > 0, "a cap that is not positive");
            break;
        case EMBER_GRAPH_SWIGLU:
        case EMBER_GRAPH_GEGLU:
        case EMBER_GRAPH_MUL:
            same(n.src, n.dst), same(n.src2, n.dst);
            break;
        case EMBER_GRAPH_MOE: moe(n); break;
        case EMBER_GRAPH_COPY_COLS:
            buf(n.src);
            expect(n.src != n.dst, "writes its input");
            expect(p_.bufs[n.src].rows == p_.bufs[n.dst].rows, "maps rows of one kind to another");
            expect(n.n_head > 0 && p_.width(n.src) % n.n_head == 0 && uint64_t{n.n} + n.head_dim <= p_.width(n.src) / n.n_head &&
                       uint64_t{n.n_rot} + uint64_t{n.n_head} * n.head_dim <= p_.width(n.dst),
                   "its groups do not fit the buffers");
            break;
        case EMBER_GRAPH_SIGMOID_MUL:
            same(n.src, n.dst), buf(n.src2);
            expect(p_.bufs[n.src2].rows == p_.bufs[n.dst].rows &&
                       (p_.width(n.src2) == p_.width(n.dst) || (p_.width(n.src2) == 1 && n.src2 != n.dst)),
                   "gates of another width than the row's or one");
            break;
        case EMBER_GRAPH_SSM_CONV: {
            same(n.src, n.dst);
            expect(n.src != n.dst, "writes its input");
            const ember_mod_tensor *k = tensor_at(n.w);
            expect(k && k->type == static_cast<uint32_t>(DType::F32) && k->n_dims == 2 && k->ne[0] >= 1 &&
                       k->ne[1] == p_.width(n.src),
                   "the kernel must be F32 [K, channels]");
            if (k->ne[0] > kConvMaxKernel)
                fail(EMBER_ERR_UNSUPPORTED, "vulkan: ssm_conv (node %u) of %lld taps (at most %u)", i,
                     static_cast<long long>(k->ne[0]), kConvMaxKernel);
            expect(n.n <= EMBER_GRAPH_SSM_CONV_LINEAR, "an unknown activation");
            if (n.b >= 0) vector(n.b, p_.width(n.src));
            recurrent(n, static_cast<uint64_t>(k->ne[0] - 1) * p_.width(n.src));
            break;
        }
        case EMBER_GRAPH_GATED_DELTA:
            buf(n.src), buf(n.src2), buf(n.src3);
            expect(n.src != n.dst && n.src2 != n.dst && n.src3 != n.dst, "writes its input");
            expect(n.n_head > 0 && n.n_head_kv > 0 && n.n_head % n.n_head_kv == 0 && n.head_dim > 0 && n.n <= 1,
                   "value heads are not a multiple of the key heads, or an unknown key head mapping");
            expect(p_.width(n.src) == uint64_t{2 * n.n_head_kv + n.n_head} * n.head_dim &&
                       p_.width(n.dst) == uint64_t{n.n_head} * n.head_dim && p_.width(n.src2) == n.n_head &&
                       p_.width(n.src3) == n.n_head,
                   "rows of q, k, v, a, b or the output of the wrong width");
            for (int32_t b : {n.src, n.src2, n.src3})
                expect(p_.bufs[b].rows == EMBER_GRAPH_ROWS_TOKENS, "rows that are not per token");
            expect(p_.bufs[n.dst].rows == EMBER_GRAPH_ROWS_TOKENS, "rows that are not per token");
            expect(tensor_at(n.w) && tensor_at(n.w2), "no dt or decay vector");
            vector(n.w, n.n_head), vector(n.w2, n.n_head);
            if (n.head_dim > kDeltaMaxHeadDim)
                fail(EMBER_ERR_UNSUPPORTED, "vulkan: gated_delta (node %u) of head dimension %u (at most %u)", i, n.head_dim,
                     kDeltaMaxHeadDim);
            recurrent(n, uint64_t{n.n_head} * n.head_dim * n.head_dim);
            break;
        case EMBER_GRAPH_SSM_SCAN:
            buf(n.src), buf(n.src2);
            expect(n.src != n.dst && n.src2 != n.dst, "writes its input");
            expect(n.n_head > 0 && n.n_head_kv > 0 && n.n_head % n.n_head_kv == 0 && n.head_dim > 0 && n.n > 0,
                   "heads are not a multiple of the groups");
            expect(p_.width(n.src) == uint64_t{n.n_head} * n.head_dim + 2ull * n.n_head_kv * n.n &&
                       p_.width(n.dst) == uint64_t{n.n_head} * n.head_dim && p_.width(n.src2) == n.n_head,
                   "rows of x B C, dt or the output of the wrong width");
            for (int32_t b : {n.src, n.src2})
                expect(p_.bufs[b].rows == EMBER_GRAPH_ROWS_TOKENS, "rows that are not per token");
            expect(tensor_at(n.w) && tensor_at(n.w2) && tensor_at(n.b), "no A, D or dt bias vector");
            vector(n.w, n.n_head), vector(n.w2, n.n_head), vector(n.b, n.n_head);
            if (n.head_dim > kScanMaxHeadDim || n.n > kScanMaxState)
                fail(EMBER_ERR_UNSUPPORTED, "vulkan: ssm_scan (node %u) of head dimension %u, state %u (at most %u, %u)", i,
                     n.head_dim, n.n, kScanMaxHeadDim, kScanMaxState);
            recurrent(n, uint64_t{n.n_head} * n.head_dim * n.n);
            break;
        case EMBER_GRAPH_GATHER_LOGITS:
            buf(n.src);
            expect(p_.bufs[n.src].rows == EMBER_GRAPH_ROWS_TOKENS && p_.bufs[n.dst].rows == EMBER_GRAPH_ROWS_LOGITS,
                   "does not gather token rows into logits rows");
            expect(p_.width(n.src) == p_.width(n.dst), "rows of different widths");
            break;
        }
    }

    // Every tensor is uploaded: matrices (and MOE's 3-D stacks of matrices) of a type the shaders read,
    // vectors of F32.
    static void tensor(const ember_mod_tensor &t) {
        const char *name = t.name ? t.name : "?";
        if (t.n_dims < 1 || t.n_dims > 3 || t.ne[0] <= 0 || t.ne[0] > 0xffffffffLL ||
            (t.n_dims >= 2 && (t.ne[1] <= 0 || t.ne[1] > 0xffffffffLL)) ||
            (t.n_dims == 3 && (t.ne[2] <= 0 || t.ne[2] > 0xffffffffLL)))
            fail(EMBER_ERR_UNSUPPORTED, "vulkan: tensor '%s' of %d dimensions is not supported", name, t.n_dims);
        const DType type = static_cast<DType>(t.type);
        if (t.n_dims == 1 && type != DType::F32)
            fail(EMBER_ERR_UNSUPPORTED, "vulkan: vector '%s' of type %s (vectors must be F32)", name, dtype_name(t.type));
        if (!weight_type_supported(type))
            fail(EMBER_ERR_UNSUPPORTED, "vulkan: tensor '%s' of type %s is not supported yet", name, dtype_name(t.type));
        if (t.ne[0] % dtype_info(type).block_size != 0)
            fail(EMBER_ERR_INVALID_MODEL, "vulkan: tensor '%s' rows are not whole %s blocks", name, dtype_name(t.type));
    }

private:
    // A node with recurrent state: per token rows, its share of the model's state (graph.h).
    void recurrent(const ember_graph_node &n, uint64_t floats) const {
        expect(p_.bufs[n.dst].rows == EMBER_GRAPH_ROWS_TOKENS, "rows that are not per token");
        expect(n.state_size == floats && uint64_t{n.state_offset} + floats <= p_.state_floats,
               "its share of the recurrent state does not fit the model's");
    }
    // MOE (graph.h): expert stacks [n_in, n_ff, E], [n_in, n_ff, E], [n_ff, n_out, E]; biases F32 [n_ff, E],
    // [n_ff, E], [n_out, E]; router logits of E per row.
    void moe(const ember_graph_node &n) const {
        buf(n.src), buf(n.src2);
        expect(n.src != n.dst && n.src2 != n.dst, "writes its input");
        expect(p_.bufs[n.src].rows == p_.bufs[n.dst].rows && p_.bufs[n.src2].rows == p_.bufs[n.dst].rows,
               "maps rows of one kind to another");
        expect(n.n_expert > 0 && n.n_expert_used > 0 && n.n_expert_used <= n.n_expert && p_.width(n.src2) == n.n_expert,
               "the router's width or the number of chosen experts");
        const uint32_t n_in = p_.width(n.src), n_out = p_.width(n.dst);
        const ember_mod_tensor *g = tensor_at(n.w), *u = tensor_at(n.w2), *dn = tensor_at(n.w3);
        expect(g && u && dn, "an expert tensor is missing");
        const int64_t n_ff = g->ne[1];
        for (const ember_mod_tensor *t : {g, u})
            expect(t->n_dims == 3 && t->ne[0] == n_in && t->ne[1] == n_ff && t->ne[2] == n.n_expert,
                   "gate/up experts of the wrong shape");
        expect(dn->n_dims == 3 && dn->ne[0] == n_ff && dn->ne[1] == n_out && dn->ne[2] == n.n_expert,
               "down experts of the wrong shape");
        const int32_t biases[3] = {n.b, n.b2, n.b3};
        const int64_t widths[3] = {n_ff, n_ff, n_out};
        for (int k = 0; k < 3; ++k) {
            const ember_mod_tensor *b = tensor_at(biases[k]);
            expect(!b || (b->type == static_cast<uint32_t>(DType::F32) && b->ne[0] == widths[k] &&
                          (b->n_dims == 2 ? b->ne[1] : 1) == n.n_expert),
                   "an expert bias of the wrong shape or type");
        }
        for (const ember_mod_tensor *t : {g, u})
            if (quantized_type(t->type)) expect(n_in % 32 == 0, "quantized experts need rows of whole blocks of 32");
        if (quantized_type(dn->type)) expect(n_ff % 32 == 0, "quantized experts need rows of whole blocks of 32");
        expect(n.sel_bias < 0 || n.moe_gating == EMBER_GRAPH_MOE_GATE_SIGMOID, "a choice bias with a gating that takes none");
        vector(n.sel_bias, n.n_expert);
        if (n.moe_act > EMBER_GRAPH_ACT_SWIGLU_OAI || n.moe_gating > EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT)
            fail(EMBER_ERR_UNSUPPORTED, "vulkan: moe (node %u) of activation %u, gating %u is not supported", i_,
                 n.moe_act, n.moe_gating);
    }
    void expect(bool ok, const char *what) const {
        if (!ok) fail(EMBER_ERR_INVALID_MODEL, "vulkan: node %u (%s): %s", i_, name_, what);
    }
    void buf(int32_t b) const { expect(b >= 0 && static_cast<uint32_t>(b) < p_.bufs.size(), "refers to a missing buffer"); }
    void same(int32_t a, int32_t b) const {
        buf(a), buf(b);
        expect(p_.bufs[a].width == p_.bufs[b].width && p_.bufs[a].rows == p_.bufs[b].rows, "buffers of different shapes");
    }
    void layer(const ember_graph_node &n) const {
        expect(n.layer >= 0 && static_cast<uint32_t>(n.layer) < d_.n_layer, "a layer outside the cache");
    }
    const ember_mod_tensor *tensor_at(int32_t t) const {
        expect(t >= -1 && t < static_cast<int32_t>(d_.n_tensors), "refers to a missing tensor");
        return t < 0 ? nullptr : &d_.tensors[t];
    }
    // n_out 0: any.
    void matrix(int32_t t, uint32_t n_in, uint32_t n_out) const {
        const ember_mod_tensor *m = tensor_at(t);
        expect(m && m->n_dims == 2 && m->ne[0] == n_in && (n_out == 0 || m->ne[1] == n_out), "a matrix of the wrong shape");
    }
    // Optional (-1): an F32 vector of n.
    void vector(int32_t t, uint32_t n) const {
        const ember_mod_tensor *v = tensor_at(t);
        expect(!v || (v->n_dims == 1 && v->ne[0] == n), "a vector of the wrong length");
    }

    const ember_mod_model_desc &d_;
    const Program &p_;
    uint32_t i_ = 0;
    const char *name_ = "";
};

// The fusions vk_model.cpp records (backend/fusion_plan.hpp): a product accumulated into the residual
// (matmul.comp's y + (W·x + b)), the norm of the gathered logits rows reading the token rows by index
// (rmsnorm.comp's rows_off), and quantized products reusing the 8-bit copy of their input made for the last
// quantized product of that buffer while it holds (MOE's expert products quantize into the same scratch).
constexpr Fusion kVulkanFusions[] = {Fusion::accumulate, Fusion::gathered_norm, Fusion::shared_input_held};
constexpr uint32_t kScratchOps[] = {EMBER_GRAPH_MOE};

bool prepares_input(const ember_graph_node &n, const void *desc) {
    return quantized_type(static_cast<const ember_mod_model_desc *>(desc)->tensors[n.w].type);
}

// Rope n's table (made for the first rope of each of the plan's tables).
RopeSet rope_set(const ember_mod_model_desc &d, const ember_graph_node &n) {
    RopeScaling y;
    if (n.op == EMBER_GRAPH_ROPE_YARN) {
        y.ext_factor = n.rope_ext_factor, y.attn_factor = n.rope_attn_factor, y.beta_fast = n.rope_beta_fast;
        y.beta_slow = n.rope_beta_slow, y.n_ctx_orig = n.rope_n_ctx_orig;
    }
    RopeSet r;
    r.n_rot = n.n_rot, r.theta = n.rope_theta, r.freq_scale = n.rope_freq_scale, r.factors = n.w, r.scaling = y;
    r.freq = rope_freq(n.n_rot, n.rope_theta, n.rope_freq_scale,
                       n.w >= 0 ? static_cast<const float *>(d.tensors[n.w].data) : nullptr, y);
    r.mscale = rope_mscale(n.rope_freq_scale, y);
    return r;
}

void plan_steps(Program &p, const ember_mod_model_desc &d) {
    const FusionPlan plan = plan_fusions(p.nodes, p.logits_buf, FusionRules{kVulkanFusions, prepares_input, &d, kScratchOps});
    for (const FusedRun &r : plan.runs) {
        const ember_graph_node &n = p.nodes[r.lead];
        Step s;
        s.node = r.lead, s.layer = r.layer, s.src = r.src, s.dst = r.dst;
        s.accumulate = r.fused && r.kind == Fusion::accumulate;
        s.gathered = r.fused && r.kind == Fusion::gathered_norm;
        switch (n.op) {
        case EMBER_GRAPH_MATMUL:
            s.quantize = plan.input[r.lead] == InputUse::prepare;
            if (plan.input[r.lead] != InputUse::none) {
                uint32_t &w = p.quant_width[p.bufs[n.src].rows];
                w = std::max(w, p.width(n.src));
            }
            break;
        case EMBER_GRAPH_ROPE:
        case EMBER_GRAPH_ROPE_YARN:
            if (plan.rope_table[r.lead] < 0) continue;  // rotates nothing
            s.rope = static_cast<uint32_t>(plan.rope_table[r.lead]);
            if (s.rope == p.ropes.size()) p.ropes.push_back(rope_set(d, n));
            break;
        case EMBER_GRAPH_MOE: {
            const uint32_t n_in = p.width(n.src), n_ff = static_cast<uint32_t>(d.tensors[n.w].ne[1]);
            uint32_t &w = p.quant_width[p.bufs[n.src].rows];
            w = std::max({w, n_in, n_ff});
            p.moe_experts = std::max(p.moe_experts, n.n_expert), p.moe_used = std::max(p.moe_used, n.n_expert_used);
            p.moe_in = std::max(p.moe_in, n_in), p.moe_ff = std::max(p.moe_ff, n_ff);
            p.moe_out = std::max(p.moe_out, p.width(n.dst));
            break;
        }
        case EMBER_GRAPH_GET_ROWS:
            p.n_token_ids = std::min(p.n_token_ids, static_cast<uint32_t>(d.tensors[n.w].ne[1]));
            break;
        case EMBER_GRAPH_INPUT_ROWS:
            // The batch has one set of input rows: every such node reads them whole.
            if (p.input_width && p.input_width != p.width(n.dst)) fail(EMBER_ERR_UNSUPPORTED, "vulkan: input rows of two widths");
            p.input_width = p.width(n.dst);
            break;
        default: break;
        }
        p.steps.push_back(s);
    }
    p.buf_used.assign(p.bufs.size(), false);
    p.buf_used[static_cast<size_t>(p.logits_buf)] = true;
    if (p.hidden_buf >= 0) p.buf_used[static_cast<size_t>(p.hidden_buf)] = true;
    for (const Step &s : p.steps) {
        const ember_graph_node &n = p.nodes[s.node];
        for (int32_t b : {s.src, s.dst, n.src2, n.op == EMBER_GRAPH_GATED_DELTA ? n.src3 : -1})
            if (b >= 0) p.buf_used[static_cast<size_t>(b)] = true;
    }
}

} // namespace

std::vector<double> rope_freq(uint32_t n_rot, float theta, float freq_scale, const float *factors, const RopeScaling &y) {
    // graph.h's ROPE_YARN frequencies, as every backend forms them (backend/rope_math.hpp).
    const RopeYarn yy{y.ext_factor, y.attn_factor, y.beta_fast, y.beta_slow, y.n_ctx_orig};
    const YarnRamp ramp = y.ext_factor != 0 ? yarn_ramp(static_cast<int>(n_rot), theta, yy) : YarnRamp{0, 0};
    std::vector<double> freq;
    for (uint32_t i = 0; i < n_rot / 2; ++i)
        freq.push_back(yarn_freq(static_cast<int>(i), static_cast<int>(n_rot), theta, freq_scale, factors ? factors[i] : 1.0f, yy, ramp));
    return freq;
}

double rope_mscale(float freq_scale, const RopeScaling &y) {
    return yarn_mscale(freq_scale, RopeYarn{y.ext_factor, y.attn_factor, y.beta_fast, y.beta_slow, y.n_ctx_orig});
}

void rope_table(const std::vector<double> &freq, const int32_t *pos, uint32_t n, float *cs, double mscale) {
    const size_t half = freq.size(), n_rot = 2 * half;
    for (uint32_t t = 0; t < n; ++t)
        for (size_t i = 0; i < half; ++i) {
            const double a = static_cast<double>(pos[t]) * freq[i];
            cs[t * n_rot + i] = static_cast<float>(std::cos(a) * mscale);
            cs[t * n_rot + half + i] = static_cast<float>(std::sin(a) * mscale);
        }
}

Program plan_program(const ember_mod_model_desc &d) {
    Program p;
    p.nodes = read_program(d, "vulkan", kVulkanOps, true);   // with ATTENTION_EXT's SEQUENCE mask (vk_model.cpp)
    p.n_vocab = d.n_vocab, p.n_layer = d.n_layer, p.kv_width = d.kv_width, p.logits_buf = d.logits_buf;
    p.hidden_buf = desc_hidden_buf(d);
    p.n_token_ids = UINT32_MAX;
    p.bufs.assign(d.bufs, d.bufs + d.n_bufs);
    p.state_floats = static_cast<uint32_t>(state_bytes(d) / sizeof(float));
    p.has_kv = kv_layers(d);
    for (uint32_t i = 0; i < d.n_tensors; ++i) Checker::tensor(d.tensors[i]);
    Checker check(d, p);
    for (uint32_t i = 0; i < d.n_nodes; ++i) check.node(i, p.nodes[i]);
    if (d.n_layer == 0 || d.kv_width == 0) fail(EMBER_ERR_INVALID_MODEL, "vulkan: a program without a KV cache");
    plan_steps(p, d);
    return p;
}

} // namespace ember::vk
