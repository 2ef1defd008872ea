// arch_granitehybrid.cpp — IBM Granite 4 (H): Mamba-2 layers, whose memory per sequence is a convolution
// window and a state per head, beside attention layers (those of attention.head_count_kv nonzero, one
// count per layer), with Granite's multipliers (embeddings times embedding_scale, each block's output
// times residual_scale, scores times attention.scale, logits divided by logit_scale), rope unless
// rope.scaling.finetuned is false (the H models: no position embedding at all), and a dense SwiGLU FFN or
// experts (softmax over the chosen, of feed_forward_length each) plus an ungated shared expert
// (expert_shared_feed_forward_length).
//
// Mamba-2 layer: ssm_in gives z (inner), x B C (inner + 2 groups of the state size) and dt (one per head)
// as three row ranges of one product; x B C pass a causal convolution (ssm_conv1d, its bias) and SiLU;
// graph.h's SSM_SCAN runs the selective scan (ssm_a, ssm_d, ssm_dt.bias); its output times silu(z) is
// RMS-normed per group of inner / groups (ssm_norm's rows), then ssm_out.
#include "model/arch.hpp"

#include "core/error.hpp"

#include <cmath>
#include <vector>

namespace ember {

namespace {

struct MambaShape {
    uint32_t conv = 0, inner = 0, state = 0, heads = 0, groups = 0;
    uint32_t head_dim() const { return inner / heads; }
    uint32_t conv_dim() const { return inner + 2 * groups * state; }
};

MambaShape read_mamba_shape(ArchBuilder &b) {
    auto bad = [&](const char *key, const char *why) {
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.%s' %s", b.arch().c_str(), key, why);
    };
    MambaShape s;
    s.conv = b.u32("ssm.conv_kernel", std::nullopt);
    s.inner = b.u32("ssm.inner_size", std::nullopt);
    s.state = b.u32("ssm.state_size", std::nullopt);
    s.heads = b.u32("ssm.time_step_rank", std::nullopt);
    s.groups = b.u32("ssm.group_count", std::nullopt);
    if (s.conv == 0 || s.conv > 64) bad("ssm.conv_kernel", "must be 1..64");
    if (s.state == 0 || s.state > 1024) bad("ssm.state_size", "must be 1..1024");
    if (s.heads == 0 || s.heads > 4096) bad("ssm.time_step_rank", "(the heads) must be 1..4096");
    if (s.inner == 0 || s.inner > (1u << 20) || s.inner % s.heads != 0)
        bad("ssm.inner_size", "must be a positive multiple of ssm.time_step_rank");
    if (s.groups == 0 || s.heads % s.groups != 0) bad("ssm.group_count", "must divide ssm.time_step_rank");
    return s;
}

// The layers' activation buffers, made once and shared by every layer (-1: a kind of layer the model lacks).
struct Bufs {
    int32_t z = -1, xbc = -1, dt = -1, conv = -1, y = -1, part = -1;   // Mamba-2
    int32_t q = -1, k = -1, v = -1, attn = -1;                         // attention
    int32_t router = -1, sgate = -1, sup = -1, shared = -1;            // experts
};

void mamba2_layer(ArchBuilder &b, const std::string &p, const MambaShape &s, int32_t xn, int32_t out, float eps,
                  const Bufs &u) {
    const uint32_t d = b.hp().n_embd, I = s.inner, C = s.conv_dim(), H = s.heads, per = I / s.groups;
    const std::string in = p + "ssm_in.weight";
    const int64_t total = int64_t{I} + C + H;
    if (const TensorRef *t = b.find(in); t && t->ne[1] != total)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.ssm.inner_size' (%u), 'ssm.group_count' (%u), 'ssm.state_size' (%u) and "
             "'ssm.time_step_rank' (%u) give '%s' %lld rows; it has %lld", b.arch().c_str(), I, s.groups, s.state, H,
             in.c_str(), (long long)total, (long long)t->ne[1]);
    const int32_t z = u.z, xbc = u.xbc, dt = u.dt, conv = u.conv, y = u.y;
    // z, x B C and dt are row ranges of ssm_in: products of one input (the CPU quantizes it once for all).
    b.matmul(z, xn, b.matrix_rows(in, d, total, 0, I));
    b.matmul(xbc, xn, b.matrix_rows(in, d, total, I, C));
    b.matmul(dt, xn, b.matrix_rows(in, d, total, int64_t{I} + C, H));
    b.ssm_conv(conv, xbc, b.f32_matrix(p + "ssm_conv1d.weight", s.conv, C), true, b.vector(p + "ssm_conv1d.bias", C, false));
    ArchBuilder::Scan sc;
    sc.n_head = H, sc.head_dim = s.head_dim(), sc.n_group = s.groups, sc.d_state = s.state;
    sc.A = b.f32_slice(p + "ssm_a", H, 0, H);
    sc.D = b.f32_slice(p + "ssm_d", H, 0, H);
    sc.dt_bias = b.vector(p + "ssm_dt.bias", H);
    b.ssm_scan(y, conv, dt, sc);
    b.swiglu(y, z, y);   // silu(z) * y
    // The gated norm by groups, each with its row of ssm_norm [inner / groups, groups].
    const std::string norm = p + "ssm_norm.weight";
    if (s.groups == 1) {
        b.rms_norm(y, y, b.f32_slice(norm, I, 0, I), eps, I);
    } else {
        const int32_t part = u.part;
        for (uint32_t g = 0; g < s.groups; ++g) {
            b.copy_cols(part, y, 1, g * per, per);
            b.rms_norm(part, part, b.f32_slice(norm, I, int64_t{g} * per, per), eps, per);
            b.copy_cols(y, part, 1, 0, per, g * per);
        }
    }
    b.matmul(out, y, b.matrix(p + "ssm_out.weight", I, d));
}

void attention_layer(ArchBuilder &b, const std::string &p, const ArchBuilder::Rope *rope, float scale, int32_t xn,
                     int32_t out, const Bufs &u) {
    const HParams &hp = b.hp();
    const uint32_t d = hp.n_embd, nq = hp.n_embd_q(), nkv = hp.n_embd_kv();
    const int32_t q = u.q, k = u.k, v = u.v, attn = u.attn;
    b.matmul(q, xn, b.matrix(p + "attn_q.weight", d, nq), b.vector(p + "attn_q.bias", nq, false));
    b.matmul(k, xn, b.matrix(p + "attn_k.weight", d, nkv), b.vector(p + "attn_k.bias", nkv, false));
    b.matmul(v, xn, b.matrix(p + "attn_v.weight", d, nkv), b.vector(p + "attn_v.bias", nkv, false));
    rope_store_attend(b, q, k, v, attn, rope, scale);
    b.matmul(out, attn, b.matrix(p + "attn_output.weight", nq, d), b.vector(p + "attn_output.bias", d, false));
}

// Experts (softmax over the chosen) plus the shared expert, unweighted, where the file has one.
void moe_ffn(ArchBuilder &b, const std::string &p, uint32_t n_ff_shexp, int32_t xn, int32_t out, const Bufs &u) {
    const HParams &hp = b.hp();
    const uint32_t d = hp.n_embd;
    const int32_t router = u.router;
    b.matmul(router, xn, b.matrix(p + "ffn_gate_inp.weight", d, hp.n_expert));
    b.moe(out, xn, router, read_experts(b, p, hp.n_ff));
    if (n_ff_shexp == 0) return;
    const int32_t sgate = u.sgate, sup = u.sup, shared = u.shared;
    b.matmul(sgate, xn, b.matrix(p + "ffn_gate_shexp.weight", d, n_ff_shexp));
    b.matmul(sup, xn, b.matrix(p + "ffn_up_shexp.weight", d, n_ff_shexp));
    b.swiglu(sgate, sgate, sup);
    b.matmul(shared, sgate, b.matrix(p + "ffn_down_shexp.weight", n_ff_shexp, d));
    b.add(out, shared);
}

void build_granitehybrid(ArchBuilder &b) {
    HParams &hp = b.hp();
    hp.n_embd = b.u32("embedding_length", std::nullopt);
    hp.n_layer = b.u32("block_count", std::nullopt);
    hp.n_ff = b.u32("feed_forward_length", std::nullopt);
    hp.n_head = b.u32("attention.head_count", std::nullopt);
    hp.n_ctx_train = b.u32("context_length", 2048u);
    if (hp.n_embd == 0 || hp.n_embd > (1u << 20) || hp.n_layer == 0 || hp.n_layer > 4096 || hp.n_head == 0 ||
        hp.n_head > 4096 || hp.n_ff == 0)
        fail(EMBER_ERR_INVALID_MODEL, "implausible model dimensions (embedding %u, layers %u, heads %u, ffn %u)", hp.n_embd,
             hp.n_layer, hp.n_head, hp.n_ff);
    const std::vector<bool> recurrent = read_recurrent_layers(b);
    if (hp.n_head % hp.n_head_kv != 0)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.attention.head_count' (%u) is not a multiple of the KV heads (%u)",
             b.arch().c_str(), hp.n_head, hp.n_head_kv);
    hp.head_dim = b.u32("attention.key_length",
                        hp.n_embd % hp.n_head == 0 ? std::optional<uint32_t>(hp.n_embd / hp.n_head) : std::nullopt);
    if (hp.head_dim == 0 || hp.head_dim > 256 || hp.head_dim % 2)
        fail(EMBER_ERR_UNSUPPORTED, "head dimension %u is not supported (even, at most 256)", hp.head_dim);
    const MambaShape shape = read_mamba_shape(b);
    const float eps = b.f32("attention.layer_norm_rms_epsilon", 1e-5f);
    const float embd_scale = b.f32("embedding_scale", 1.0f), residual_scale = b.f32("residual_scale", 1.0f);
    const float attn_scale = b.f32("attention.scale", 0.0f), logit_scale = b.f32("logit_scale", 1.0f);
    if (!(logit_scale > 0)) fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.logit_scale' must be positive", b.arch().c_str());
    // Granite's switch for rope: rope.scaling.finetuned false means no position embedding.
    const bool use_rope = b.file().get_bool(b.arch() + ".rope.scaling.finetuned").value_or(true);
    const ArchBuilder::Rope rope = read_decoder_rope(b, EMBER_GRAPH_ROPE_NORMAL);
    const bool moe = b.find("blk.0.ffn_gate_inp.weight") != nullptr || b.u32("expert_count", 0u) > 0;
    uint32_t n_ff_shexp = 0;
    if (moe) {
        hp.n_expert = b.u32("expert_count", std::nullopt);
        hp.n_expert_used = b.u32("expert_used_count", std::nullopt);
        if (hp.n_expert == 0 || hp.n_expert > 1024)
            fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.expert_count' (%u) must be 1..1024", b.arch().c_str(), hp.n_expert);
        if (hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert)
            fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.expert_used_count' (%u) must be 1..expert_count (%u)",
                 b.arch().c_str(), hp.n_expert_used, hp.n_expert);
        n_ff_shexp = b.u32("expert_shared_feed_forward_length", 0u);
    }

    const int32_t tok_embd = token_embedding(b);
    const uint32_t d = hp.n_embd;
    const float scale = attn_scale != 0.0f ? attn_scale : 1.0f / std::sqrt(static_cast<float>(hp.head_dim));

    const int32_t x = b.buf(d), xn = b.buf(d), tmp = b.buf(d);
    Bufs u;
    bool any_recurrent = false, any_attention = false;
    for (bool r : recurrent) (r ? any_recurrent : any_attention) = true;
    if (any_recurrent) {
        u.z = b.buf(shape.inner), u.xbc = b.buf(shape.conv_dim()), u.dt = b.buf(shape.heads), u.conv = b.buf(shape.conv_dim());
        u.y = b.buf(shape.inner);
        if (shape.groups > 1) u.part = b.buf(shape.inner / shape.groups);
    }
    if (any_attention)
        u.q = b.buf(hp.n_embd_q()), u.k = b.buf(hp.n_embd_kv()), u.v = b.buf(hp.n_embd_kv()), u.attn = b.buf(hp.n_embd_q());
    if (moe) u.router = b.buf(hp.n_expert);
    if (n_ff_shexp) u.sgate = b.buf(n_ff_shexp), u.sup = b.buf(n_ff_shexp), u.shared = b.buf(d);
    const int32_t gate = moe ? -1 : b.buf(hp.n_ff), up = moe ? -1 : b.buf(hp.n_ff);
    b.get_rows(x, tok_embd);
    if (embd_scale != 1.0f) b.scale(x, x, embd_scale);
    auto residual = [&] {
        if (residual_scale != 1.0f) b.scale(tmp, tmp, residual_scale);
        b.add(x, tmp);
    };
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        b.layer(static_cast<int32_t>(il));
        b.rms_norm(xn, x, b.vector(p + "attn_norm.weight", d), eps, d);
        if (recurrent[il])
            mamba2_layer(b, p, shape, xn, tmp, eps, u);
        else
            attention_layer(b, p, use_rope ? &rope : nullptr, scale, xn, tmp, u);
        residual();
        b.rms_norm(xn, x, b.vector(p + "ffn_norm.weight", d), eps, d);
        if (moe) {
            moe_ffn(b, p, n_ff_shexp, xn, tmp, u);
        } else {
            b.matmul(gate, xn, b.matrix(p + "ffn_gate.weight", d, hp.n_ff), b.vector(p + "ffn_gate.bias", hp.n_ff, false));
            b.matmul(up, xn, b.matrix(p + "ffn_up.weight", d, hp.n_ff), b.vector(p + "ffn_up.bias", hp.n_ff, false));
            b.swiglu(gate, gate, up);
            b.matmul(tmp, gate, b.matrix(p + "ffn_down.weight", hp.n_ff, d), b.vector(p + "ffn_down.bias", d, false));
        }
        residual();
    }
    const int32_t logits = decoder_logits(b, x, tok_embd, eps);
    if (logit_scale != 1.0f) b.scale(logits, logits, 1.0f / logit_scale);
    b.output(logits);
}

} // namespace

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_granitehybrid = {"granitehybrid", build_granitehybrid};

} // namespace ember
