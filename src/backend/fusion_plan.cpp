// fusion_plan.cpp — the fusions' rules (see fusion_plan.hpp).
#include "backend/fusion_plan.hpp"

#include <algorithm>

namespace ember {

namespace {

bool is_rope(uint32_t op) { return op == EMBER_GRAPH_ROPE || op == EMBER_GRAPH_ROPE_YARN; }

// A matcher: the length of the run of `f` that starts at node i (0: none) and its lead node.
struct Match {
    uint32_t count = 0, lead = 0;
};

Match match_accumulate(const std::vector<ember_graph_node> &nodes, size_t i, int32_t logits_buf) {
    if (i + 1 >= nodes.size()) return {};
    const ember_graph_node &m = nodes[i], &a = nodes[i + 1];
    if (m.op != EMBER_GRAPH_MATMUL || a.op != EMBER_GRAPH_ADD || a.src != m.dst || a.dst == m.dst || a.dst == m.src)
        return {};
    if (!dead_after(nodes, i + 1, m.dst, logits_buf)) return {};
    return {2, static_cast<uint32_t>(i)};
}

Match match_gathered_norm(const std::vector<ember_graph_node> &nodes, size_t i, int32_t logits_buf) {
    if (i + 1 >= nodes.size()) return {};
    const ember_graph_node &g = nodes[i], &n = nodes[i + 1];
    if (g.op != EMBER_GRAPH_GATHER_LOGITS || n.op != EMBER_GRAPH_RMS_NORM || n.src != g.dst) return {};
    if (n.dst != g.dst && !dead_after(nodes, i + 1, g.dst, logits_buf)) return {};
    return {2, static_cast<uint32_t>(i + 1)};
}

Match match(Fusion f, const std::vector<ember_graph_node> &nodes, size_t i, int32_t logits_buf) {
    Match m;
    switch (f) {
    case Fusion::accumulate: m = match_accumulate(nodes, i, logits_buf); break;
    case Fusion::gathered_norm: m = match_gathered_norm(nodes, i, logits_buf); break;
    default: return {};  // not a run
    }
    // Never across a layer boundary.
    for (uint32_t k = 1; k < m.count; ++k)
        if (nodes[i + k].layer != nodes[i].layer) return {};
    return m;
}

bool same_rope(const ember_graph_node &a, const ember_graph_node &b) {
    const bool yarn = a.op == EMBER_GRAPH_ROPE_YARN;
    return a.op == b.op && a.n_rot == b.n_rot && a.rope_theta == b.rope_theta && a.rope_freq_scale == b.rope_freq_scale &&
           a.w == b.w &&
           (!yarn || (a.rope_ext_factor == b.rope_ext_factor && a.rope_attn_factor == b.rope_attn_factor &&
                      a.rope_beta_fast == b.rope_beta_fast && a.rope_beta_slow == b.rope_beta_slow &&
                      a.rope_n_ctx_orig == b.rope_n_ctx_orig));
}

void plan_inputs(const std::vector<ember_graph_node> &nodes, const FusionRules &rules, FusionPlan &p) {
    const bool next = rules.has(Fusion::shared_input_next), held_rule = rules.has(Fusion::shared_input_held);
    int32_t held = -1;  // the buffer whose prepared copy the scratch holds
    for (const FusedRun &r : p.runs) {
        for (uint32_t i = r.first; i < r.first + r.count; ++i) {
            const ember_graph_node &n = nodes[i];
            if (n.op == EMBER_GRAPH_MATMUL) {
                if (rules.prepares_input && !rules.prepares_input(n, rules.ctx)) continue;
                p.input[i] = (next || held_rule) && held == n.src ? InputUse::share : InputUse::prepare;
                held = n.src;
                continue;
            }
            if (!held_rule) held = -1;
            if (std::find(rules.scratch_ops.begin(), rules.scratch_ops.end(), n.op) != rules.scratch_ops.end()) held = -1;
        }
        if (r.dst >= 0 && r.dst == held) held = -1;  // its prepared copy is stale
    }
}

} // namespace

bool FusionRules::has(Fusion f) const { return std::find(fusions.begin(), fusions.end(), f) != fusions.end(); }

bool node_reads(const ember_graph_node &n, int32_t b) {
    switch (n.op) {
    case EMBER_GRAPH_ROPE:
    case EMBER_GRAPH_ROPE_YARN: return n.dst == b;
    case EMBER_GRAPH_ADD: return n.dst == b || n.src == b;
    case EMBER_GRAPH_ADD_POS_ROWS: return n.dst == b;
    case EMBER_GRAPH_MUL:
    case EMBER_GRAPH_SSM_SCAN:
    case EMBER_GRAPH_KV_STORE:
    case EMBER_GRAPH_SWIGLU:
    case EMBER_GRAPH_GEGLU:
    case EMBER_GRAPH_MOE:
    case EMBER_GRAPH_SIGMOID_MUL: return n.src == b || n.src2 == b;
    case EMBER_GRAPH_GATED_DELTA: return n.src == b || n.src2 == b || n.src3 == b;
    case EMBER_GRAPH_GET_ROWS: return false;
    default: return n.src == b;
    }
}

bool node_overwrites(const ember_graph_node &n, int32_t b) {
    return n.dst == b && !is_rope(n.op) && n.op != EMBER_GRAPH_ADD && n.op != EMBER_GRAPH_KV_STORE &&
           n.op != EMBER_GRAPH_COPY_COLS && n.op != EMBER_GRAPH_ADD_POS_ROWS;
}

bool dead_after(const std::vector<ember_graph_node> &nodes, size_t i, int32_t b, int32_t logits_buf) {
    for (size_t j = i + 1; j < nodes.size(); ++j) {
        if (node_reads(nodes[j], b)) return false;  // a node that reads b and writes it whole reads it first
        if (node_overwrites(nodes[j], b)) return true;
    }
    return b != logits_buf;
}

FusionPlan plan_fusions(const std::vector<ember_graph_node> &nodes, int32_t logits_buf, const FusionRules &rules) {
    FusionPlan p;
    p.run_of.resize(nodes.size());
    p.input.assign(nodes.size(), InputUse::none);
    p.rope_table.assign(nodes.size(), -1);
    for (size_t i = 0; i < nodes.size();) {
        FusedRun r;
        r.first = r.lead = static_cast<uint32_t>(i);
        for (Fusion f : rules.fusions) {
            const Match m = match(f, nodes, i, logits_buf);
            if (m.count > 1) {
                r.count = m.count, r.lead = m.lead, r.fused = true, r.kind = f;
                break;
            }
        }
        r.layer = nodes[i].layer, r.src = nodes[i].src, r.dst = nodes[i + r.count - 1].dst;
        for (uint32_t k = 0; k < r.count; ++k) p.run_of[i + k] = static_cast<uint32_t>(p.runs.size());
        p.runs.push_back(r);
        i += r.count;
    }
    plan_inputs(nodes, rules, p);
    std::vector<size_t> first_of_table;  // a node of each table
    for (size_t i = 0; i < nodes.size(); ++i) {
        if (!is_rope(nodes[i].op) || nodes[i].n_rot == 0) continue;
        size_t t = 0;
        while (t < first_of_table.size() && !same_rope(nodes[first_of_table[t]], nodes[i])) ++t;
        if (t == first_of_table.size()) first_of_table.push_back(i);
        p.rope_table[i] = static_cast<int32_t>(t);
    }
    p.n_rope_tables = static_cast<uint32_t>(first_of_table.size());
    return p;
}

} // namespace ember
