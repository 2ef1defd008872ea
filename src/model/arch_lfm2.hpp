// arch_lfm2.hpp — LFM2's decoder (arch_lfm2.cpp), shared by the dense family and the one with experts
// (arch_lfm2moe.cpp).
#pragma once

#include "model/arch.hpp"

namespace ember {

// LFM2's layers; with `moe`, the layers from leading_dense_block_count on have routed experts
// (arch_lfm2moe.cpp's lfm2_moe_ffn) in place of the dense FFN.
void build_lfm2(ArchBuilder &b, bool moe);

// LFM2-MoE's experts (arch_lfm2moe.cpp): the metadata, read and checked once; the FFN of one layer.
struct Lfm2Moe {
    uint32_t n_dense_lead = 0, n_ff_exp = 0;
    int32_t router = -1;   // the router's logits (a buffer shared by the layers)
};
Lfm2Moe read_lfm2_moe(ArchBuilder &b);
void lfm2_moe_ffn(ArchBuilder &b, const Lfm2Moe &m, const std::string &p, int32_t xn, int32_t out);

} // namespace ember
