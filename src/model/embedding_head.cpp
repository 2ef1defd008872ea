// embedding_head.cpp — what makes a model an embedding or reranking model: its pooling type, whether it
// attends both ways, and the program's output (hidden states for the host to pool, or a ranking head).
#include "model/arch.hpp"

#include "core/error.hpp"
#include "model/model.hpp"

namespace ember {

Pooling read_pooling(ArchBuilder &b, bool encoder) {
    EmbeddingInfo &info = b.desc().embedding;
    const uint32_t type = b.u32("pooling_type", 0u);
    if (type > static_cast<uint32_t>(Pooling::Rank))
        fail(EMBER_ERR_UNSUPPORTED, "pooling type %u is not supported (none, mean, cls, last, rank)", type);
    info.pooling = static_cast<Pooling>(type);
    const std::optional<bool> causal = b.file().get_bool(b.arch() + ".attention.causal");
    info.encoder = encoder || (causal && !*causal);
    // An encoder's output is its hidden states whatever the file says (mean pooling when it names none, as
    // llama.cpp does for BERT); a decoder with a pooling type is an embedding model.
    if (info.encoder && info.pooling == Pooling::None) info.pooling = Pooling::Mean;
    info.outputs_hidden = info.pooling != Pooling::None;
    return info.pooling;
}

void embedding_output(ArchBuilder &b, int32_t hidden, Pooling pooling) {
    const uint32_t d = b.hp().n_embd;
    int32_t cur = hidden;
    if (pooling == Pooling::Rank) {
        // The classification head over the pooled row (the first token's for an encoder, the last one's for
        // a decoder: the host asks for that row): dense + tanh (tanh = softcap 1), then the output layer.
        const int32_t cls = b.matrix("cls.weight", d, d, false);
        if (cls >= 0) {
            const int32_t t = b.buf(d, true);
            b.matmul(t, cur, cls, b.vector("cls.bias", d, false));
            b.softcap(t, t, 1.0f);
            cur = t;
        }
        const TensorRef *out = b.find("cls.output.weight");
        if (!out && cls < 0) fail(EMBER_ERR_INVALID_MODEL, "a ranking model without cls.weight or cls.output.weight");
        if (out) {
            const int64_t n_out = out->ne[1];
            if (n_out < 1 || n_out > 64) fail(EMBER_ERR_INVALID_MODEL, "cls.output.weight has %lld outputs", (long long)n_out);
            const int32_t o = b.buf(static_cast<uint32_t>(n_out), true);
            b.matmul(o, cur, b.matrix("cls.output.weight", d, n_out), b.vector("cls.output.bias", n_out, false));
            cur = o;
            // A head of two rows and no dense layer is a decoder's yes / no pair taken from its vocabulary
            // product (Qwen3-Reranker): the score is P(yes), the softmax's first output.
            b.desc().embedding.rank_softmax = cls < 0 && n_out == 2;
        }
    }
    b.output(cur);
}

} // namespace ember

namespace ember {

void refuse_embedding_model(const Model &model, const char *what) {
    const EmbeddingInfo &e = model.desc().embedding;
    if (!e.outputs_hidden) return;
    static const char *const kNames[] = {"none", "mean", "cls", "last", "rank"};
    fail(EMBER_ERR_UNSUPPORTED, "'%s' is %s (pooling %s): it has no next-token logits, so %s cannot generate with it; "
         "use ember_embed or ember_rerank", model.arch().c_str(),
         e.pooling == Pooling::Rank ? "a reranking model" : e.encoder ? "an encoder-only embedding model" : "an embedding model",
         kNames[static_cast<uint32_t>(e.pooling)], what);
}

} // namespace ember
