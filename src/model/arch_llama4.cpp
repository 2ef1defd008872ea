// arch_llama4.cpp — Llama 4's text model (Scout 17B-16E, Maverick 17B-128E): Llama's pre-norm layers
// (rope on adjacent pairs, grouped-query attention, SwiGLU) with three kinds of attention layer and two of
// FFN, as llama.cpp runs these files:
//  - Attention: layers il with (il + 1) % no_rope_layer_step == 0 (every fourth) have no rotary embedding
//    and attend globally, their queries scaled by the attention temperature 1 + s ln(floor((p + 1) / n) + 1)
//    at position p (s 0.1, n 8192: nothing changes before position 8191); the others rope and attend
//    within chunks of attention.chunk_size positions (the query at p sees the keys j <= p with
//    j / chunk == p / chunk), in the layers attention.sliding_window_pattern marks (a period, 4: three of
//    four; or one flag per layer), and their q and k are RMS-normed per head without a weight after the
//    rope (the checkpoint's L2 norm; not in the 128-expert Maverick, whose configuration turns it off).
//  - FFN: every interleave_moe_layer_step-th layer ((il + 1) % step == 0) a mixture of experts: the
//    router's expert_used_count largest logits chosen, each expert's input scaled by the sigmoid of its
//    logit (graph.h's EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT), plus an ungated shared expert of the experts'
//    width (ffn_*_shexp); a dense SwiGLU of feed_forward_length in the other layers.
// The converters write neither the chunk size nor the no-rope step nor the temperature: llama.cpp fixes
// them at the checkpoints' 8192, 4, 0.1 and 8192, and so does this file where the metadata is silent
// (attention.chunk_size, no_rope_layer_step, attention.temperature_scale and attention.temperature_length
// override them). A file whose attention.sliding_window is 0 (MobileLLM-R1's layout) has neither chunks
// nor the temperature and ropes every layer but the last, as llama.cpp reads it.
#include "model/arch.hpp"

#include "core/error.hpp"

#include <cmath>

namespace ember {
namespace {

// A positive "<arch>.<key>" (the fallback where absent); 0 is refused naming the key.
uint32_t positive(ArchBuilder &b, const char *key, std::optional<uint32_t> fallback, const char *what) {
    const uint32_t v = b.u32(key, fallback);
    if (v == 0) fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.%s' is 0 (%s)", b.arch().c_str(), key, what);
    return v;
}

// The layout of a Llama 4 file's layers (see the top of this file).
struct Llama4Layout {
    uint32_t moe_step = 0, no_rope_step = 0, chunk = 0;
    std::vector<bool> chunked;   // [n_layer] the layers of chunked attention
    float temp_scale = 0;
    uint32_t temp_floor = 0;
    bool kq_norm = true;
};

Llama4Layout read_layout(ArchBuilder &b) {
    const HParams &hp = b.hp();
    Llama4Layout l;
    l.moe_step = positive(b, "interleave_moe_layer_step", std::nullopt, "the experts' layer step");
    const gguf::KV *swa = b.file().find(b.arch() + ".attention.sliding_window");
    if (swa && b.u32("attention.sliding_window", 0u) == 0) {
        l.no_rope_step = hp.n_layer;   // no chunks, no temperature; only the last layer unroped
    } else {
        l.chunk = positive(b, "attention.chunk_size", 8192u, "the local attention's chunk");
        l.no_rope_step = positive(b, "no_rope_layer_step", 4u, "the global layers' step");
        // Which layers are chunked: attention.sliding_window_pattern as a period p (layer il when
        // il % p < p - 1; 0: every layer) or one flag per layer, as llama.cpp reads it.
        DecoderOptions pattern;
        read_window_pattern(b, pattern, 4);
        l.chunked.resize(hp.n_layer);
        const uint32_t p = pattern.window_pattern;
        for (uint32_t il = 0; il < hp.n_layer; ++il)
            l.chunked[il] = pattern.window_layers.empty() ? p == 0 || il % p < p - 1 : bool(pattern.window_layers[il]);
        l.temp_scale = b.f32("attention.temperature_scale", 0.1f);
        l.temp_floor = positive(b, "attention.temperature_length", 8192u, "the attention temperature's length");
    }
    l.kq_norm = hp.n_expert != 128;
    return l;
}

// out = ffn_down<sfx> · (silu(ffn_gate<sfx> · in) * ffn_up<sfx> · in), through the buffers gate and up
// (their width the FFN's): the dense layers' FFN (sfx "") and the shared expert ("_shexp").
void swiglu_ffn(ArchBuilder &b, const std::string &p, const char *sfx, int32_t in, int32_t out, int32_t gate,
                int32_t up) {
    const uint32_t d = b.hp().n_embd, n_ff = b.desc().bufs[static_cast<size_t>(gate)].width;
    b.matmul(gate, in, b.matrix(p + "ffn_gate" + sfx + ".weight", d, n_ff));
    b.matmul(up, in, b.matrix(p + "ffn_up" + sfx + ".weight", d, n_ff));
    b.swiglu(gate, gate, up);
    b.matmul(out, gate, b.matrix(p + "ffn_down" + sfx + ".weight", n_ff, d));
}

void build_llama4(ArchBuilder &b) {
    read_decoder_shape(b, true);
    HParams &hp = b.hp();
    const Llama4Layout lay = read_layout(b);
    const float eps = b.f32("attention.layer_norm_rms_epsilon", 1e-5f);
    const ArchBuilder::Rope rope = read_decoder_rope(b, EMBER_GRAPH_ROPE_NORMAL);
    if (rope.n_rot != hp.head_dim)
        fail(EMBER_ERR_UNSUPPORTED, "llama4: rope.dimension_count %u differs from the head dimension %u", rope.n_rot,
             hp.head_dim);
    ArchBuilder::Rope chunk_rope = rope;
    chunk_rope.theta = b.f32("rope.freq_base_swa", rope.theta);
    const uint32_t n_ff_exp = positive(b, "expert_feed_forward_length", std::nullopt, "the experts' FFN width");
    bool any_dense = false;
    for (uint32_t il = 0; il < hp.n_layer; ++il) any_dense |= (il + 1) % lay.moe_step != 0;
    if (any_dense && hp.n_ff == 0)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.feed_forward_length' is 0 (the dense layers' FFN width)",
             b.arch().c_str());

    const int32_t tok_embd = token_embedding(b);
    const uint32_t d = hp.n_embd, nq = hp.n_embd_q(), nkv = hp.n_embd_kv(), hd = hp.head_dim;
    const float attn_scale = b.f32("attention.scale", 1.0f / std::sqrt(static_cast<float>(hd)));
    const int32_t x = b.buf(d), xn = b.buf(d), tmp = b.buf(d), shared = b.buf(d), q = b.buf(nq), k = b.buf(nkv),
                  v = b.buf(nkv), attn = b.buf(nq), router = b.buf(hp.n_expert);
    const int32_t gate_d = any_dense ? b.buf(hp.n_ff) : -1, up_d = any_dense ? b.buf(hp.n_ff) : -1;
    const int32_t gate_s = b.buf(n_ff_exp), up_s = b.buf(n_ff_exp);

    b.get_rows(x, tok_embd);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        b.layer(static_cast<int32_t>(il));
        const bool roped = (il + 1) % lay.no_rope_step != 0;
        const bool chunked = lay.chunk > 0 && lay.chunked[il];
        b.rms_norm(xn, x, b.vector(p + "attn_norm.weight", d), eps, d);
        b.matmul(q, xn, b.matrix(p + "attn_q.weight", d, nq));
        b.matmul(k, xn, b.matrix(p + "attn_k.weight", d, nkv));
        b.matmul(v, xn, b.matrix(p + "attn_v.weight", d, nkv));
        ArchBuilder::AttnExt ext;
        if (roped) {
            b.rope(q, hp.n_head, hd, chunked ? chunk_rope : rope);
            b.rope(k, hp.n_head_kv, hd, chunked ? chunk_rope : rope);
            if (lay.kq_norm) {
                b.rms_norm(q, q, -1, eps, hd);
                b.rms_norm(k, k, -1, eps, hd);
            }
        } else if (lay.temp_scale != 0) {
            ext.temp_scale = lay.temp_scale, ext.temp_offset = 1.0f, ext.temp_floor = lay.temp_floor;
        }
        if (chunked) ext.local_chunk = lay.chunk;
        b.kv_store(k, v);
        b.attention(attn, q, hp.n_head, hp.n_head_kv, hd, attn_scale, ext);
        b.matmul(tmp, attn, b.matrix(p + "attn_output.weight", nq, d));
        b.add(x, tmp);

        b.rms_norm(xn, x, b.vector(p + "ffn_norm.weight", d), eps, d);
        if ((il + 1) % lay.moe_step == 0) {
            b.matmul(router, xn, b.matrix(p + "ffn_gate_inp.weight", d, hp.n_expert));
            ArchBuilder::Moe m = read_experts(b, p, n_ff_exp);
            m.gating = EMBER_GRAPH_MOE_GATE_SIGMOID_INPUT;
            b.moe(tmp, xn, router, m);
            swiglu_ffn(b, p, "_shexp", xn, shared, gate_s, up_s);
            b.add(tmp, shared);
        } else {
            swiglu_ffn(b, p, "", xn, tmp, gate_d, up_d);
        }
        b.add(x, tmp);
    }
    b.output(decoder_logits(b, x, tok_embd, eps));
}

} // namespace

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_llama4 = {"llama4", build_llama4};

} // namespace ember
