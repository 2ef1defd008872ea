// arch_nomic_bert.cpp — nomic-bert (nomic-embed-text v1 / v1.5): a BERT encoder with rotary positions
// instead of a learned position table. The token embeddings plus the first token-type row go through a
// LayerNorm; each post-norm layer is x = LN(x + Wo·attn(rope(q), rope(k), v)) with q, k, v from one fused
// matrix (attn_qkv), then x = LN(x + W2·(silu(Wg·x) * Wu·x)); attention both ways, rope of the NEOX kind
// over the whole head with base rope.freq_base. Mean pooling unless the file names another.
//
// rope.freq_base is required: the checkpoints use 1000, not the usual default of 10000, so a file without
// it would give wrong vectors rather than an error.
#include "model/arch.hpp"

#include "core/error.hpp"

#include <cmath>

namespace ember {

namespace {

void build_nomic_bert(ArchBuilder &b) {
    read_decoder_shape(b, false);
    const Pooling pooling = read_pooling(b, true);
    HParams &hp = b.hp();
    const std::string base_key = b.arch() + ".rope.freq_base";
    if (!b.file().find(base_key))
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' is missing: nomic-bert's rotary base (1000 in nomic-embed-text) has "
             "no safe default", base_key.c_str());
    const ArchBuilder::Rope rope = read_decoder_rope(b, EMBER_GRAPH_ROPE_NEOX);
    const float eps = b.f32("attention.layer_norm_epsilon", 1e-12f);
    const int32_t tok_embd = token_embedding(b);
    const uint32_t d = hp.n_embd, nq = hp.n_embd_q(), nkv = hp.n_embd_kv(), hd = hp.head_dim, nff = hp.n_ff;

    // The token-type row 0 ("sentence A", the only one embeddings use) is the same for every token; as a
    // table added by position (one row per position the model takes) it joins the embeddings with the op
    // BERT's learned positions use.
    const int32_t type_rows = [&]() -> int32_t {
        const TensorRef *types = b.find("token_types.weight");
        if (!types) return -1;
        if (types->n_dims < 1 || types->ne[0] != d) fail(EMBER_ERR_INVALID_MODEL, "tensor 'token_types.weight' must have rows of %u", d);
        const std::vector<float> t = b.f32_values(*types);
        std::vector<float> table(size_t{hp.n_ctx_train} * d);
        for (size_t i = 0; i < table.size(); ++i) table[i] = t[i % d];
        return b.made_matrix("token_types[0] by position", std::move(table), d, hp.n_ctx_train);
    }();

    const int32_t x = b.buf(d), tmp = b.buf(d), q = b.buf(nq), k = b.buf(nkv), v = b.buf(nkv), attn = b.buf(nq),
                  gate = b.buf(nff), up = b.buf(nff);
    b.get_rows(x, tok_embd);
    if (type_rows >= 0) b.add_pos_rows(x, type_rows);
    b.layer_norm(x, x, b.vector("token_embd_norm.weight", d), b.vector("token_embd_norm.bias", d), eps);
    ArchBuilder::AttnExt ext;
    ext.bidirectional = true;
    const int64_t n_qkv = int64_t{nq} + 2 * int64_t{nkv};
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        b.layer(static_cast<int32_t>(il));
        const std::string qkv = p + "attn_qkv.weight", qkv_bias = p + "attn_qkv.bias";
        const bool biased = b.find(qkv_bias) != nullptr;
        b.matmul(q, x, b.matrix_rows(qkv, d, n_qkv, 0, nq), biased ? b.f32_slice(qkv_bias, n_qkv, 0, nq) : -1);
        b.matmul(k, x, b.matrix_rows(qkv, d, n_qkv, nq, nkv), biased ? b.f32_slice(qkv_bias, n_qkv, nq, nkv) : -1);
        b.matmul(v, x, b.matrix_rows(qkv, d, n_qkv, nq + nkv, nkv), biased ? b.f32_slice(qkv_bias, n_qkv, nq + nkv, nkv) : -1);
        b.rope(q, hp.n_head, hd, rope);
        b.rope(k, hp.n_head_kv, hd, rope);
        b.kv_store(k, v);
        b.attention(attn, q, hp.n_head, hp.n_head_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd)), ext);
        b.matmul(tmp, attn, b.matrix(p + "attn_output.weight", nq, d), b.vector(p + "attn_output.bias", d, false));
        encoder_residual_norm(b, x, tmp, p + "attn_output_norm", eps);
        // The gated FFN has no biases in these checkpoints (llama.cpp reads none for it either).
        b.matmul(gate, x, b.matrix(p + "ffn_gate.weight", d, nff));
        b.matmul(up, x, b.matrix(p + "ffn_up.weight", d, nff));
        b.swiglu(gate, gate, up);
        b.matmul(tmp, gate, b.matrix(p + "ffn_down.weight", nff, d));
        encoder_residual_norm(b, x, tmp, p + "layer_output_norm", eps);
    }
    encoder_output(b, x, pooling);
}

} // namespace

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_nomic_bert = {"nomic-bert", build_nomic_bert};

} // namespace ember
