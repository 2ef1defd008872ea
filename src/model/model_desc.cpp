// model_desc.cpp — the description's C form for the backends (module_api.h), made in this one place.
#include "model/model_desc.hpp"


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
    // The output's width: the vocabulary for a decoder, the hidden state or ranking head for an embedding model.
    c.n_vocab = logits_buf >= 0 ? bufs[static_cast<size_t>(logits_buf)].width : hp.n_vocab;
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
    c.state_floats = state_floats;
    c.hidden_buf = hidden_buf;
}

} // namespace ember
