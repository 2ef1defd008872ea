// arch_lfm2moe.cpp — LFM2-MoE (8B-A1B, 24B-A2B): arch_lfm2.cpp's layers with the FFN of every layer from
// leading_dense_block_count on a mixture of experts: the router's logits through a sigmoid, the
// expert_used_count experts with the largest sigmoid plus their selection bias (exp_probs_b) chosen, weighted
// by their sigmoids renormalised over the chosen (graph.h's EMBER_GRAPH_MOE_GATE_SIGMOID), as llama.cpp runs
// these files (expert_gating_func 2).
#include "model/arch_lfm2.hpp"

#include "core/error.hpp"

namespace ember {

Lfm2Moe read_lfm2_moe(ArchBuilder &b) {
    HParams &hp = b.hp();
    Lfm2Moe m;
    hp.n_expert = b.u32("expert_count", std::nullopt);
    hp.n_expert_used = b.u32("expert_used_count", std::nullopt);
    if (hp.n_expert == 0 || hp.n_expert > 1024)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.expert_count' (%u) must be 1..1024", b.arch().c_str(), hp.n_expert);
    if (hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.expert_used_count' (%u) must be 1..expert_count (%u)", b.arch().c_str(),
             hp.n_expert_used, hp.n_expert);
    m.n_ff_exp = b.u32("expert_feed_forward_length", std::nullopt);
    if (m.n_ff_exp == 0)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.expert_feed_forward_length' must be positive", b.arch().c_str());
    m.n_dense_lead = b.u32("leading_dense_block_count", 0u);
    if (m.n_dense_lead > hp.n_layer)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.leading_dense_block_count' (%u) exceeds block_count (%u)",
             b.arch().c_str(), m.n_dense_lead, hp.n_layer);
    if (m.n_dense_lead > 0 && hp.n_ff == 0)
        fail(EMBER_ERR_INVALID_MODEL, "metadata '%s.feed_forward_length' must be positive for the dense layers",
             b.arch().c_str());
    const uint32_t gating = b.u32("expert_gating_func", 2u);
    if (gating != 2)
        fail(EMBER_ERR_UNSUPPORTED, "metadata '%s.expert_gating_func' %u (LFM2-MoE's experts are gated by sigmoid, 2)",
             b.arch().c_str(), gating);
    m.router = b.buf(hp.n_expert);
    return m;
}

void lfm2_moe_ffn(ArchBuilder &b, const Lfm2Moe &m, const std::string &p, int32_t xn, int32_t out) {
    const HParams &hp = b.hp();
    const uint32_t d = hp.n_embd;
    const int32_t router = m.router;
    b.matmul(router, xn, b.matrix(p + "ffn_gate_inp.weight", d, hp.n_expert));
    ArchBuilder::Moe e = read_experts(b, p, m.n_ff_exp);
    e.sel_bias = b.vector(p + "exp_probs_b.bias", hp.n_expert);
    e.gating = EMBER_GRAPH_MOE_GATE_SIGMOID;
    b.moe(out, xn, router, e);
}

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_lfm2moe = {"lfm2moe", [](ArchBuilder &b) { build_lfm2(b, true); }};

} // namespace ember
