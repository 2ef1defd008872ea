// arch_bert.cpp — BERT encoders (bge, all-MiniLM, e5, ...): learned absolute positions and the first
// token-type row added to the token embeddings, a LayerNorm, then post-norm layers: x = LN(x + Wo·attn(x)),
// x = LN(x + W2·gelu(W1·x)), every product with a bias, attention both ways. An embedding model: the
// output is each token's last hidden state (pooled by the host) or, for a reranker, the CLS row's head.
#include "model/arch.hpp"

#include "core/error.hpp"

#include <cmath>

namespace ember {

namespace {

void build_bert(ArchBuilder &b) {
    read_decoder_shape(b, false);
    const Pooling pooling = read_pooling(b, true);
    HParams &hp = b.hp();
    const float eps = b.f32("attention.layer_norm_epsilon", 1e-12f);
    const TensorRef *emb = b.find("token_embd.weight");
    if (!emb) fail(EMBER_ERR_INVALID_MODEL, "tensor 'token_embd.weight' is missing");
    hp.n_vocab = static_cast<uint32_t>(emb->ne[1]);
    const uint32_t d = hp.n_embd, nq = hp.n_embd_q(), nkv = hp.n_embd_kv(), hd = hp.head_dim, nff = hp.n_ff;

    // Position embeddings with the token-type row 0 ("sentence A", the only one embeddings use) folded in:
    // one table added by position.
    const TensorRef *pos = b.find("position_embd.weight");
    if (!pos || pos->n_dims != 2 || pos->ne[0] != d || pos->ne[1] < 1)
        fail(EMBER_ERR_INVALID_MODEL, "tensor 'position_embd.weight' must be [%u, n_positions]", d);
    std::vector<float> table = b.f32_values(*pos);
    if (const TensorRef *types = b.find("token_types.weight")) {
        if (types->n_dims < 1 || types->ne[0] != d) fail(EMBER_ERR_INVALID_MODEL, "tensor 'token_types.weight' must have rows of %u", d);
        const std::vector<float> t = b.f32_values(*types);
        for (size_t i = 0; i < table.size(); ++i) table[i] += t[i % d];
    }
    hp.n_ctx_train = static_cast<uint32_t>(pos->ne[1]);   // no position past the table
    const int32_t pos_table = b.made_matrix("position_embd+token_types[0]", std::move(table), d, pos->ne[1]);

    const int32_t x = b.buf(d), tmp = b.buf(d), q = b.buf(nq), k = b.buf(nkv), v = b.buf(nkv), attn = b.buf(nq),
                  up = b.buf(nff);
    b.get_rows(x, b.matrix("token_embd.weight", d, hp.n_vocab));
    b.add_pos_rows(x, pos_table);
    b.layer_norm(x, x, b.vector("token_embd_norm.weight", d), b.vector("token_embd_norm.bias", d), eps);
    ArchBuilder::AttnExt ext;
    ext.bidirectional = true;
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        b.layer(static_cast<int32_t>(il));
        b.matmul(q, x, b.matrix(p + "attn_q.weight", d, nq), b.vector(p + "attn_q.bias", nq, false));
        b.matmul(k, x, b.matrix(p + "attn_k.weight", d, nkv), b.vector(p + "attn_k.bias", nkv, false));
        b.matmul(v, x, b.matrix(p + "attn_v.weight", d, nkv), b.vector(p + "attn_v.bias", nkv, false));
        b.kv_store(k, v);
        b.attention(attn, q, hp.n_head, hp.n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd)), ext);
        b.matmul(tmp, attn, b.matrix(p + "attn_output.weight", nq, d), b.vector(p + "attn_output.bias", d, false));
        encoder_residual_norm(b, x, tmp, p + "attn_output_norm", eps);
        b.matmul(up, x, b.matrix(p + "ffn_up.weight", d, nff), b.vector(p + "ffn_up.bias", nff, false));
        b.gelu(up, up);
        b.matmul(tmp, up, b.matrix(p + "ffn_down.weight", nff, d), b.vector(p + "ffn_down.bias", d, false));
        encoder_residual_norm(b, x, tmp, p + "layer_output_norm", eps);
    }
    encoder_output(b, x, pooling);
}

} // namespace

void encoder_residual_norm(ArchBuilder &b, int32_t x, int32_t tmp, const std::string &norm, float eps) {
    const uint32_t d = b.hp().n_embd;
    b.add(tmp, x);
    b.layer_norm(x, tmp, b.vector(norm + ".weight", d), b.vector(norm + ".bias", d), eps);
}

void encoder_output(ArchBuilder &b, int32_t x, Pooling pooling) {
    b.layer(static_cast<int32_t>(b.hp().n_layer));
    const int32_t rows = b.buf(b.hp().n_embd, true);
    b.gather_logits(rows, x);
    embedding_output(b, rows, pooling);
}

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_bert = {"bert", build_bert};

} // namespace ember
