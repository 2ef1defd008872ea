// arch_lfm2.cpp — Liquid's LFM2 (dense; arch_lfm2moe.cpp adds experts): a hybrid of gated short-convolution
// blocks, whose memory per sequence is a window of the last shortconv.l_cache - 1 inputs, and GQA attention
// blocks. A layer is a convolution block where attention.head_count_kv (one entry per layer) is 0, an
// attention block elsewhere, as llama.cpp decides it. Pre-norm residuals: attn_norm before the block,
// ffn_norm before the SwiGLU FFN; the final norm is named token_embd_norm; output tied to the embedding
// where output.weight is absent.
//
// Convolution block: shortconv.in_proj gives three rows of n_embd, B, C and x; B * x passes a causal
// depthwise convolution of l_cache taps (shortconv.conv, no bias, no activation: graph.h's SSM_CONV with
// EMBER_GRAPH_SSM_CONV_LINEAR); C times its output goes through shortconv.out_proj.
// Attention block: q, k, v; per-head RMSNorm of q and k (attn_q_norm, attn_k_norm); NEOX rope; attn_output.
#include "model/arch_lfm2.hpp"

#include "core/error.hpp"

#include <cmath>
#include <vector>

namespace ember {

std::vector<bool> read_recurrent_layers(ArchBuilder &b) {
    HParams &hp = b.hp();
    const std::string key = b.arch() + ".attention.head_count_kv";
    std::vector<bool> conv(hp.n_layer, false);
    const gguf::KV *kv = b.file().find(key);
    const gguf::Value *arr = kv && kv->value.type == gguf::ValueType::ARRAY ? &kv->value : nullptr;
    if (!arr) {
        hp.n_head_kv = b.u32("attention.head_count_kv", hp.n_head);
        if (hp.n_head_kv == 0) fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' is 0 for every layer", key.c_str());
        return conv;
    }
    if (arr->count != hp.n_layer)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' has %llu entries for %u layers", key.c_str(),
             (unsigned long long)arr->count, hp.n_layer);
    hp.n_head_kv = 0;
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const int64_t v = arr->array_int(il);
        if (v < 0 || v > 4096) fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' entry %u (%lld) is out of range", key.c_str(), il, (long long)v);
        conv[il] = v == 0;
        if (v == 0) continue;
        if (hp.n_head_kv != 0 && hp.n_head_kv != v)
            fail(EMBER_ERR_UNSUPPORTED, "metadata '%s': attention layers with %u and %lld KV heads (one count is supported)",
                 key.c_str(), hp.n_head_kv, (long long)v);
        hp.n_head_kv = static_cast<uint32_t>(v);
    }
    if (hp.n_head_kv == 0) hp.n_head_kv = hp.n_head;   // no attention layer: the KV shape is never used
    return conv;
}

namespace {

void conv_block(ArchBuilder &b, const std::string &p, uint32_t l_cache, int32_t xn, int32_t out, const int32_t bcx[3]) {
    const uint32_t d = b.hp().n_embd;
    const std::string in = p + "shortconv.in_proj.weight";
    if (const TensorRef *k = b.find(p + "shortconv.conv.weight"); k && k->ne[0] != l_cache)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.shortconv.l_cache' (%u) does not match tensor '%sshortconv.conv.weight' "
             "of %lld taps", b.arch().c_str(), l_cache, p.c_str(), (long long)k->ne[0]);
    // B, C and x are row ranges of in_proj, products of one input (the CPU quantizes it once for the three).
    for (int i = 0; i < 3; ++i) b.matmul(bcx[i], xn, b.matrix_rows(in, d, 3 * int64_t{d}, i * int64_t{d}, d));
    b.mul(bcx[2], bcx[0], bcx[2]);                                                  // B * x
    b.ssm_conv(bcx[0], bcx[2], b.f32_matrix(p + "shortconv.conv.weight", l_cache, d), false);
    b.mul(bcx[0], bcx[1], bcx[0]);                                                  // C * conv(B * x)
    b.matmul(out, bcx[0], b.matrix(p + "shortconv.out_proj.weight", d, d));
}

void attention_block(ArchBuilder &b, const std::string &p, const ArchBuilder::Rope &rope, int32_t xn, int32_t out,
                     float eps, const int32_t qkv[4]) {
    const HParams &hp = b.hp();
    const uint32_t d = hp.n_embd, hd = hp.head_dim, nq = hp.n_embd_q(), nkv = hp.n_embd_kv();
    const int32_t q = qkv[0], k = qkv[1], v = qkv[2], attn = qkv[3];
    b.matmul(q, xn, b.matrix(p + "attn_q.weight", d, nq));
    b.matmul(k, xn, b.matrix(p + "attn_k.weight", d, nkv));
    b.matmul(v, xn, b.matrix(p + "attn_v.weight", d, nkv));
    b.rms_norm(q, q, b.vector(p + "attn_q_norm.weight", hd), eps, hd);
    b.rms_norm(k, k, b.vector(p + "attn_k_norm.weight", hd), eps, hd);
    rope_store_attend(b, q, k, v, attn, &rope, 1.0f / std::sqrt(static_cast<float>(hd)));
    b.matmul(out, attn, b.matrix(p + "attn_output.weight", nq, d));
}

} // namespace

void build_lfm2(ArchBuilder &b, bool moe) {
    HParams &hp = b.hp();
    hp.n_embd = b.u32("embedding_length", std::nullopt);
    hp.n_layer = b.u32("block_count", std::nullopt);
    hp.n_ff = b.u32("feed_forward_length", moe ? std::optional<uint32_t>(0) : std::nullopt);
    hp.n_head = b.u32("attention.head_count", std::nullopt);
    hp.n_ctx_train = b.u32("context_length", 2048u);
    if (hp.n_embd == 0 || hp.n_embd > (1u << 20) || hp.n_layer == 0 || hp.n_layer > 4096 || hp.n_head == 0 ||
        hp.n_head > 4096 || hp.n_embd % hp.n_head != 0 || (hp.n_ff == 0 && !moe))
        fail(EMBER_ERR_INVALID_MODEL, "implausible model dimensions (embedding %u, layers %u, heads %u, ffn %u)", hp.n_embd,
             hp.n_layer, hp.n_head, hp.n_ff);
    const std::vector<bool> conv = read_recurrent_layers(b);
    if (hp.n_head % hp.n_head_kv != 0)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.attention.head_count' (%u) is not a multiple of the KV heads (%u)",
             b.arch().c_str(), hp.n_head, hp.n_head_kv);
    hp.head_dim = hp.n_embd / hp.n_head;
    if (hp.head_dim > 256 || hp.head_dim % 2)
        fail(EMBER_ERR_UNSUPPORTED, "head dimension %u is not supported (even, at most 256)", hp.head_dim);
    const uint32_t l_cache = b.u32("shortconv.l_cache", std::nullopt);
    if (l_cache < 2 || l_cache > 64)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.shortconv.l_cache' (%u) must be 2..64", b.arch().c_str(), l_cache);
    if (b.u32("attention.sliding_window", 0u) != 0)
        fail(EMBER_ERR_UNSUPPORTED, "metadata '%s.attention.sliding_window': windowed LFM2 attention is not supported",
             b.arch().c_str());
    const float eps = b.f32("attention.layer_norm_rms_epsilon", 1e-5f);
    const ArchBuilder::Rope rope = read_decoder_rope(b, EMBER_GRAPH_ROPE_NEOX);
    const Lfm2Moe experts = moe ? read_lfm2_moe(b) : Lfm2Moe{};

    const int32_t tok_embd = token_embedding(b);
    const uint32_t d = hp.n_embd;

    const int32_t x = b.buf(d), xn = b.buf(d), tmp = b.buf(d);
    const int32_t bcx[3] = {b.buf(d), b.buf(d), b.buf(d)};
    const int32_t qkv[4] = {b.buf(hp.n_embd_q()), b.buf(hp.n_embd_kv()), b.buf(hp.n_embd_kv()), b.buf(hp.n_embd_q())};
    const int32_t gate = hp.n_ff ? b.buf(hp.n_ff) : -1, up = hp.n_ff ? b.buf(hp.n_ff) : -1;
    b.get_rows(x, tok_embd);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        b.layer(static_cast<int32_t>(il));
        b.rms_norm(xn, x, b.vector(p + "attn_norm.weight", d), eps, d);
        if (conv[il])
            conv_block(b, p, l_cache, xn, tmp, bcx);
        else
            attention_block(b, p, rope, xn, tmp, eps, qkv);
        b.add(x, tmp);
        b.rms_norm(xn, x, b.vector(p + "ffn_norm.weight", d), eps, d);
        if (moe && il >= experts.n_dense_lead) {
            lfm2_moe_ffn(b, experts, p, xn, tmp);
        } else {
            b.matmul(gate, xn, b.matrix(p + "ffn_gate.weight", d, hp.n_ff));
            b.matmul(up, xn, b.matrix(p + "ffn_up.weight", d, hp.n_ff));
            b.swiglu(gate, gate, up);
            b.matmul(tmp, gate, b.matrix(p + "ffn_down.weight", hp.n_ff, d));
        }
        b.add(x, tmp);
    }
    b.output(decoder_logits(b, x, tok_embd, eps, "token_embd_norm.weight"));
}

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_lfm2 = {"lfm2", [](ArchBuilder &b) { build_lfm2(b, false); }};

} // namespace ember
