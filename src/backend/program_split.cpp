// program_split.cpp — cutting a program into parts for placement across devices (program_split.hpp).
#include "backend/program_split.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace ember {

const ember_graph_node &desc_node(const ember_mod_model_desc &d, uint32_t i) {
    return *reinterpret_cast<const ember_graph_node *>(reinterpret_cast<const uint8_t *>(d.nodes) + size_t{i} * d.node_size);
}

namespace {

// The buffers a node reads: its sources, and its destination where the op keeps (part of) what it held —
// ADD accumulates, the ropes turn in place, COPY_COLS writes some columns only.
std::vector<int32_t> node_reads(const ember_graph_node &n) {
    std::vector<int32_t> r;
    for (int32_t b : {n.src, n.src2, n.src3})
        if (b >= 0) r.push_back(b);
    if (n.dst >= 0 && (n.op == EMBER_GRAPH_ADD || n.op == EMBER_GRAPH_ROPE || n.op == EMBER_GRAPH_ROPE_YARN ||
                       n.op == EMBER_GRAPH_COPY_COLS))
        r.push_back(n.dst);
    return r;
}

// The buffers the program reads from node `from` on before writing them there: what a cut at `from` hands on.
std::vector<int32_t> live_in(const ember_mod_model_desc &d, uint32_t from) {
    std::set<int32_t> written, live;
    for (uint32_t i = from; i < d.n_nodes; ++i) {
        const ember_graph_node &n = desc_node(d, i);
        for (int32_t b : node_reads(n))
            if (!written.count(b)) live.insert(b);
        if (n.dst >= 0) written.insert(n.dst);
    }
    for (int32_t b : live)
        if (d.bufs[b].rows != EMBER_GRAPH_ROWS_TOKENS)
            fail(EMBER_ERR_UNSUPPORTED, "placement: a cut at node %u would hand on a buffer of logits rows", from);
    return {live.begin(), live.end()};
}

uint32_t total_width(const ember_mod_model_desc &d, const std::vector<int32_t> &bufs) {
    uint32_t w = 0;
    for (int32_t b : bufs) w += d.bufs[b].width;
    return w;
}

// COPY_COLS of `width` columns: src's from src_col into dst's from dst_col (graph.h: one group).
ember_graph_node copy_cols(int32_t dst, int32_t src, uint32_t src_col, uint32_t dst_col, uint32_t width, int32_t layer) {
    ember_graph_node n{};
    n.op = EMBER_GRAPH_COPY_COLS;
    n.layer = layer;
    n.dst = dst, n.src = src, n.src2 = -1, n.src3 = -1;
    n.w = n.b = n.w2 = n.w3 = n.b2 = n.b3 = -1;
    n.n = src_col, n.n_rot = dst_col, n.n_head = 1, n.head_dim = width;
    return n;
}

void check_cuts(const ember_mod_model_desc &d, std::span<const uint32_t> cuts) {
    if (d.node_size < sizeof(ember_graph_node))
        fail(EMBER_ERR_UNSUPPORTED, "placement: the model's program is of an older layout (node size %u)", d.node_size);
    for (size_t k = 0; k < cuts.size(); ++k)
        if (cuts[k] == 0 || cuts[k] >= d.n_nodes || (k > 0 && cuts[k] <= cuts[k - 1]))
            fail(EMBER_ERR_INTERNAL, "placement: cut %zu at node %u of %u", k, cuts[k], d.n_nodes);
}

std::unique_ptr<ProgramPart> make_part(const ember_mod_model_desc &d, uint32_t first, uint32_t end) {
    auto p = std::make_unique<ProgramPart>();
    p->first_node = first, p->end_node = end;
    p->first_layer = desc_node(d, first).layer, p->last_layer = desc_node(d, end - 1).layer;
    p->bufs.assign(d.bufs, d.bufs + d.n_bufs);
    const std::vector<int32_t> in = first > 0 ? live_in(d, first) : std::vector<int32_t>{};
    const std::vector<int32_t> out = end < d.n_nodes ? live_in(d, end) : std::vector<int32_t>{};
    p->in_width = total_width(d, in), p->out_width = total_width(d, out);
    auto add_buf = [&](uint32_t width, uint32_t rows) {
        p->bufs.push_back({width, rows});
        return static_cast<int32_t>(p->bufs.size() - 1);
    };

    // The input, unpacked: one buffer is the input itself; several arrive side by side in one.
    int32_t input = -1;
    if (in.size() == 1) input = in[0];
    if (in.size() > 1) {
        input = add_buf(p->in_width, EMBER_GRAPH_ROWS_TOKENS);
        uint32_t col = 0;
        for (int32_t b : in) {
            p->nodes.push_back(copy_cols(b, input, col, 0, d.bufs[b].width, p->first_layer));
            col += d.bufs[b].width;
        }
    }

    // The nodes, their tensors renumbered to the part's own, their state to the part's own range.
    std::map<int32_t, int32_t> tensor_ids;
    auto tensor = [&](int32_t t) {
        if (t < 0) return t;
        auto [it, added] = tensor_ids.emplace(t, static_cast<int32_t>(p->tensors.size()));
        if (added) {
            p->tensors.push_back(d.tensors[t]);
            p->weight_bytes += d.tensors[t].n_bytes;
        }
        return it->second;
    };
    uint64_t state_lo = UINT64_MAX, state_hi = 0, state_sum = 0;
    for (uint32_t i = first; i < end; ++i) {
        ember_graph_node n = desc_node(d, i);
        n.w = tensor(n.w), n.b = tensor(n.b), n.w2 = tensor(n.w2), n.w3 = tensor(n.w3), n.b2 = tensor(n.b2),
        n.b3 = tensor(n.b3);
        if (n.op == EMBER_GRAPH_MOE) p->has_experts = true;
        if (n.state_size > 0) {
            state_lo = std::min<uint64_t>(state_lo, n.state_offset);
            state_hi = std::max<uint64_t>(state_hi, uint64_t{n.state_offset} + n.state_size);
            state_sum += n.state_size;
        }
        p->nodes.push_back(n);
    }
    if (state_sum > 0) {
        if (state_hi - state_lo != state_sum)
            fail(EMBER_ERR_UNSUPPORTED, "placement: the recurrent state of nodes %u..%u is not one range", first, end - 1);
        p->state_begin = static_cast<uint32_t>(state_lo);
        for (ember_graph_node &n : p->nodes)
            if (n.state_size > 0) n.state_offset -= p->state_begin;
    }

    // The output: the logits, or the buffers the next part reads, side by side, as per-token "logits" rows.
    int32_t logits = d.logits_buf;
    if (!out.empty()) {
        int32_t packed = out[0];
        if (out.size() > 1) {
            packed = add_buf(p->out_width, EMBER_GRAPH_ROWS_TOKENS);
            uint32_t col = 0;
            for (int32_t b : out) {
                p->nodes.push_back(copy_cols(packed, b, 0, col, d.bufs[b].width, p->last_layer));
                col += d.bufs[b].width;
            }
        }
        logits = add_buf(p->out_width, EMBER_GRAPH_ROWS_LOGITS);
        ember_graph_node g{};
        g.op = EMBER_GRAPH_GATHER_LOGITS;
        g.layer = p->last_layer;
        g.dst = logits, g.src = packed, g.src2 = g.src3 = -1;
        g.w = g.b = g.w2 = g.w3 = g.b2 = g.b3 = -1;
        p->nodes.push_back(g);
    }

    // Only the buffers its nodes use, renumbered (a backend sizes every buffer of a description: the
    // whole program's logits rows are large and most parts never touch them).
    std::map<int32_t, int32_t> buf_ids;
    std::vector<ember_graph_buf> used;
    auto renumber = [&](int32_t &b) {
        if (b < 0) return;
        auto [it, added] = buf_ids.emplace(b, static_cast<int32_t>(used.size()));
        if (added) used.push_back(p->bufs[static_cast<size_t>(b)]);
        b = it->second;
    };
    for (ember_graph_node &n : p->nodes) {
        renumber(n.dst), renumber(n.src), renumber(n.src2), renumber(n.src3);
    }
    renumber(logits), renumber(input);
    p->bufs = std::move(used);
    // The hidden rows a multi-token-prediction draft reads (module_api.h's hidden_buf): the part whose nodes
    // write them has them, renumbered; the others none.
    int32_t hidden = -1;
    if (d.hidden_buf >= 0)
        if (auto it = buf_ids.find(d.hidden_buf); it != buf_ids.end()) hidden = it->second;

    ember_mod_model_desc &c = p->c;
    c = d;
    c.struct_size = sizeof c;
    c.n_vocab = out.empty() ? d.n_vocab : p->out_width;
    c.n_tensors = static_cast<uint32_t>(p->tensors.size());
    c.tensors = p->tensors.data();
    c.n_bufs = static_cast<uint32_t>(p->bufs.size());
    c.bufs = p->bufs.data();
    c.node_size = sizeof(ember_graph_node);
    c.n_nodes = static_cast<uint32_t>(p->nodes.size());
    c.nodes = p->nodes.data();
    c.logits_buf = logits;
    c.state_floats = static_cast<uint32_t>(state_sum);
    c.has_input = input >= 0 ? 1u : 0u;
    c.input_buf = input;
    c.hidden_buf = hidden;
    return p;
}

} // namespace

std::vector<std::unique_ptr<ProgramPart>> split_program(const ember_mod_model_desc &d, std::span<const uint32_t> cuts) {
    check_cuts(d, cuts);
    std::vector<std::unique_ptr<ProgramPart>> parts;
    uint32_t first = 0;
    for (size_t k = 0; k <= cuts.size(); ++k) {
        const uint32_t end = k < cuts.size() ? cuts[k] : d.n_nodes;
        parts.push_back(make_part(d, first, end));
        first = end;
    }
    return parts;
}

uint32_t layer_begin(const ember_mod_model_desc &d, uint32_t layer) {
    int32_t prev = INT32_MIN;
    uint32_t at = d.n_nodes;
    for (uint32_t i = 0; i < d.n_nodes; ++i) {
        const int32_t l = desc_node(d, i).layer;
        if (l < prev) fail(EMBER_ERR_UNSUPPORTED, "placement: the program's nodes are not in layer order (node %u)", i);
        prev = l;
        if (at == d.n_nodes && l >= static_cast<int32_t>(layer)) at = i;
    }
    return at;
}

uint32_t layer_moe_node(const ember_mod_model_desc &d, uint32_t layer) {
    for (uint32_t i = 0; i < d.n_nodes; ++i) {
        const ember_graph_node &n = desc_node(d, i);
        if (n.op == EMBER_GRAPH_MOE && n.layer == static_cast<int32_t>(layer)) return i;
    }
    return UINT32_MAX;
}

} // namespace ember
