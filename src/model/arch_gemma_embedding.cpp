// arch_gemma_embedding.cpp — gemma-embedding (EmbeddingGemma-300M): Gemma 3's layers (RMS pre- and post-norms,
// per-head q/k norms, GeGLU, embeddings scaled by sqrt(n_embd), five window layers to each global one
// unless attention.sliding_window_pattern says otherwise, the window layers roping with base
// rope.freq_base_swa or 10000) run as an encoder: attention both ways, scores scaled by 1/sqrt(head_dim),
// the output-normed hidden states pooled (mean unless the file names another).
//
// The window of a bidirectional layer is symmetric (a token sees those within sliding_window / 2 positions
// either side); build_decoder bounds texts to sliding_window / 2 + 1 tokens, where that is the whole text
// (512 in EmbeddingGemma: texts of up to 257 tokens).
//
// Files converted with sentence-transformers' dense modules carry dense_2 (n_embd -> n, optional bias)
// and dense_3 (n -> n_embd), applied to the pooled vector. Both are linear and every pooling is an
// average of rows (weights summing to 1), so they are applied here to each row the host pools: the
// pooled result is the same.
#include "model/arch.hpp"

#include "core/error.hpp"

namespace ember {

DecoderOptions gemma_decoder_options(ArchBuilder &b, uint32_t layers_of_27b);  // arch_gemma2.cpp

namespace {

// A feature count "<arch>.<key>" where the file gives one: it must be `expect`.
void check_feature_count(ArchBuilder &b, const char *key, int64_t expect) {
    const std::string full = b.arch() + "." + key;
    if (!b.file().find(full)) return;
    const uint32_t v = b.u32(key, std::nullopt);
    if (v != expect)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s' = %u, but the dense tensors need %lld", full.c_str(), v, (long long)expect);
}

// dense_2 then dense_3 over the output rows (see the file's comment); sets the program's output.
void dense_projections(ArchBuilder &b) {
    const uint32_t d = b.hp().n_embd;
    int32_t cur = b.desc().logits_buf;
    int64_t width = d;
    if (const TensorRef *d2 = b.find("dense_2.weight")) {
        if (d2->n_dims != 2 || d2->ne[0] != d || d2->ne[1] < 1 || d2->ne[1] > (1 << 20))
            fail(EMBER_ERR_INVALID_MODEL, "tensor 'dense_2.weight' has shape [%lld, %lld], expected [%u, n]",
                 (long long)d2->ne[0], (long long)d2->ne[1], d);
        width = d2->ne[1];
        check_feature_count(b, "dense_2_feat_in", d);
        check_feature_count(b, "dense_2_feat_out", width);
        const int32_t out = b.buf(static_cast<uint32_t>(width), true);
        b.matmul(out, cur, b.matrix("dense_2.weight", d, width), b.vector("dense_2.bias", width, false));
        cur = out;
    }
    if (b.find("dense_3.weight")) {
        // Back to n_embd, as llama.cpp requires (dense_3_feat_out = n_embd).
        check_feature_count(b, "dense_3_feat_in", width);
        check_feature_count(b, "dense_3_feat_out", d);
        const int32_t out = b.buf(d, true);
        b.matmul(out, cur, b.matrix("dense_3.weight", width, d));
        cur = out;
    } else if (width != d) {
        fail(EMBER_ERR_INVALID_MODEL, "tensor 'dense_2.weight' leads to %lld values but there is no 'dense_3.weight' back "
             "to %u", (long long)width, d);
    }
    b.output(cur);
}

void build_gemma_embedding(ArchBuilder &b) {
    DecoderOptions o = gemma_decoder_options(b, 0);   // 0: no layer count scales by n_embd / n_head
    o.after_qkv = qk_norm_per_head;
    o.window = b.u32("attention.sliding_window", std::nullopt);
    read_window_pattern(b, o, 6);
    o.window_theta = b.f32("rope.freq_base_swa", 10000.0f);
    o.bidirectional = true;
    build_decoder(b, o);
    if (b.desc().embedding.pooling == Pooling::Rank)
        fail(EMBER_ERR_UNSUPPORTED, "gemma-embedding with a ranking head (pooling type 4) is not supported");
    dense_projections(b);
}

} // namespace

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_gemma_embedding = {"gemma-embedding", build_gemma_embedding};

} // namespace ember
