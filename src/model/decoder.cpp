// decoder.cpp — the usual pre-norm decoder (arch.hpp's build_decoder), shared by the architectures that
// differ from it only in options: its hyper-parameters, tensors and ops.
#include "model/arch.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>

namespace ember {

// The shape every decoder of this kind has: "<arch>.*" keys, checked. A mixture of experts may give
// only the experts' FFN width.
void read_decoder_shape(ArchBuilder &b, bool moe) {
    HParams &hp = b.hp();
    hp.n_embd = b.u32("embedding_length", std::nullopt);
    hp.n_layer = b.u32("block_count", std::nullopt);
    hp.n_ff = b.u32("feed_forward_length", moe ? std::optional<uint32_t>(0) : std::nullopt);
    hp.n_head = b.u32("attention.head_count", std::nullopt);
    hp.n_head_kv = b.u32("attention.head_count_kv", hp.n_head);
    hp.n_ctx_train = b.u32("context_length", 2048u);
    if (hp.n_embd == 0 || hp.n_layer == 0 || hp.n_head == 0 || hp.n_head_kv == 0 || (hp.n_ff == 0 && !moe))
        fail(EMBER_ERR_INVALID_MODEL, "zero in the model's dimensions (embedding %u, layers %u, heads %u/%u, ffn %u)",
             hp.n_embd, hp.n_layer, hp.n_head, hp.n_head_kv, hp.n_ff);
    if (hp.n_layer > 4096 || hp.n_head > 4096 || hp.n_embd > (1u << 20))
        fail(EMBER_ERR_INVALID_MODEL, "implausible model dimensions (embedding %u, layers %u, heads %u)", hp.n_embd,
             hp.n_layer, hp.n_head);
    if (hp.n_head % hp.n_head_kv != 0)
        fail(EMBER_ERR_INVALID_MODEL, "head_count %u is not a multiple of head_count_kv %u", hp.n_head, hp.n_head_kv);
    hp.head_dim = b.u32("attention.key_length",
                        hp.n_embd % hp.n_head == 0 ? std::optional<uint32_t>(hp.n_embd / hp.n_head) : std::nullopt);
    if (b.u32("attention.value_length", hp.head_dim) != hp.head_dim)
        fail(EMBER_ERR_UNSUPPORTED, "key_length and value_length differ");
    if (hp.head_dim == 0 || hp.head_dim > 256 || hp.head_dim % 2)
        fail(EMBER_ERR_UNSUPPORTED, "head dimension %u is not supported (even, at most 256)", hp.head_dim);
    if (moe) {
        hp.n_expert = b.u32("expert_count", std::nullopt);
        hp.n_expert_used = b.u32("expert_used_count", std::nullopt);
        if (hp.n_expert == 0 || hp.n_expert > 1024 || hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert)
            fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.expert_used_count' = %u of '%s.expert_count' = %u experts per token",
                 b.arch().c_str(), hp.n_expert_used, b.arch().c_str(), hp.n_expert);
    }
}

namespace {
// YaRN's magnitude m, the factor q and k are multiplied by, as ROPE_YARN's rope_attn_factor (ROPE_YARN
// multiplies that by its own 1 + 0.1 ln(factor) wherever the ramp is on, so this returns m over that).
// The checkpoint's definition: m = rope.scaling.yarn_attn_factor where the file gives it (the
// configuration's attention_factor, which replaces YaRN's own magnitude rather than multiplying it); else
// 1 + 0.1 ln(factor), divided by 1 + 0.1 yarn_log_multiplier ln(factor) where that is given (Mistral 3's
// mscale_all_dim); either times rope.scaling.attn_factor, as llama.cpp multiplies it.
float yarn_attn_factor(const ArchBuilder &b, float factor, float ext_factor) {
    const bool ramp = ext_factor != 0.0f && factor > 1.0f;
    const float own = ramp ? 1.0f + 0.1f * std::log(factor) : 1.0f;
    float m = own;
    if (ramp) {
        const float div = 1.0f + 0.1f * b.f32("rope.scaling.yarn_log_multiplier", 0.0f) * std::log(factor);
        if (!(div > 0)) fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.rope.scaling.yarn_log_multiplier' gives a "
                             "magnitude of %g", b.arch().c_str(), static_cast<double>(div));
        m /= div;
    }
    m = b.f32("rope.scaling.yarn_attn_factor", m);
    if (!(m > 0)) fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.rope.scaling.yarn_attn_factor' must be positive",
                       b.arch().c_str());
    return m / own * b.f32("rope.scaling.attn_factor", 1.0f);
}
} // namespace

// Rotary embedding: dimension count, base and scaling — linear, YaRN (<arch>.rope.scaling.*), Llama-3
// factors from rope_freqs, LongRoPE factors from rope_factors_short/long with their attention factor.
ArchBuilder::Rope read_decoder_rope(ArchBuilder &b, uint32_t mode) {
    const HParams &hp = b.hp();
    ArchBuilder::Rope r;
    r.mode = mode;
    r.n_rot = b.u32("rope.dimension_count", hp.head_dim);
    if (r.n_rot > hp.head_dim || r.n_rot % 2)
        fail(EMBER_ERR_INVALID_MODEL, "rope.dimension_count %u does not fit head dimension %u", r.n_rot, hp.head_dim);
    r.theta = b.f32("rope.freq_base", 10000.0f);
    if (auto type = b.str("rope.scaling.type"); type && *type != "none") {
        if (*type != "linear" && *type != "yarn")
            fail(EMBER_ERR_UNSUPPORTED, "rope scaling type '%.*s' is not supported (none, linear, yarn; Llama-3 "
                 "scaling comes from rope_freqs, LongRoPE from rope_factors_*)", (int)type->size(), type->data());
        const float factor = b.f32("rope.scaling.factor", 1.0f);
        if (!(factor > 0)) fail(EMBER_ERR_INVALID_MODEL, "rope.scaling.factor must be positive");
        r.freq_scale = 1.0f / factor;
        if (*type == "yarn") {
            // llama.cpp's defaults: the whole ramp (ext_factor 1), betas 32 and 1.
            r.ext_factor = b.f32("rope.scaling.yarn_ext_factor", 1.0f);
            r.attn_factor = yarn_attn_factor(b, factor, r.ext_factor);
            r.beta_fast = b.f32("rope.scaling.yarn_beta_fast", 32.0f);
            r.beta_slow = b.f32("rope.scaling.yarn_beta_slow", 1.0f);
            r.n_ctx_orig = b.u32("rope.scaling.original_context_length", hp.n_ctx_train);
            if (r.n_ctx_orig == 0) fail(EMBER_ERR_INVALID_MODEL, "YaRN needs rope.scaling.original_context_length");
        }
    }
    auto factors = [&](const char *name) {
        const TensorRef *rf = b.find(name);
        if (rf && (rf->type != DType::F32 || rf->ne[0] != r.n_rot / 2))
            fail(EMBER_ERR_INVALID_MODEL, "%s must be F32 with %u elements", name, r.n_rot / 2);
        return rf ? b.vector(name, r.n_rot / 2) : -1;
    };
    r.factors = factors("rope_freqs.weight");
    // LongRoPE (Phi-3): the short factors, which hold up to the original context length; the model's
    // second program, for longer contexts, puts the long ones in their place (Model::build_long_context).
    if (r.factors < 0 && b.find("rope_factors_short.weight")) {
        r.factors = factors("rope_factors_short.weight");
        r.attn_factor = b.f32("rope.scaling.attn_factor", 1.0f);
    }
    return r;
}

namespace {

// Whether layer il has a sliding window under these options.
bool layer_windowed(const DecoderOptions &opt, uint32_t il) {
    if (opt.window == 0) return false;
    if (!opt.window_layers.empty()) return il < opt.window_layers.size() && opt.window_layers[il];
    return opt.window_pattern == 0 || il % opt.window_pattern < opt.window_pattern - 1;
}

} // namespace

void read_window_pattern(ArchBuilder &b, DecoderOptions &opt, uint32_t fallback_period) {
    const uint32_t n_layer = b.u32("block_count", std::nullopt);
    const std::string key = b.arch() + ".attention.sliding_window_pattern";
    const gguf::KV *kv = b.file().find(key);
    const std::vector<uint32_t> v = b.u32_per_layer("attention.sliding_window_pattern", n_layer, fallback_period);
    if (kv && kv->value.type == gguf::ValueType::ARRAY) {
        opt.window_layers.assign(v.begin(), v.end());
        for (uint32_t il = 0; il < n_layer; ++il) opt.window_layers[il] = v[il] != 0;
    } else {
        opt.window_pattern = v.empty() ? fallback_period : v[0];
    }
}

void qk_norm_per_head(ArchBuilder &b, const DecoderLayer &l) {
    const uint32_t hd = b.hp().head_dim;
    b.rms_norm(l.q, l.q, b.vector(l.prefix + "attn_q_norm.weight", hd), l.eps, hd);
    b.rms_norm(l.k, l.k, b.vector(l.prefix + "attn_k_norm.weight", hd), l.eps, hd);
}

int32_t logits_head(ArchBuilder &b, int32_t x, int32_t norm_w, int32_t out_w, float eps, bool hidden) {
    // Only the rows whose logits are wanted go through the output norm and the vocabulary product (all of
    // them through the norm when the program returns its hidden rows).
    const HParams &hp = b.hp();
    const uint32_t d = hp.n_embd;
    b.layer(static_cast<int32_t>(hp.n_layer));
    // An embedding model (a pooling type; read_pooling ran first): the normed hidden rows, or its ranking head.
    if (b.desc().embedding.outputs_hidden) {
        const int32_t xl = b.buf(d, true), xln = b.buf(d, true);
        b.gather_logits(xl, x);
        b.rms_norm(xln, xl, norm_w, eps, d);
        embedding_output(b, xln, b.desc().embedding.pooling);
        return b.desc().logits_buf;
    }
    const int32_t xln = b.buf(d, true), logits = b.buf(hp.n_vocab, true);
    if (hidden) {
        const int32_t xn = b.buf(d);
        b.rms_norm(xn, x, norm_w, eps, d);
        b.gather_logits(xln, xn);
        b.hidden_rows(xn);
    } else {
        const int32_t xl = b.buf(d, true);
        b.gather_logits(xl, x);
        b.rms_norm(xln, xl, norm_w, eps, d);
    }
    b.matmul(logits, xln, out_w);
    return logits;
}

int32_t token_embedding(ArchBuilder &b) {
    const TensorRef *emb = b.find("token_embd.weight");
    if (!emb) fail(EMBER_ERR_INVALID_MODEL, "tensor 'token_embd.weight' is missing");
    b.hp().n_vocab = static_cast<uint32_t>(emb->ne[1]);
    return b.matrix("token_embd.weight", b.hp().n_embd, b.hp().n_vocab);
}

int32_t decoder_logits(ArchBuilder &b, int32_t x, int32_t tok_embd, float eps, const char *norm_name, bool hidden) {
    const int32_t norm = b.vector(norm_name, b.hp().n_embd);
    int32_t out = b.matrix("output.weight", b.hp().n_embd, b.hp().n_vocab, false);
    if (out < 0) out = tok_embd;  // tied embeddings
    return logits_head(b, x, norm, out, eps, hidden);
}

void rope_store_attend(ArchBuilder &b, int32_t q, int32_t k, int32_t v, int32_t attn, const ArchBuilder::Rope *rope,
                       float scale) {
    const HParams &hp = b.hp();
    if (rope && rope->n_rot > 0) {
        b.rope(q, hp.n_head, hp.head_dim, *rope);
        b.rope(k, hp.n_head_kv, hp.head_dim, *rope);
    }
    b.kv_store(k, v);
    b.attention(attn, q, hp.n_head, hp.n_head_kv, hp.head_dim, scale, {});
}

ArchBuilder::Moe read_experts(ArchBuilder &b, const std::string &p, uint32_t n_ff) {
    const HParams &hp = b.hp();
    ArchBuilder::Moe m;
    m.gate = b.experts(p + "ffn_gate_exps.weight", hp.n_embd, n_ff, hp.n_expert);
    m.up = b.experts(p + "ffn_up_exps.weight", hp.n_embd, n_ff, hp.n_expert);
    m.down = b.experts(p + "ffn_down_exps.weight", n_ff, hp.n_embd, hp.n_expert);
    m.n_expert = hp.n_expert, m.n_used = hp.n_expert_used;
    return m;
}

void build_decoder(ArchBuilder &b, const DecoderOptions &opt) {
    const bool moe = opt.moe_required || b.find("blk.0.ffn_gate_inp.weight");
    read_decoder_shape(b, moe);
    read_pooling(b, opt.bidirectional);
    HParams &hp = b.hp();
    const float eps = b.f32("attention.layer_norm_rms_epsilon", 1e-5f);
    const ArchBuilder::Rope rope = read_decoder_rope(b, opt.rope_mode);
    ArchBuilder::Rope window_rope = rope;
    if (opt.window_theta > 0 || opt.window_rope_unscaled) {
        window_rope = ArchBuilder::Rope{};
        window_rope.n_rot = rope.n_rot, window_rope.mode = rope.mode;
        window_rope.theta = opt.window_theta > 0 ? opt.window_theta : rope.theta;
    }

    // An encoder with window layers (EmbeddingGemma): texts of at most window / 2 + 1 tokens, within which
    // every token is in every other's symmetric window.
    if (b.desc().embedding.encoder && opt.window > 0) hp.n_ctx_train = std::min(hp.n_ctx_train, opt.window / 2 + 1);

    const int32_t tok_embd = token_embedding(b);
    const uint32_t d = hp.n_embd, nq = hp.n_embd_q(), nkv = hp.n_embd_kv(), hd = hp.head_dim;
    const uint32_t n_ff_exp = moe ? b.u32("expert_feed_forward_length", hp.n_ff) : 0;
    if (moe && n_ff_exp == 0) fail(EMBER_ERR_INVALID_MODEL, "the experts' FFN width is missing");
    const uint32_t nff = moe ? n_ff_exp : hp.n_ff;
    const float attn_scale = opt.attn_scale > 0 ? opt.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));

    // Activations: the residual stream, its normed copy, attention's q/k/v and output, the FFN's halves
    // (or the router's logits).
    const int32_t x = b.buf(d), xn = b.buf(d), tmp = b.buf(d), q = b.buf(nq), k = b.buf(nkv), v = b.buf(nkv),
                  attn = b.buf(nq);
    const int32_t gate = moe ? -1 : b.buf(nff), up = moe ? -1 : b.buf(nff), router = moe ? b.buf(hp.n_expert) : -1;

    b.get_rows(x, tok_embd);
    if (opt.embd_scale != 1.0f) b.scale(x, x, opt.embd_scale);
    // A block's output (in tmp) joins the residual stream: through its post-norm and multiplier.
    auto residual = [&](const std::string &post_norm) {
        if (opt.post_norms) b.rms_norm(tmp, tmp, b.vector(post_norm, d), eps, d);
        if (opt.residual_scale != 1.0f) b.scale(tmp, tmp, opt.residual_scale);
        b.add(x, tmp);
    };
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        b.layer(static_cast<int32_t>(il));
        const bool windowed = layer_windowed(opt, il);
        const int32_t in = opt.pre_norms ? xn : x;
        if (opt.pre_norms) b.rms_norm(xn, x, b.vector(p + "attn_norm.weight", d), eps, d);
        if (opt.fused_qkv && b.find(p + "attn_qkv.weight")) {
            const std::string name = p + "attn_qkv.weight";
            const int64_t total = int64_t{nq} + 2 * int64_t{nkv};
            b.matmul(q, in, b.matrix_rows(name, d, total, 0, nq));
            b.matmul(k, in, b.matrix_rows(name, d, total, nq, nkv));
            b.matmul(v, in, b.matrix_rows(name, d, total, nq + nkv, nkv));
        } else {
            b.matmul(q, in, b.matrix(p + "attn_q.weight", d, nq), b.vector(p + "attn_q.bias", nq, opt.qkv_bias_required));
            b.matmul(k, in, b.matrix(p + "attn_k.weight", d, nkv), b.vector(p + "attn_k.bias", nkv, opt.qkv_bias_required));
            b.matmul(v, in, b.matrix(p + "attn_v.weight", d, nkv), b.vector(p + "attn_v.bias", nkv, opt.qkv_bias_required));
        }
        if (opt.after_qkv) opt.after_qkv(b, DecoderLayer{il, p, q, k, v, eps});
        const ArchBuilder::Rope &lr = windowed ? window_rope : rope;
        const bool roped = opt.no_rope_step == 0 || (il + 1) % opt.no_rope_step != 0;
        if (lr.n_rot > 0 && roped) {
            b.rope(q, hp.n_head, hd, lr);
            b.rope(k, hp.n_head_kv, hd, lr);
        }
        b.kv_store(k, v);
        ArchBuilder::AttnExt ext;
        // A window in a pass both ways is symmetric (llama.cpp's "symmetric" type: positions within window / 2
        // either side), which the SEQUENCE mask does not express: such a layer attends to the whole text,
        // and texts are bounded (below) to where that is the same.
        ext.window = windowed && !b.desc().embedding.encoder ? opt.window : 0;
        ext.softcap = opt.attn_softcap;
        ext.sinks = opt.sinks ? b.vector(p + "attn_sinks.weight", hp.n_head) : -1;
        ext.temp_scale = opt.attn_temp_scale, ext.temp_offset = opt.attn_temp_offset, ext.temp_floor = opt.attn_temp_floor;
        ext.bidirectional = b.desc().embedding.encoder;
        b.attention(attn, q, hp.n_head, hp.n_head_kv, hd, attn_scale, ext);
        b.matmul(tmp, attn, b.matrix(p + "attn_output.weight", nq, d), b.vector(p + "attn_output.bias", d, false));
        residual(p + "post_attention_norm.weight");

        if (opt.pre_norms) b.rms_norm(xn, x, b.vector(p + opt.ffn_norm + ".weight", d), eps, d);
        if (moe) {
            b.matmul(router, in, b.matrix(p + "ffn_gate_inp.weight", d, hp.n_expert),
                     b.vector(p + "ffn_gate_inp.bias", hp.n_expert, false));
            ArchBuilder::Moe m;
            m.gate = b.experts(p + "ffn_gate_exps.weight", d, nff, hp.n_expert);
            m.up = b.experts(p + "ffn_up_exps.weight", d, nff, hp.n_expert);
            m.down = b.experts(p + "ffn_down_exps.weight", nff, d, hp.n_expert);
            m.gate_b = b.expert_bias(p + "ffn_gate_exps.bias", nff, hp.n_expert);
            m.up_b = b.expert_bias(p + "ffn_up_exps.bias", nff, hp.n_expert);
            m.down_b = b.expert_bias(p + "ffn_down_exps.bias", d, hp.n_expert);
            m.n_expert = hp.n_expert, m.n_used = hp.n_expert_used, m.gating = opt.moe_gating, m.act = opt.moe_act;
            m.alpha = opt.moe_alpha, m.limit = opt.moe_limit;
            b.moe(tmp, in, router, m);
        } else {
            if (opt.fused_gate_up) {
                const std::string name = p + "ffn_up.weight";
                b.matmul(gate, in, b.matrix_rows(name, d, 2 * int64_t{nff}, 0, nff));
                b.matmul(up, in, b.matrix_rows(name, d, 2 * int64_t{nff}, nff, nff));
            } else {
                b.matmul(gate, in, b.matrix(p + "ffn_gate.weight", d, nff));
                b.matmul(up, in, b.matrix(p + "ffn_up.weight", d, nff));
            }
            if (opt.act == EMBER_GRAPH_ACT_GELU)
                b.geglu(gate, gate, up);
            else
                b.swiglu(gate, gate, up);
            b.matmul(tmp, gate, b.matrix(p + "ffn_down.weight", nff, d));
        }
        residual(p + "post_ffw_norm.weight");
    }
    // Every token row through the output norm, returned as the program's hidden rows: an engine's
    // embedding requests on a generating model pool them (engine/engine.hpp); a norm per row, read only
    // when a pass asks for them.
    const int32_t logits = decoder_logits(b, x, tok_embd, eps, "output_norm.weight", true);
    if (b.desc().embedding.outputs_hidden) return;   // its output is set
    if (opt.logit_scale != 1.0f) b.scale(logits, logits, opt.logit_scale);
    if (opt.final_softcap > 0) b.softcap(logits, logits, opt.final_softcap);
    b.output(logits);
}

} // namespace ember
