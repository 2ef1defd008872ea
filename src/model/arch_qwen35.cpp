// arch_qwen35.cpp — Qwen3.5 / Qwen3.6 (dense; arch_qwen35moe.cpp adds experts): a hybrid of Gated DeltaNet
// layers, whose memory per sequence is a fixed-size recurrent state, and gated attention layers every
// `full_attention_interval`-th layer (layer il attends iff (il + 1) % interval == 0), pre-norm residuals
// with the FFN's norm named post_attention_norm.
//
// Attention layers: attn_q holds, per head, head_dim rows of the query and head_dim rows of an output gate;
// q and k take a per-head RMSNorm, rope turns the first rope.dimension_count dims of each head in NEOX
// pairs (the file's multi-section rope, whose sections all take the token's position for text), and the
// attention's output is multiplied by sigmoid(gate) before attn_output.
// Gated DeltaNet layers: attn_qkv gives q, k, v through a causal convolution (ssm_conv1d, a window of
// ssm.conv_kernel inputs) and SiLU; attn_gate gives z; ssm_alpha and ssm_beta the per-head decay and write
// strength inputs (with ssm_dt.bias and ssm_a); graph.h's GATED_DELTA runs the rule; its output is
// RMS-normed per head (ssm_norm) times silu(z), then ssm_out.
// Multi-token-prediction layers (nextn_predict_layers, counted in block_count, the last ones) are not part
// of the pass; build_qwen35_mtp (at the end) makes the first of them a program of its own, the draft of
// speculative decoding, and the pass returns the hidden rows it reads.
// Qwen3-Next (arch_qwen3next.cpp) has the same layers with plain rope, the decay and write-strength inputs
// in one product (ssm_ba: per key head, its value heads' b then their a) and each key head's value
// heads adjacent.
#include "model/arch.hpp"

#include "core/error.hpp"

#include <cmath>
#include <vector>

namespace ember {

namespace {

// The recurrent layers' metadata, checked against each other (a file that contradicts itself is refused
// naming the key, before any tensor is read).
struct DeltaShape {
    uint32_t conv_kernel = 0, head_dim = 0, n_head_k = 0, n_head_v = 0, interval = 0;
    uint32_t key_dim() const { return n_head_k * head_dim; }
    uint32_t value_dim() const { return n_head_v * head_dim; }
    uint32_t conv_dim() const { return 2 * key_dim() + value_dim(); }
};

DeltaShape read_delta_shape(ArchBuilder &b) {
    DeltaShape s;
    auto bad = [&](const char *key, const char *why) {
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.%s' %s", b.arch().c_str(), key, why);
    };
    s.conv_kernel = b.u32("ssm.conv_kernel", std::nullopt);
    s.head_dim = b.u32("ssm.state_size", std::nullopt);
    s.n_head_k = b.u32("ssm.group_count", std::nullopt);
    s.n_head_v = b.u32("ssm.time_step_rank", std::nullopt);
    s.interval = b.u32("full_attention_interval", 4u);
    if (s.conv_kernel == 0 || s.conv_kernel > 64) bad("ssm.conv_kernel", "must be 1..64");
    if (s.head_dim == 0 || s.head_dim > 1024) bad("ssm.state_size", "must be 1..1024");
    if (s.n_head_k == 0 || s.n_head_k > 4096) bad("ssm.group_count", "must be 1..4096");
    if (s.n_head_v == 0 || s.n_head_v > 4096 || s.n_head_v % s.n_head_k != 0)
        bad("ssm.time_step_rank", "must be a positive multiple of ssm.group_count (at most 4096)");
    if (b.u32("ssm.inner_size", std::nullopt) != s.value_dim())
        bad("ssm.inner_size", "must be ssm.time_step_rank x ssm.state_size");
    if (s.interval == 0) bad("full_attention_interval", "must be positive");
    return s;
}

void delta_layer(ArchBuilder &b, const std::string &p, const DeltaShape &s, int32_t xn, int32_t out, float eps, bool next) {
    const uint32_t d = b.hp().n_embd;
    const int32_t m = b.buf(s.conv_dim()), z = b.buf(s.value_dim()), a = b.buf(s.n_head_v), beta = b.buf(s.n_head_v),
                  c = b.buf(s.conv_dim()), o = b.buf(s.value_dim());
    const uint32_t per = s.n_head_v / s.n_head_k;
    if (next && !b.find(p + "attn_qkv.weight")) {
        // Qwen3-Next's first layout: one product ssm_in holding, per key head, its q, k, then its value
        // heads' v and z; gathered into the convolution's [q | k | v] and into z.
        const uint32_t S = s.head_dim, group = 2 * S + 2 * S * per;
        const int32_t qkvz = b.buf(s.n_head_k * group);
        b.matmul(qkvz, xn, b.matrix(p + "ssm_in.weight", d, int64_t{s.n_head_k} * group));
        b.copy_cols(m, qkvz, s.n_head_k, 0, S, 0);
        b.copy_cols(m, qkvz, s.n_head_k, S, S, s.key_dim());
        b.copy_cols(m, qkvz, s.n_head_k, 2 * S, S * per, 2 * s.key_dim());
        b.copy_cols(z, qkvz, s.n_head_k, 2 * S + S * per, S * per, 0);
    } else {
        // One input for the products: the CPU quantizes it once for all of them.
        b.matmul(m, xn, b.matrix(p + "attn_qkv.weight", d, s.conv_dim()));
        b.matmul(z, xn, b.matrix(p + "attn_gate.weight", d, s.value_dim()));
    }
    if (next) {
        const int32_t ba = b.buf(2 * s.n_head_v);
        b.matmul(ba, xn, b.matrix(p + "ssm_ba.weight", d, 2 * s.n_head_v));
        b.copy_cols(beta, ba, s.n_head_k, 0, per);
        b.copy_cols(a, ba, s.n_head_k, per, per);
    } else {
        b.matmul(beta, xn, b.matrix(p + "ssm_beta.weight", d, s.n_head_v));
        b.matmul(a, xn, b.matrix(p + "ssm_alpha.weight", d, s.n_head_v));
    }
    b.ssm_conv(c, m, b.f32_matrix(p + "ssm_conv1d.weight", s.conv_kernel, s.conv_dim()));
    ArchBuilder::GatedDelta g;
    g.n_head = s.n_head_v, g.n_head_k = s.n_head_k, g.head_dim = s.head_dim;
    g.dt = b.vector(p + "ssm_dt.bias", s.n_head_v);
    g.decay = b.vector(p + "ssm_a", s.n_head_v);
    g.eps = eps;
    g.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    g.grouped = next;
    b.gated_delta(o, c, a, beta, g);
    b.rms_norm(o, o, b.vector(p + "ssm_norm.weight", s.head_dim), eps, s.head_dim);
    b.swiglu(o, z, o);   // norm(o) * silu(z)
    b.matmul(out, o, b.matrix(p + "ssm_out.weight", s.value_dim(), d));
}

void attention_layer(ArchBuilder &b, const std::string &p, const ArchBuilder::Rope &rope, int32_t xn, int32_t out,
                     float eps) {
    const HParams &hp = b.hp();
    const uint32_t d = hp.n_embd, hd = hp.head_dim, nq = hp.n_embd_q(), nkv = hp.n_embd_kv();
    const int32_t qg = b.buf(2 * nq), q = b.buf(nq), gate = b.buf(nq), k = b.buf(nkv), v = b.buf(nkv), attn = b.buf(nq);
    b.matmul(qg, xn, b.matrix(p + "attn_q.weight", d, 2 * nq));
    b.matmul(k, xn, b.matrix(p + "attn_k.weight", d, nkv));
    b.matmul(v, xn, b.matrix(p + "attn_v.weight", d, nkv));
    b.copy_cols(q, qg, hp.n_head, 0, hd);
    b.copy_cols(gate, qg, hp.n_head, hd, hd);
    b.rms_norm(q, q, b.vector(p + "attn_q_norm.weight", hd), eps, hd);
    b.rms_norm(k, k, b.vector(p + "attn_k_norm.weight", hd), eps, hd);
    if (rope.n_rot > 0) {
        b.rope(q, hp.n_head, hd, rope);
        b.rope(k, hp.n_head_kv, hd, rope);
    }
    b.kv_store(k, v);
    b.attention(attn, q, hp.n_head, hp.n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd)), {});
    b.sigmoid_mul(attn, attn, gate);
    b.matmul(out, attn, b.matrix(p + "attn_output.weight", nq, d));
}

// Routed experts (softmax over the router's logits, the chosen renormalised) plus one shared expert whose
// output is scaled by sigmoid(ffn_gate_inp_shexp . x).
void moe_ffn(ArchBuilder &b, const std::string &p, int32_t xn, int32_t out) {
    const HParams &hp = b.hp();
    const uint32_t d = hp.n_embd;
    const uint32_t n_ff_exp = b.u32("expert_feed_forward_length", std::nullopt);
    const uint32_t n_ff_sh = b.u32("expert_shared_feed_forward_length", n_ff_exp);
    if (n_ff_exp == 0 || n_ff_sh == 0)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.expert_feed_forward_length' must be positive", b.arch().c_str());
    const int32_t router = b.buf(hp.n_expert), sg = b.buf(1), sgate = b.buf(n_ff_sh), sup = b.buf(n_ff_sh),
                  shared = b.buf(d);
    b.matmul(router, xn, b.matrix(p + "ffn_gate_inp.weight", d, hp.n_expert));
    b.matmul(sg, xn, b.row_matrix(p + "ffn_gate_inp_shexp.weight", d));
    b.matmul(sgate, xn, b.matrix(p + "ffn_gate_shexp.weight", d, n_ff_sh));
    b.matmul(sup, xn, b.matrix(p + "ffn_up_shexp.weight", d, n_ff_sh));
    ArchBuilder::Moe m;
    m.gate = b.experts(p + "ffn_gate_exps.weight", d, n_ff_exp, hp.n_expert);
    m.up = b.experts(p + "ffn_up_exps.weight", d, n_ff_exp, hp.n_expert);
    m.down = b.experts(p + "ffn_down_exps.weight", n_ff_exp, d, hp.n_expert);
    m.n_expert = hp.n_expert, m.n_used = hp.n_expert_used;
    b.moe(out, xn, router, m);
    b.swiglu(sgate, sgate, sup);
    b.matmul(shared, sgate, b.matrix(p + "ffn_down_shexp.weight", n_ff_sh, d));
    b.sigmoid_mul(shared, shared, sg);
    b.add(out, shared);
}

// x += FFN(post_attention_norm(x)): routed plus shared experts, or a dense SwiGLU FFN (gate and up: its
// buffers, shared by the layers).
void ffn_block(ArchBuilder &b, const std::string &p, bool moe, int32_t x, int32_t xn, int32_t tmp, int32_t gate,
               int32_t up, float eps) {
    const HParams &hp = b.hp();
    const uint32_t d = hp.n_embd;
    b.rms_norm(xn, x, b.vector(p + "post_attention_norm.weight", d), eps, d);
    if (moe) {
        moe_ffn(b, p, xn, tmp);
    } else {
        if (gate < 0) fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.feed_forward_length' must be positive", b.arch().c_str());
        b.matmul(gate, xn, b.matrix(p + "ffn_gate.weight", d, hp.n_ff));
        b.matmul(up, xn, b.matrix(p + "ffn_up.weight", d, hp.n_ff));
        b.swiglu(gate, gate, up);
        b.matmul(tmp, gate, b.matrix(p + "ffn_down.weight", hp.n_ff, d));
    }
    b.add(x, tmp);
}

} // namespace

void build_qwen35(ArchBuilder &b, bool moe, bool next) {
    read_decoder_shape(b, moe);
    HParams &hp = b.hp();
    const uint32_t n_nextn = b.u32("nextn_predict_layers", 0u);
    if (n_nextn >= hp.n_layer)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.nextn_predict_layers' (%u) must be below block_count (%u)",
             b.arch().c_str(), n_nextn, hp.n_layer);
    hp.n_layer -= n_nextn;
    const DeltaShape s = read_delta_shape(b);
    const float eps = b.f32("attention.layer_norm_rms_epsilon", 1e-6f);
    const ArchBuilder::Rope rope = read_decoder_rope(b, EMBER_GRAPH_ROPE_NEOX);
    // The interleaved multi-section rope: pair i falls in sector s = i mod (sum of the sections) and turns
    // by the text position when s < 3 x sections[s mod 3], else by the fourth position, which is 0 for
    // text. Where every pair turns by the text position (Qwen3.5's 11/11/10/0) it is plain rope.
    if (const gguf::Value *sec = b.file().get_array(b.arch() + ".rope.dimension_sections")) {
        int64_t v[4] = {0, 0, 0, 0}, sum = 0;
        for (uint64_t i = 0; i < sec->count && i < 4; ++i) {
            v[i] = sec->array_int(i);
            if (v[i] < 0) fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.rope.dimension_sections' has a negative entry", b.arch().c_str());
            sum += v[i];
        }
        for (uint32_t i = 0; sum > 0 && i < rope.n_rot / 2; ++i) {
            const int64_t sector = i % sum;
            if (sector >= 3 * v[sector % 3])
                fail(EMBER_ERR_UNSUPPORTED, "metadata '%s.rope.dimension_sections': rotary pair %u would not turn for text "
                     "(sections that leave pairs to the fourth position are not supported)", b.arch().c_str(), i);
        }
    }
    // Which layers are recurrent: attention.recurrent_layers when the file has it (newer converters), else
    // every layer but each full_attention_interval-th.
    std::vector<bool> recurrent(hp.n_layer);
    const gguf::Value *rec = b.file().get_array(b.arch() + ".attention.recurrent_layers");
    if (rec && rec->count < hp.n_layer)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.attention.recurrent_layers' has %llu entries for %u layers",
             b.arch().c_str(), (unsigned long long)rec->count, hp.n_layer);
    for (uint32_t il = 0; il < hp.n_layer; ++il) recurrent[il] = rec ? rec->array_int(il) != 0 : (il + 1) % s.interval != 0;
    const int32_t tok_embd = token_embedding(b);
    const uint32_t d = hp.n_embd;

    const int32_t x = b.buf(d), xn = b.buf(d), tmp = b.buf(d);
    const int32_t gate = hp.n_ff ? b.buf(hp.n_ff) : -1, up = hp.n_ff ? b.buf(hp.n_ff) : -1;
    b.get_rows(x, tok_embd);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        b.layer(static_cast<int32_t>(il));
        b.rms_norm(xn, x, b.vector(p + "attn_norm.weight", d), eps, d);
        if (recurrent[il])
            delta_layer(b, p, s, xn, tmp, eps, next);
        else
            attention_layer(b, p, rope, xn, tmp, eps);
        b.add(x, tmp);
        ffn_block(b, p, moe && (!next || b.find(p + "ffn_gate_inp.weight")), x, xn, tmp, gate, up, eps);
    }
    b.output(decoder_logits(b, x, tok_embd, eps, "output_norm.weight", n_nextn > 0));
}

// --- The multi-token-prediction block -----------------------------------------------------------------
// The first of the file's nextn_predict_layers blocks (blk.<n_layer>., after the model's own layers) as a
// program of its own: for a token x at position p it reads the model's final hidden state h (after
// output_norm) of position p - 1 as its input rows and predicts the token after x:
//   u = eh_proj · [enorm(embed(x)) ; hnorm(h)]     (the embedding's half first; eh_proj [2 n_embd, n_embd])
//   u += gated attention(attn_norm(u))              (the model's attention layer, with its own KV rows)
//   u += FFN(post_attention_norm(u))                (dense, or routed plus shared experts)
//   logits = head · shared_head_norm(u)
// with embed nextn.embed_tokens where the file has it (else token_embd) and head nextn.shared_head_head
// where it has it (else the model's output matrix). Its hidden rows are shared_head_norm(u): drafting
// several tokens feeds them back as h with the token just drafted. A program of one KV layer.
bool build_qwen35_mtp(ArchBuilder &b, bool moe) {
    read_decoder_shape(b, moe);
    HParams &hp = b.hp();
    const uint32_t n_nextn = b.u32("nextn_predict_layers", 0u);
    if (n_nextn == 0) return false;
    if (n_nextn >= hp.n_layer)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.nextn_predict_layers' (%u) must be below block_count (%u)",
             b.arch().c_str(), n_nextn, hp.n_layer);
    const std::string p = "blk." + std::to_string(hp.n_layer - n_nextn) + ".";
    hp.n_layer = 1;
    const float eps = b.f32("attention.layer_norm_rms_epsilon", 1e-6f);
    const ArchBuilder::Rope rope = read_decoder_rope(b, EMBER_GRAPH_ROPE_NEOX);
    const int32_t tok_embd = token_embedding(b);
    const uint32_t d = hp.n_embd;
    const int32_t own_embd = b.matrix(p + "nextn.embed_tokens.weight", d, hp.n_vocab, false);
    int32_t head = b.matrix(p + "nextn.shared_head_head.weight", d, hp.n_vocab, false);
    if (head < 0) head = b.matrix("output.weight", d, hp.n_vocab, false);
    if (head < 0) head = tok_embd;   // tied embeddings

    const int32_t e = b.buf(d), h = b.buf(d), eh = b.buf(2 * d), x = b.buf(d), xn = b.buf(d), tmp = b.buf(d);
    const int32_t gate = hp.n_ff ? b.buf(hp.n_ff) : -1, up = hp.n_ff ? b.buf(hp.n_ff) : -1;
    b.layer(0);
    b.get_rows(e, own_embd >= 0 ? own_embd : tok_embd);
    b.input_rows(h);
    b.rms_norm(e, e, b.vector(p + "nextn.enorm.weight", d), eps, d);
    b.rms_norm(h, h, b.vector(p + "nextn.hnorm.weight", d), eps, d);
    b.copy_cols(eh, e, 1, 0, d, 0);
    b.copy_cols(eh, h, 1, 0, d, d);
    b.matmul(x, eh, b.matrix(p + "nextn.eh_proj.weight", 2 * d, d));
    b.rms_norm(xn, x, b.vector(p + "attn_norm.weight", d), eps, d);
    attention_layer(b, p, rope, xn, tmp, eps);
    b.add(x, tmp);
    ffn_block(b, p, moe, x, xn, tmp, gate, up, eps);
    b.output(logits_head(b, x, b.vector(p + "nextn.shared_head_norm.weight", d), head, eps, true));
    return true;
}

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_qwen35 = {"qwen35", [](ArchBuilder &b) { build_qwen35(b, false); },
                                          [](ArchBuilder &b) { return build_qwen35_mtp(b, false); }};

} // namespace ember
