// fusion_plan.hpp — how a GPU backend runs a model's program (graph.h): which runs of consecutive nodes it
// records as one kernel, which of its products reuse an input another product prepared (a quantized or
// f16 copy of the rows), and which ropes share one table of angles. Decided once, here, from the fusions
// a backend declares, so that the CUDA and Vulkan modules cannot drift apart in when a fusion is allowed;
// each module then turns the plan into its own steps (cuda/program.cpp's NodeRun, vulkan/vk_program.cpp's
// Step) and implements the kernels of the fusions it declared.
//
// Every fusion gives the unfused program's result (within test_parity's bounds): a run is fused only where
// no node after it reads what the fusion leaves unwritten, and never across a layer boundary (backends
// check for cancellation and cut their command buffers where the layer changes).
//
// Adding a fusion: a Fusion value, a matcher in fusion_plan.cpp (how long a run starting at node i it
// covers, 0 if none, and which node the kernel records), a test in tests/test_fusion_plan.cpp, and the
// kernels in each backend that lists it. A run may cover any number of nodes (Q/K/V as one product would
// be the consecutive products of one buffer, led by the first; the shared-input rule still sees each
// product of a run), and a backend that does not list a fusion keeps running those nodes one by one. Plain C++ over graph.h: built into the core (where
// tests/test_fusion_plan.cpp runs it) and into each GPU module.
#pragma once

#include "backend/graph.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ember {

enum class Fusion : uint8_t {
    // Runs of nodes recorded as one kernel (a backend lists the ones it implements; the first in its list
    // that matches at a node wins).
    //
    // MATMUL then ADD(dst = y, src = the product): the product is accumulated into y (y += W x + b), its
    // own dst is not written. Not when the product is read after the ADD, when y is the product itself
    // (y = 2 W x) or its input (the kernels read the input while writing y).
    accumulate,
    // GATHER_LOGITS then RMS_NORM of the gathered rows (in place, or the gathered rows read by nothing
    // after): the norm reads the token rows through the logits rows' indices.
    gathered_norm,

    // Products that reuse the input prepared for an earlier product of the same buffer (Q/K/V, gate/up):
    // preparing is a function of the rows. A backend lists at most one of the two.
    //
    // Only the product right before, when it read the same buffer (any node in between ends the copy).
    shared_input_next,
    // The last product that prepared an input, when it read the same buffer and no step has written that
    // buffer since, nor run an op that uses the prepared-input scratch itself (FusionRules::scratch_ops).
    shared_input_held,
};

// What a backend implements: its fusions and, for the shared inputs, which products prepare an input.
struct FusionRules {
    std::span<const Fusion> fusions;
    // Whether product node n prepares (and so may share) its input; nullptr: every product does. (Vulkan
    // quantizes the input of quantized matrices only; F32 and F16 products read the rows as they are.)
    bool (*prepares_input)(const ember_graph_node &n, const void *ctx) = nullptr;
    const void *ctx = nullptr;  // passed to prepares_input
    // Ops that overwrite the prepared-input scratch (their own products prepare inputs there: MOE).
    std::span<const uint32_t> scratch_ops;

    bool has(Fusion f) const;
};

// One step of the plan: nodes [first, first + count), recorded as one kernel when count > 1.
struct FusedRun {
    uint32_t first = 0, count = 1;
    bool fused = false;     // count > 1; `kind` says which fusion
    Fusion kind = Fusion::accumulate;
    uint32_t lead = 0;      // the node whose op the kernel is (the product that accumulates; the norm that gathers)
    int32_t layer = -1;     // its nodes' layer (a run never spans two)
    int32_t src = -1;       // the buffer the run reads (its first node's src)
    int32_t dst = -1;       // the buffer it writes last (its last node's dst; -1 for KV_STORE)
};

// For a product node: whether it prepares its input, reuses the one prepared before, or neither (its
// backend reads the rows as they are).
enum class InputUse : uint8_t { none, prepare, share };

struct FusionPlan {
    std::vector<FusedRun> runs;         // every node in exactly one run, in program order
    std::vector<uint32_t> run_of;       // [nodes] the run each node is in
    std::vector<InputUse> input;        // [nodes] (none for any node that is not a MATMUL)
    // [nodes] a rope's angle table: ropes of the same op, rotation, base, scale, factors and YaRN options
    // share one (numbered in order of first use); -1 for any other node and for a rope that rotates
    // nothing (n_rot 0).
    std::vector<int32_t> rope_table;
    uint32_t n_rope_tables = 0;

    // Whether node i is one a run's kernel does for it (a fused run's nodes other than its lead).
    bool folded(size_t i) const {
        const FusedRun &r = runs[run_of[i]];
        return r.fused && r.lead != i;
    }
};

// Plans `nodes` (as program_read.hpp returns them, checked by the backend first: buffer and tensor ids in
// range) for a backend's rules; logits_buf is the program's output, which is never dead.
FusionPlan plan_fusions(const std::vector<ember_graph_node> &nodes, int32_t logits_buf, const FusionRules &rules);

// The liveness the fusions are decided by. node_reads: whether n reads buffer b (ADD and the ropes read
// their dst); node_overwrites: whether n writes all of b's columns (KV_STORE writes the cache, COPY_COLS
// some columns, ADD and ropes update dst in place); dead_after: whether b's contents after node i are read
// by nothing (overwritten first, or the pass ends and b is not its output).
bool node_reads(const ember_graph_node &n, int32_t b);
bool node_overwrites(const ember_graph_node &n, int32_t b);
bool dead_after(const std::vector<ember_graph_node> &nodes, size_t i, int32_t b, int32_t logits_buf);

} // namespace ember
