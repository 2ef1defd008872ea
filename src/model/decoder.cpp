// decoder.cpp — the usual pre-norm decoder (arch.hpp's build_decoder), shared by the architectures that
// differ from it only in options: its hyper-parameters, tensors and ops.
#include "model/arch.hpp"

#include "core/error.hpp"

#include <cmath>

namespace ember {

namespace {

// The shape every decoder of this kind has: "<arch>.*" keys, checked.
void read_shape(ArchBuilder &b) {
    HParams &hp = b.hp();
    hp.n_embd = b.u32("embedding_length", std::nullopt);
    hp.n_layer = b.u32("block_count", std::nullopt);
    hp.n_ff = b.u32("feed_forward_length", std::nullopt);
    hp.n_head = b.u32("attention.head_count", std::nullopt);
    hp.n_head_kv = b.u32("attention.head_count_kv", hp.n_head);
    hp.n_ctx_train = b.u32("context_length", 2048u);
    if (hp.n_embd == 0 || hp.n_layer == 0 || hp.n_head == 0 || hp.n_head_kv == 0 || hp.n_ff == 0)
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
}

// Rotary embedding: dimension count, base, linear scaling; Llama-3 factors from rope_freqs.
ArchBuilder::Rope read_rope(ArchBuilder &b, uint32_t mode) {
    const HParams &hp = b.hp();
    ArchBuilder::Rope r;
    r.mode = mode;
    r.n_rot = b.u32("rope.dimension_count", hp.head_dim);
    if (r.n_rot > hp.head_dim || r.n_rot % 2)
        fail(EMBER_ERR_INVALID_MODEL, "rope.dimension_count %u does not fit head dimension %u", r.n_rot, hp.head_dim);
    r.theta = b.f32("rope.freq_base", 10000.0f);
    if (auto type = b.str("rope.scaling.type"); type && *type != "none") {
        if (*type != "linear")
            fail(EMBER_ERR_UNSUPPORTED, "rope scaling type '%.*s' is not supported (none, linear; Llama-3 "
                 "scaling comes from rope_freqs)", (int)type->size(), type->data());
        const float factor = b.f32("rope.scaling.factor", 1.0f);
        if (!(factor > 0)) fail(EMBER_ERR_INVALID_MODEL, "rope.scaling.factor must be positive");
        r.freq_scale = 1.0f / factor;
    }
    if (const TensorRef *rf = b.find("rope_freqs.weight")) {
        if (rf->type != DType::F32 || rf->ne[0] != r.n_rot / 2)
            fail(EMBER_ERR_INVALID_MODEL, "rope_freqs.weight must be F32 with %u elements", r.n_rot / 2);
        r.factors = b.vector("rope_freqs.weight", r.n_rot / 2);
    }
    return r;
}

} // namespace

void build_decoder(ArchBuilder &b, const DecoderOptions &opt) {
    read_shape(b);
    HParams &hp = b.hp();
    const float eps = b.f32("attention.layer_norm_rms_epsilon", 1e-5f);
    const ArchBuilder::Rope rope = read_rope(b, opt.rope_mode);

    const TensorRef *emb = b.find("token_embd.weight");
    if (!emb) fail(EMBER_ERR_INVALID_MODEL, "tensor 'token_embd.weight' is missing");
    hp.n_vocab = static_cast<uint32_t>(emb->ne[1]);
    const uint32_t d = hp.n_embd, nq = hp.n_embd_q(), nkv = hp.n_embd_kv(), nff = hp.n_ff, hd = hp.head_dim;
    const int32_t tok_embd = b.matrix("token_embd.weight", d, hp.n_vocab);

    // Activations: the residual stream, its normed copy, attention's q/k/v and output, the FFN's halves.
    const int32_t x = b.buf(d), xn = b.buf(d), tmp = b.buf(d), q = b.buf(nq), k = b.buf(nkv), v = b.buf(nkv),
                  attn = b.buf(nq), gate = b.buf(nff), up = b.buf(nff);

    b.get_rows(x, tok_embd);
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        b.layer(static_cast<int32_t>(il));
        b.rms_norm(xn, x, b.vector(p + "attn_norm.weight", d), eps, d);
        b.matmul(q, xn, b.matrix(p + "attn_q.weight", d, nq), b.vector(p + "attn_q.bias", nq, opt.qkv_bias_required));
        b.matmul(k, xn, b.matrix(p + "attn_k.weight", d, nkv), b.vector(p + "attn_k.bias", nkv, opt.qkv_bias_required));
        b.matmul(v, xn, b.matrix(p + "attn_v.weight", d, nkv), b.vector(p + "attn_v.bias", nkv, opt.qkv_bias_required));
        if (opt.after_qkv) opt.after_qkv(b, DecoderLayer{il, p, q, k, v, eps});
        if (rope.n_rot > 0) {
            b.rope(q, hp.n_head, hd, rope);
            b.rope(k, hp.n_head_kv, hd, rope);
        }
        b.kv_store(k, v);
        b.attention(attn, q, hp.n_head, hp.n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd)));
        b.matmul(tmp, attn, b.matrix(p + "attn_output.weight", nq, d), b.vector(p + "attn_output.bias", d, false));
        b.add(x, tmp);
        b.rms_norm(xn, x, b.vector(p + "ffn_norm.weight", d), eps, d);
        b.matmul(gate, xn, b.matrix(p + "ffn_gate.weight", d, nff));
        b.matmul(up, xn, b.matrix(p + "ffn_up.weight", d, nff));
        b.swiglu(gate, gate, up);
        b.matmul(tmp, gate, b.matrix(p + "ffn_down.weight", nff, d));
        b.add(x, tmp);
    }
    // Only the rows whose logits are wanted go through the output norm and the vocabulary product.
    b.layer(static_cast<int32_t>(hp.n_layer));
    const int32_t xl = b.buf(d, true), xln = b.buf(d, true), logits = b.buf(hp.n_vocab, true);
    b.gather_logits(xl, x);
    b.rms_norm(xln, xl, b.vector("output_norm.weight", d), eps, d);
    int32_t out = b.matrix("output.weight", d, hp.n_vocab, false);
    if (out < 0) out = tok_embd;  // tied embeddings
    b.matmul(logits, xln, out);
    b.output(logits);
}

} // namespace ember
