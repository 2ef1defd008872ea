// arch_gemma4.cpp — Gemma 4 (text): E2B/E4B with per-layer embeddings and layers that share an earlier
// layer's KV cache, the 26B-A4B mixture of experts, the 31B dense model.
//
// What differs from Gemma 3: window and global layers have their own head size (key_length_swa,
// key_length), KV head count (head_count_kv may be per layer), rope base (rope.freq_base_swa,
// rope.freq_base) and rotary width, the global layers' rope divided by rope_freqs; v is RMS-normed per
// head without a weight (and where a layer has no attn_v, v is its k before k's norm); scores are not
// scaled (the q/k norms do it); attention.sliding_window_pattern says per layer which have a window.
// The last attention.shared_kv_layers layers compute only q and read the cache of the last window
// layer (n - 2) or the last global layer (n - 1) of the n layers before them, and store nothing.
// Per-layer embeddings (E models): a second embedding table of n_layer x n_pl values per token, read a
// row per token from the mapped file, scaled by sqrt(n_pl) and averaged (÷ sqrt 2) with an RMS-normed
// projection of the scaled token embedding; after each layer's FFN, x += post_norm(proj(gelu(gate(x)) *
// that layer's n_pl values)), then x *= layer_output_scale. The MoE layers run a dense GeGLU FFN and
// the routed experts side by side, each with its own norms, the router reading an unweighted RMS norm
// of x times ffn_gate_inp.scale / sqrt(n_embd).
#include "model/arch.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace ember {

namespace {

// One layer's attention shape.
struct LayerShape {
    bool window = false;
    uint32_t head_dim = 0, n_head_kv = 0, n_rot = 0, n_ff = 0;
    int32_t kv_source = -1;   // the layer whose cache it reads (-1: its own)
};

// The value of an F32 tensor of one element (layer_output_scale), read from the file.
float scalar_tensor(ArchBuilder &b, const std::string &name) {
    const TensorRef *t = b.find(name);
    if (t->type != DType::F32 || t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] != 1)
        fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' must be one F32 value", name.c_str());
    const float v = *static_cast<const float *>(t->data);
    if (!std::isfinite(v)) fail(EMBER_ERR_INVALID_MODEL, "tensor '%s' is not finite", name.c_str());
    return v;
}

void build_gemma4(ArchBuilder &b) {
    HParams &hp = b.hp();
    const std::string a = b.arch() + ".";
    hp.n_embd = b.u32("embedding_length", std::nullopt);
    hp.n_layer = b.u32("block_count", std::nullopt);
    hp.n_head = b.u32("attention.head_count", std::nullopt);
    hp.n_ctx_train = b.u32("context_length", 2048u);
    const uint32_t L = hp.n_layer, d = hp.n_embd;
    if (d == 0 || L == 0 || hp.n_head == 0 || L > 4096 || hp.n_head > 4096 || d > (1u << 20))
        fail(EMBER_ERR_INVALID_MODEL, "implausible model dimensions (embedding %u, layers %u, heads %u)", d, L, hp.n_head);
    const std::vector<uint32_t> n_kv = b.u32_per_layer("attention.head_count_kv", L, hp.n_head);
    const std::vector<uint32_t> n_ff = b.u32_per_layer("feed_forward_length", L, std::nullopt);
    const std::vector<uint32_t> pattern = b.u32_per_layer("attention.sliding_window_pattern", L, 0u);
    const uint32_t hd_global = b.u32("attention.key_length", std::nullopt);
    const uint32_t hd_window = b.u32("attention.key_length_swa", hd_global);
    if (b.u32("attention.value_length", hd_global) != hd_global || b.u32("attention.value_length_swa", hd_window) != hd_window)
        fail(EMBER_ERR_UNSUPPORTED, "key and value lengths differ");
    for (uint32_t hd : {hd_global, hd_window})
        if (hd == 0 || hd > 512 || hd % 2)
            fail(EMBER_ERR_UNSUPPORTED, "head dimension %u is not supported (even, at most 512)", hd);
    const uint32_t n_rot_global = b.u32("rope.dimension_count", hd_global);
    const uint32_t n_rot_window = b.u32("rope.dimension_count_swa", hd_window);
    if (n_rot_global > hd_global || n_rot_global % 2 || n_rot_window > hd_window || n_rot_window % 2)
        fail(EMBER_ERR_INVALID_MODEL, "rope.dimension_count(_swa) %u/%u does not fit head dimensions %u/%u", n_rot_global,
             n_rot_window, hd_global, hd_window);
    const uint32_t shared = b.u32("attention.shared_kv_layers", 0u);
    const uint32_t n_pl = b.u32("embedding_length_per_layer_input", 0u);
    const float eps = b.f32("attention.layer_norm_rms_epsilon", 1e-6f);
    const float final_softcap = b.f32("final_logit_softcapping", 0.0f);

    // The layers: a window where the pattern says so (a single number p is Gemma 3's: il % p < p - 1).
    std::vector<LayerShape> ls(L);
    const bool per_layer_pattern = b.file().find(a + "attention.sliding_window_pattern") &&
                                   b.file().find(a + "attention.sliding_window_pattern")->value.type == gguf::ValueType::ARRAY;
    for (uint32_t il = 0; il < L; ++il) {
        LayerShape &s = ls[il];
        const uint32_t p = pattern[il];
        s.window = per_layer_pattern ? p != 0 : (p == 0 ? false : il % p < p - 1);
        s.head_dim = s.window ? hd_window : hd_global;
        s.n_rot = s.window ? n_rot_window : n_rot_global;
        s.n_head_kv = n_kv[il];
        s.n_ff = n_ff[il];
        if (s.n_head_kv == 0 || hp.n_head % s.n_head_kv != 0)
            fail(EMBER_ERR_INVALID_MODEL, "metadata '%sattention.head_count_kv' (%u in layer %u) must divide head_count %u",
                 a.c_str(), s.n_head_kv, il, hp.n_head);
    }
    const bool any_window = std::any_of(ls.begin(), ls.end(), [](const LayerShape &s) { return s.window; });
    const uint32_t window = any_window ? b.u32("attention.sliding_window", std::nullopt) : 0;
    if (any_window && window == 0) fail(EMBER_ERR_INVALID_MODEL, "metadata '%sattention.sliding_window' is 0", a.c_str());

    // Shared KV: the last `shared` layers read the last window / global layer before them.
    if (shared >= L || (shared > 0 && L - shared < 2))
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%sattention.shared_kv_layers' = %u leaves no layer to share from (%u layers)",
             a.c_str(), shared, L);
    const uint32_t first_shared = L - shared;
    for (uint32_t il = first_shared; il < L; ++il) {
        LayerShape &s = ls[il];
        s.kv_source = static_cast<int32_t>(first_shared) - (s.window ? 2 : 1);
        const LayerShape &src = ls[static_cast<size_t>(s.kv_source)];
        if (src.window != s.window || src.head_dim != s.head_dim || src.n_head_kv != s.n_head_kv)
            fail(EMBER_ERR_INVALID_MODEL,
                 "metadata '%sattention.shared_kv_layers' = %u: layer %u would read layer %d's cache, whose attention "
                 "differs",
                 a.c_str(), shared, il, s.kv_source);
    }

    // The cache's rows hold the widest layer's K (or V); hp's KV heads and head size are what make that
    // width (each layer fills the start of a row with its own heads).
    uint32_t kv_width = 0;
    for (const LayerShape &s : ls) kv_width = std::max(kv_width, s.n_head_kv * s.head_dim);
    hp.head_dim = std::max(hd_global, hd_window);
    hp.n_head_kv = (kv_width + hp.head_dim - 1) / hp.head_dim;
    hp.n_ff = *std::max_element(n_ff.begin(), n_ff.end());

    const int32_t tok_embd = token_embedding(b);

    const bool moe = b.find("blk.0.ffn_gate_inp.weight") != nullptr;
    uint32_t n_ff_exp = 0;
    if (moe) {
        hp.n_expert = b.u32("expert_count", std::nullopt);
        hp.n_expert_used = b.u32("expert_used_count", std::nullopt);
        if (hp.n_expert == 0 || hp.n_expert > 1024 || hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert)
            fail(EMBER_ERR_INVALID_MODEL, "metadata '%sexpert_count' / 'expert_used_count': %u of %u experts per token",
                 a.c_str(), hp.n_expert_used, hp.n_expert);
        n_ff_exp = b.u32("expert_feed_forward_length", std::nullopt);
        if (n_ff_exp == 0) fail(EMBER_ERR_INVALID_MODEL, "metadata '%sexpert_feed_forward_length' is 0", a.c_str());
    }

    // Rope per layer kind: the window layers' base unscaled, the global layers' with rope_freqs.
    ArchBuilder::Rope rope_global, rope_window;
    rope_global.mode = rope_window.mode = EMBER_GRAPH_ROPE_NEOX;
    rope_global.n_rot = n_rot_global, rope_window.n_rot = n_rot_window;
    rope_global.theta = b.f32("rope.freq_base", 1000000.0f);
    rope_window.theta = b.f32("rope.freq_base_swa", 10000.0f);
    if (const TensorRef *rf = b.find("rope_freqs.weight")) {
        if (rf->type != DType::F32 || rf->ne[0] != n_rot_global / 2)
            fail(EMBER_ERR_INVALID_MODEL, "rope_freqs.weight must be F32 with %u elements", n_rot_global / 2);
        rope_global.factors = b.vector("rope_freqs.weight", n_rot_global / 2);
    }

    // Buffers: the residual stream and its normed copy, a block's output, and q/k/v/attention buffers
    // per head shape (window and global layers differ).
    const int32_t x = b.buf(d), xn = b.buf(d), tmp = b.buf(d);
    std::map<uint32_t, int32_t> by_width;
    auto width_buf = [&](uint32_t w, int slot) {   // slot: which of several buffers of that width
        const uint32_t key = w * 8u + static_cast<uint32_t>(slot);
        auto it = by_width.find(key);
        return it != by_width.end() ? it->second : by_width.emplace(key, b.buf(w)).first->second;
    };

    b.get_rows(x, tok_embd);
    b.scale(x, x, std::sqrt(static_cast<float>(d)));

    // Per-layer embeddings: ple = (sqrt(n_pl) E_pl[token] + norm(P x / sqrt(d))) / sqrt(2), n_layer groups.
    int32_t ple = -1, ple_layer = -1;
    if (n_pl > 0) {
        const std::string key = a + "embedding_length_per_layer_input";
        const TensorRef *pe = b.find("per_layer_token_embd.weight");
        if (!pe) fail(EMBER_ERR_INVALID_MODEL, "tensor 'per_layer_token_embd.weight' is missing");
        if (pe->ne[0] != int64_t{n_pl} * L || pe->ne[1] != hp.n_vocab)
            fail(EMBER_ERR_INVALID_MODEL,
                 "metadata '%s' = %u does not match tensor 'per_layer_token_embd.weight' [%lld, %lld] (expected [%u x %u "
                 "layers, %u])",
                 key.c_str(), n_pl, (long long)pe->ne[0], (long long)pe->ne[1], n_pl, L, hp.n_vocab);
        const uint32_t w = n_pl * L;
        ple = b.buf(w);
        const int32_t proj = b.buf(w);
        ple_layer = b.buf(n_pl);
        b.get_rows(ple, b.matrix("per_layer_token_embd.weight", w, hp.n_vocab));   // rows from the mapped file
        b.scale(ple, ple, std::sqrt(static_cast<float>(n_pl)));
        b.matmul(proj, x, b.matrix("per_layer_model_proj.weight", d, w));
        b.scale(proj, proj, 1.0f / std::sqrt(static_cast<float>(d)));
        b.rms_norm(proj, proj, b.vector("per_layer_proj_norm.weight", n_pl), eps, n_pl);
        b.add(ple, proj);
        b.scale(ple, ple, 1.0f / std::sqrt(2.0f));
    }

    const uint32_t nh = hp.n_head;
    for (uint32_t il = 0; il < L; ++il) {
        const LayerShape &s = ls[il];
        const std::string p = "blk." + std::to_string(il) + ".";
        b.layer(static_cast<int32_t>(il));
        const uint32_t hd = s.head_dim, nq = nh * hd, nkv = s.n_head_kv * hd;
        const ArchBuilder::Rope &rope = s.window ? rope_window : rope_global;
        const int32_t q = width_buf(nq, 0), attn = width_buf(nq, 1);

        b.rms_norm(xn, x, b.vector(p + "attn_norm.weight", d), eps, d);
        b.matmul(q, xn, b.matrix(p + "attn_q.weight", d, nq));
        b.rms_norm(q, q, b.vector(p + "attn_q_norm.weight", hd), eps, hd);
        if (rope.n_rot > 0) b.rope(q, nh, hd, rope);
        if (s.kv_source < 0) {
            const int32_t k = width_buf(nkv, 2), v = width_buf(nkv, 3);
            b.matmul(k, xn, b.matrix(p + "attn_k.weight", d, nkv));
            const int32_t wv = b.matrix(p + "attn_v.weight", d, nkv, false);
            if (wv >= 0)
                b.matmul(v, xn, wv);
            else
                b.rms_norm(v, k, -1, eps, hd);   // no attn_v: v is k before its norm and rope
            if (wv >= 0) b.rms_norm(v, v, -1, eps, hd);
            b.rms_norm(k, k, b.vector(p + "attn_k_norm.weight", hd), eps, hd);
            if (rope.n_rot > 0) b.rope(k, s.n_head_kv, hd, rope);
            b.kv_store(k, v);
        }
        ArchBuilder::AttnExt ext;
        ext.window = s.window ? window : 0;
        b.attention(attn, q, nh, s.n_head_kv, hd, 1.0f, ext);
        if (s.kv_source >= 0) b.read_kv_of(s.kv_source);
        b.matmul(tmp, attn, b.matrix(p + "attn_output.weight", nq, d));
        b.rms_norm(tmp, tmp, b.vector(p + "post_attention_norm.weight", d), eps, d);
        b.add(x, tmp);

        // The FFN: dense GeGLU; in MoE layers beside the routed experts, each with its own norms.
        const uint32_t nff = s.n_ff;
        if (nff == 0) fail(EMBER_ERR_INVALID_MODEL, "metadata '%sfeed_forward_length' is 0 in layer %u", a.c_str(), il);
        const int32_t gate = width_buf(nff, 4), up = width_buf(nff, 5);
        b.rms_norm(xn, x, b.vector(p + "ffn_norm.weight", d), eps, d);
        b.matmul(gate, xn, b.matrix(p + "ffn_gate.weight", d, nff));
        b.matmul(up, xn, b.matrix(p + "ffn_up.weight", d, nff));
        b.geglu(gate, gate, up);
        b.matmul(tmp, gate, b.matrix(p + "ffn_down.weight", nff, d));
        if (moe) {
            const int32_t moe_out = width_buf(d, 6), router_in = width_buf(d, 7), router = width_buf(hp.n_expert, 6);
            b.rms_norm(tmp, tmp, b.vector(p + "post_ffw_norm_1.weight", d), eps, d);
            // The router's input: x RMS-normed, times ffn_gate_inp.scale / sqrt(d) (one weight vector).
            const TensorRef *rs = b.find(p + "ffn_gate_inp.scale");
            if (!rs || rs->type != DType::F32 || rs->n_dims != 1 || rs->ne[0] != d)
                fail(EMBER_ERR_INVALID_MODEL, "tensor '%sffn_gate_inp.scale' must be F32 [%u]", p.c_str(), d);
            std::vector<float> w(d);
            for (uint32_t i = 0; i < d; ++i) w[i] = static_cast<const float *>(rs->data)[i] / std::sqrt(static_cast<float>(d));
            b.rms_norm(router_in, x, b.made_vector(p + "ffn_gate_inp.scale/sqrt(n_embd)", std::move(w)), eps, d);
            b.matmul(router, router_in, b.matrix(p + "ffn_gate_inp.weight", d, hp.n_expert));
            b.rms_norm(xn, x, b.vector(p + "pre_ffw_norm_2.weight", d), eps, d);
            if (b.find(p + "ffn_gate_up_exps.weight"))
                fail(EMBER_ERR_UNSUPPORTED, "tensor '%sffn_gate_up_exps.weight' (gate and up experts fused) is not "
                     "supported yet", p.c_str());
            if (b.find(p + "ffn_down_exps.scale"))
                fail(EMBER_ERR_UNSUPPORTED, "tensor '%sffn_down_exps.scale' (per-expert output scales) is not supported yet",
                     p.c_str());
            ArchBuilder::Moe m;
            m.gate = b.experts(p + "ffn_gate_exps.weight", d, n_ff_exp, hp.n_expert);
            m.up = b.experts(p + "ffn_up_exps.weight", d, n_ff_exp, hp.n_expert);
            m.down = b.experts(p + "ffn_down_exps.weight", n_ff_exp, d, hp.n_expert);
            m.n_expert = hp.n_expert, m.n_used = hp.n_expert_used;
            m.gating = EMBER_GRAPH_MOE_GATE_SOFTMAX_TOPK, m.act = EMBER_GRAPH_ACT_GELU;
            b.moe(moe_out, xn, router, m);
            b.rms_norm(moe_out, moe_out, b.vector(p + "post_ffw_norm_2.weight", d), eps, d);
            b.add(tmp, moe_out);
        }
        b.rms_norm(tmp, tmp, b.vector(p + "post_ffw_norm.weight", d), eps, d);
        b.add(x, tmp);

        if (ple >= 0) {
            const int32_t g = ple_layer, gp = width_buf(n_pl, 0);
            b.matmul(gp, x, b.matrix(p + "inp_gate.weight", d, n_pl));
            b.copy_cols(g, ple, 1, il * n_pl, n_pl);
            b.geglu(gp, gp, g);
            b.matmul(tmp, gp, b.matrix(p + "proj.weight", n_pl, d));
            b.rms_norm(tmp, tmp, b.vector(p + "post_norm.weight", d), eps, d);
            b.add(x, tmp);
        }
        if (b.find(p + "layer_output_scale.weight")) b.scale(x, x, scalar_tensor(b, p + "layer_output_scale.weight"));
    }
    const int32_t logits = decoder_logits(b, x, tok_embd, eps);
    if (final_softcap > 0) b.softcap(logits, logits, final_softcap);
    b.output(logits);
}

} // namespace

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_gemma4 = {"gemma4", build_gemma4};

} // namespace ember
