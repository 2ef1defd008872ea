// model_desc.cpp — the description's C form for the backends (module_api.h), made in this one place.
#include "model/model_desc.hpp"

#include <map>

namespace ember {

void ModelDesc::finish() {
    c_tensors.clear();
    for (const TensorRef *t : tensors) {
        ember_mod_tensor m{};
        m.type = static_cast<uint32_t>(t->type);
        m.n_dims = t->n_dims;
        for (int k = 0; k < 4; ++k) m.ne[k] = t->ne[k];
        m.data = t->data;
        m.n_bytes = t->n_bytes;
        m.name = t->name.c_str();
        c_tensors.push_back(m);
    }
    c = ember_mod_model_desc{};
    c.struct_size = sizeof c;
    c.n_vocab = hp.n_vocab;
    c.n_layer = hp.n_layer;
    c.kv_width = hp.n_embd_kv();
    c.head_dim = hp.head_dim;
    c.n_tensors = static_cast<uint32_t>(c_tensors.size());
    c.tensors = c_tensors.data();
    c.n_bufs = static_cast<uint32_t>(bufs.size());
    c.bufs = bufs.data();
    c.node_size = sizeof(ember_graph_node);
    c.n_nodes = static_cast<uint32_t>(nodes.size());
    c.nodes = nodes.data();
    c.logits_buf = logits_buf;

    // LEGACY: the fixed llama-shaped fields, for backends that do not run the program yet. Taken from the
    // standard tensor names and the program's first norm and rope.
    auto t = [&](const std::string &name) -> const ember_mod_tensor * {
        for (size_t i = 0; i < tensors.size(); ++i)
            if (tensors[i]->name == name) return &c_tensors[i];
        return nullptr;
    };
    c.n_embd = hp.n_embd, c.n_head = hp.n_head, c.n_head_kv = hp.n_head_kv, c.n_ff = hp.n_ff;
    for (const ember_graph_node &n : nodes) {
        if (n.op == EMBER_GRAPH_RMS_NORM && c.norm_eps == 0) c.norm_eps = n.eps;
        if (n.op == EMBER_GRAPH_ROPE && c.rope_theta == 0) {
            c.n_rot = n.n_rot, c.rope_neox = n.rope_mode == EMBER_GRAPH_ROPE_NEOX;
            c.rope_theta = n.rope_theta, c.rope_freq_scale = n.rope_freq_scale;
            c.rope_freqs = n.w >= 0 ? &c_tensors[static_cast<size_t>(n.w)] : nullptr;
        }
    }
    if (c.rope_theta == 0) c.rope_theta = 10000.0f, c.rope_freq_scale = 1.0f;
    c.tok_embd = t("token_embd.weight");
    c.output_norm = t("output_norm.weight");
    c.output = t("output.weight");
    if (!c.output) c.output = c.tok_embd;
    c_layers.clear();
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        const std::string p = "blk." + std::to_string(l) + ".";
        c_layers.push_back({t(p + "attn_norm.weight"), t(p + "attn_q.weight"), t(p + "attn_k.weight"),
                            t(p + "attn_v.weight"), t(p + "attn_output.weight"), t(p + "attn_q.bias"),
                            t(p + "attn_k.bias"), t(p + "attn_v.bias"), t(p + "attn_output.bias"),
                            t(p + "ffn_norm.weight"), t(p + "ffn_gate.weight"), t(p + "ffn_up.weight"),
                            t(p + "ffn_down.weight")});
    }
    c.layers = c_layers.data();
}

} // namespace ember
