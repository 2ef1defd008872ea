// placement.cpp — placement across devices (placement.hpp): the cut, the backend that runs the parts in
// turn, and the automatic fit.
#include "backend/placement.hpp"

#include "core/error.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <tuple>

namespace ember {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// The layer whose device a node follows: what precedes the first layer goes with it, the output with the last.
uint32_t node_layer(const ember_graph_node &n, uint32_t n_layer) {
    return static_cast<uint32_t>(std::clamp<int32_t>(n.layer, 0, static_cast<int32_t>(n_layer) - 1));
}

bool gpu_takes_last(Backend &gpu) { return gpu.input_rows(); }

} // namespace

// The host buffers a SplitContext keeps for the rows crossing after part p (its output and the next
// part's input, swapped pass by pass).
uint64_t crossing_bytes(const ProgramPart &p, const ContextParams &whole) {
    return 2 * uint64_t{whole.n_batch} * p.out_width * sizeof(float);
}

ContextParams part_params(const ProgramPart &p, const ContextParams &whole, bool last) {
    ContextParams cp = whole;
    if (!last) cp.n_logits = whole.n_batch;
    if (p.c.state_floats == 0) cp.n_state_slots = 0;
    cp.share_threads_with = nullptr;
    return cp;
}

std::vector<PlacedPart> place_program(const ember_mod_model_desc &d, Backend &gpu, uint32_t gpu_layers,
                                      uint32_t experts_on_cpu) {
    Backend &cpu = backend_require(EMBER_BACKEND_CPU);
    const uint32_t n = d.n_layer;
    const bool last = gpu_takes_last(gpu);
    const uint32_t g0 = last ? n - gpu_layers : 0, g1 = last ? n : gpu_layers;  // the GPU's layers [g0, g1)
    const uint32_t e1 = std::min(g1, g0 + experts_on_cpu);                      // their experts on the CPU: [g0, e1)
    layer_begin(d, 0);   // (checks the nodes are in layer order)
    std::vector<uint32_t> cuts;
    std::vector<Backend *> owners;
    std::vector<bool> gpu_owned;
    bool prev_gpu = false;
    for (uint32_t i = 0; i < d.n_nodes; ++i) {
        const ember_graph_node &nd = desc_node(d, i);
        const uint32_t l = node_layer(nd, n);
        const bool on_gpu = l >= g0 && l < g1 && !(nd.op == EMBER_GRAPH_MOE && l < e1);
        if (i == 0 || on_gpu != prev_gpu) {
            if (i > 0) cuts.push_back(i);
            owners.push_back(on_gpu ? &gpu : &cpu);
            gpu_owned.push_back(on_gpu);
        }
        prev_gpu = on_gpu;
    }
    for (size_t k = 1; k < owners.size(); ++k)
        if (!owners[k]->input_rows())
            fail(EMBER_ERR_UNSUPPORTED, "placement: the %s backend cannot run a part of a model that starts from another "
                 "device's activations (experts on the CPU need it)", owners[k]->name());
    std::vector<std::unique_ptr<ProgramPart>> parts = split_program(d, cuts);
    std::vector<PlacedPart> placed;
    for (size_t k = 0; k < parts.size(); ++k) placed.push_back({std::move(parts[k]), owners[k], gpu_owned[k]});
    return placed;
}

namespace {

// A context per part; a pass runs them in program order, each part's output rows the next one's input.
class SplitContext final : public BackendContext {
public:
    SplitContext(std::vector<std::unique_ptr<BackendContext>> ctxs, const std::vector<const ProgramPart *> &parts)
        : ctxs_(std::move(ctxs)), parts_(parts) {}

    void forward(const Batch &b) override {
        rows_.resize(b.n_tokens);
        std::iota(rows_.begin(), rows_.end(), 0);
        for (size_t k = 0; k < ctxs_.size(); ++k) {
            const ProgramPart &p = *parts_[k];
            const bool last = k + 1 == ctxs_.size();
            Batch pb = b;
            pb.input = k > 0 ? in_.data() : nullptr;
            if (!last) {
                out_.resize(size_t{b.n_tokens} * p.out_width);
                pb.n_logits = b.n_tokens, pb.logits_rows = rows_.data(), pb.logits = out_.data();
            }
            if (p.c.state_floats == 0) pb.state_slots = pb.state_src = pb.state_keep = nullptr;
            if (k > 0 && b.cancel && b.cancel->load()) fail(EMBER_ERR_CANCELLED, "forward cancelled between devices");
            ctxs_[k]->forward(pb);
            if (!last) in_.swap(out_);
        }
    }
    void copy_block(int32_t src, int32_t dst) override {
        for (auto &c : ctxs_) c->copy_block(src, dst);
    }
    size_t kv_bytes_per_token() const override {
        size_t s = 0;
        for (auto &c : ctxs_) s += c->kv_bytes_per_token();
        return s;
    }
    // Each part's rows are its layers' in the whole program's layout, so the parts' in turn are the whole's.
    void read_kv(const int32_t *table, uint32_t n, uint8_t *dst) const override {
        for (auto &c : ctxs_) {
            c->read_kv(table, n, dst);
            dst += size_t{n} * c->kv_bytes_per_token();
        }
    }
    void write_kv(const int32_t *table, uint32_t n, const uint8_t *src) override {
        for (auto &c : ctxs_) {
            c->write_kv(table, n, src);
            src += size_t{n} * c->kv_bytes_per_token();
        }
    }
    void copy_state(int32_t src, int32_t dst) override {
        for (size_t k = 0; k < ctxs_.size(); ++k)
            if (parts_[k]->c.state_floats) ctxs_[k]->copy_state(src, dst);
    }
    void read_state(int32_t slot, float *dst) const override {
        for (size_t k = 0; k < ctxs_.size(); ++k)
            if (parts_[k]->c.state_floats) ctxs_[k]->read_state(slot, dst + parts_[k]->state_begin);
    }
    void write_state(int32_t slot, const float *src) override {
        for (size_t k = 0; k < ctxs_.size(); ++k)
            if (parts_[k]->c.state_floats) ctxs_[k]->write_state(slot, src + parts_[k]->state_begin);
    }
    BackendContext &part(size_t k) const { return *ctxs_[k]; }
    size_t n_parts() const { return ctxs_.size(); }

private:
    std::vector<std::unique_ptr<BackendContext>> ctxs_;
    std::vector<const ProgramPart *> parts_;
    std::vector<int32_t> rows_;
    std::vector<float> in_, out_;
};

class SplitModel final : public BackendModel {
public:
    explicit SplitModel(std::vector<PlacedPart> parts) : parts_(std::move(parts)) {
        for (PlacedPart &p : parts_) models_.push_back(p.backend->load_model(p.part->c));
    }
    std::unique_ptr<BackendContext> create_context(const ContextParams &params) override {
        // Threads are shared part by part with a context of the same placement (a draft and its target).
        // The parts of one backend run one after another, never at once: they share one set of worker
        // threads (the first such part's), else each would keep its own spinning after its turn.
        const auto *share = dynamic_cast<const SplitContext *>(params.share_threads_with);
        std::vector<std::unique_ptr<BackendContext>> ctxs;
        std::vector<const ProgramPart *> parts;
        std::map<const Backend *, const BackendContext *> first_of;
        for (size_t k = 0; k < parts_.size(); ++k) {
            ContextParams cp = part_params(*parts_[k].part, params, k + 1 == parts_.size());
            auto first = first_of.find(parts_[k].backend);
            if (share) cp.share_threads_with = &share->part(std::min(k, share->n_parts() - 1));
            else if (first != first_of.end()) cp.share_threads_with = first->second;
            ctxs.push_back(models_[k]->create_context(cp));
            first_of.emplace(parts_[k].backend, ctxs.back().get());
            parts.push_back(parts_[k].part.get());
        }
        return std::make_unique<SplitContext>(std::move(ctxs), parts);
    }

private:
    std::vector<PlacedPart> parts_;
    std::vector<std::unique_ptr<BackendModel>> models_;
};

class SplitBackend final : public Backend {
public:
    SplitBackend(Backend &gpu, uint32_t gpu_layers, uint32_t experts)
        : gpu_(gpu), cpu_(backend_require(EMBER_BACKEND_CPU)), gpu_layers_(gpu_layers), experts_(experts),
          name_(std::string(gpu.name()) + "+cpu") {}
    ember_backend_kind kind() const override { return gpu_.kind(); }
    const char *name() const override { return name_.c_str(); }
    int score() const override { return gpu_.score(); }
    bool window_blocks() const override { return gpu_.window_blocks() && cpu_.window_blocks(); }
    bool precision_high() const override { return gpu_.precision_high() && cpu_.precision_high(); }
    bool recurrent_state() const override { return gpu_.recurrent_state() && cpu_.recurrent_state(); }
    bool keep_states() const override { return gpu_.keep_states() && cpu_.keep_states(); }
    std::unique_ptr<BackendModel> load_model(const ember_mod_model_desc &desc) override {
        return std::make_unique<SplitModel>(place_program(desc, gpu_, gpu_layers_, experts_));
    }
    size_t context_bytes(const ember_mod_model_desc &desc, const ContextParams &params) const override {
        const std::vector<PlacedPart> parts = place_program(desc, gpu_, gpu_layers_, experts_);
        size_t s = 0;
        for (size_t k = 0; k < parts.size(); ++k)
            s += parts[k].backend->context_bytes(parts[k].part->c, part_params(*parts[k].part, params, k + 1 == parts.size())) +
                 crossing_bytes(*parts[k].part, params);
        return s;
    }
    uint64_t device_memory_available() override { return gpu_.device_memory_available(); }

private:
    Backend &gpu_, &cpu_;
    uint32_t gpu_layers_, experts_;
    std::string name_;
};

std::string mib(uint64_t b) { return format("%.1f", static_cast<double>(b) / kMiB); }

std::string layer_range(uint32_t a, uint32_t b) {
    return b == a + 1 ? format("layer %u", a) : format("layers %u-%u", a, b - 1);
}

} // namespace

Backend &placed_backend(Backend &gpu, uint32_t n_layer, uint32_t gpu_layers, uint32_t experts_on_cpu) {
    if (gpu_layers == 0) return backend_require(EMBER_BACKEND_CPU);
    if (gpu_layers >= n_layer && experts_on_cpu == 0) return gpu;
    static std::mutex mutex;
    static std::map<std::tuple<Backend *, uint32_t, uint32_t>, std::unique_ptr<SplitBackend>> split;
    std::lock_guard<std::mutex> lock(mutex);
    auto &slot = split[{&gpu, std::min(gpu_layers, n_layer), std::min(experts_on_cpu, n_layer)}];
    if (!slot) slot = std::make_unique<SplitBackend>(gpu, std::min(gpu_layers, n_layer), std::min(experts_on_cpu, n_layer));
    return *slot;
}

std::string PlacementPlan::describe() const {
    const uint32_t g0 = gpu_last ? n_layer - gpu_layers : 0, g1 = gpu_last ? n_layer : gpu_layers;
    std::string gpu_part = gpu_layers == 0 ? std::string("nothing") : layer_range(g0, g1);
    if (gpu_layers > 0 && gpu_last) gpu_part += " and the output";
    if (gpu_layers > 0 && !gpu_last) gpu_part = "the embedding and " + gpu_part;
    std::string cpu_part;
    if (gpu_layers < n_layer) cpu_part = gpu_last ? layer_range(0, g0) : layer_range(g1, n_layer);
    const uint32_t e = std::min(experts_on_cpu, gpu_layers);
    if (e > 0) cpu_part += std::string(cpu_part.empty() ? "" : ", ") + "the experts of " + layer_range(g0, g0 + e);
    if (cpu_part.empty()) cpu_part = "nothing";
    return format("%s on %s (%s MiB: weights %s, context %s; budget %s MiB); %s on cpu (%s MiB: weights %s, context %s)%s",
                  gpu_part.c_str(), gpu_name.c_str(), mib(gpu_weights + gpu_context).c_str(), mib(gpu_weights).c_str(),
                  mib(gpu_context).c_str(), budget == UINT64_MAX ? "unlimited" : mib(budget).c_str(), cpu_part.c_str(),
                  mib(cpu_weights + cpu_context).c_str(), mib(cpu_weights).c_str(), mib(cpu_context).c_str(),
                  automatic ? " (chosen to fit)" : "");
}

namespace {

// What each device takes under one placement.
PlacementPlan measure(const ember_mod_model_desc &d, Backend &gpu, const ContextParams &params, uint32_t gpu_layers,
                      uint32_t experts) {
    PlacementPlan p;
    p.n_layer = d.n_layer, p.gpu_layers = gpu_layers, p.experts_on_cpu = experts;
    p.gpu_last = gpu_takes_last(gpu);
    p.gpu_name = gpu.name();
    p.backend = &placed_backend(gpu, d.n_layer, gpu_layers, experts);
    if (gpu_layers == 0 || (gpu_layers >= d.n_layer && experts == 0)) {   // one device
        const bool on_gpu = gpu_layers > 0;
        uint64_t w = 0;
        for (uint32_t i = 0; i < d.n_tensors; ++i) w += d.tensors[i].n_bytes;
        (on_gpu ? p.gpu_weights : p.cpu_weights) = w;
        (on_gpu ? p.gpu_context : p.cpu_context) = p.backend->context_bytes(d, params);
        return p;
    }
    const std::vector<PlacedPart> parts = place_program(d, gpu, gpu_layers, experts);
    for (size_t k = 0; k < parts.size(); ++k) {
        const PlacedPart &pp = parts[k];
        const uint64_t ctx = pp.backend->context_bytes(pp.part->c, part_params(*pp.part, params, k + 1 == parts.size()));
        (pp.on_gpu ? p.gpu_weights : p.cpu_weights) += pp.part->weight_bytes;
        (pp.on_gpu ? p.gpu_context : p.cpu_context) += ctx;
        p.cpu_context += crossing_bytes(*pp.part, params);   // host memory wherever the part runs
    }
    return p;
}

bool has_experts(const ember_mod_model_desc &d) {
    for (uint32_t l = 0; l < d.n_layer; ++l)
        if (layer_moe_node(d, l) != UINT32_MAX) return true;
    return false;
}

uint32_t resolve(int32_t v, uint32_t n_layer, const char *what) {
    if (v == kPlaceAll) return n_layer;
    if (v < 0) fail(EMBER_ERR_INVALID_ARGUMENT, "placement: %s %d (a layer count, all or auto)", what, v);
    return std::min(static_cast<uint32_t>(v), n_layer);
}

} // namespace

PlacementPlan plan_placement(const ember_mod_model_desc &d, Backend &gpu, const ContextParams &params,
                             const PlacementRequest &req) {
    uint64_t budget = req.gpu_budget;
    if (budget == 0) {
        // The device's free memory less a margin (for the driver's own allocations and other programs).
        const uint64_t avail = gpu.device_memory_available();
        budget = avail == UINT64_MAX ? UINT64_MAX : avail - std::min(avail, std::max<uint64_t>(avail / 20, 256ull << 20));
    }
    const uint32_t n = d.n_layer;
    if (req.experts_on_cpu < kPlaceAll) fail(EMBER_ERR_INVALID_ARGUMENT, "placement: experts_on_cpu %d", req.experts_on_cpu);
    auto fits = [&](const PlacementPlan &p) { return p.gpu_weights + p.gpu_context <= budget; };
    if (req.gpu_layers != kPlaceAuto) {
        PlacementPlan p = measure(d, gpu, params, resolve(req.gpu_layers, n, "gpu_layers"),
                                  resolve(req.experts_on_cpu, n, "experts_on_cpu"));
        p.budget = budget;
        if (!fits(p))
            fail(EMBER_ERR_OUT_OF_MEMORY, "placement does not fit: %u of %u layers on %s need %s MiB there, over its budget "
                 "of %s MiB (%s); place fewer layers on it (gpu_layers, or auto)", p.gpu_layers, n, gpu.name(),
                 mib(p.gpu_weights + p.gpu_context).c_str(), mib(budget).c_str(), p.describe().c_str());
        return p;
    }
    // Candidates, fastest first (placement.hpp): all on the GPU; a MoE's experts moved off layer by layer;
    // then fewer layers on the GPU (with all their experts on the CPU for a MoE), down to none.
    const uint32_t min_experts = req.experts_on_cpu == 0 ? 0 : resolve(req.experts_on_cpu, n, "experts_on_cpu");
    const bool moe = has_experts(d) && gpu_takes_last(gpu);
    std::vector<std::pair<uint32_t, uint32_t>> candidates;
    for (uint32_t e = min_experts; e <= (moe ? n : min_experts); ++e) candidates.push_back({n, e});
    // Fewer layers: found by bisection on the layer count (the GPU's bytes grow with it).
    const uint32_t e_rest = moe ? n : min_experts;
    for (const auto &[g, e] : candidates) {
        PlacementPlan p = measure(d, gpu, params, g, e);
        if (fits(p)) {
            p.budget = budget, p.automatic = true;
            return p;
        }
    }
    uint32_t lo = 0, hi = n;   // lo fits (nothing on the GPU always does), hi does not
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;
        (fits(measure(d, gpu, params, mid, e_rest)) ? lo : hi) = mid;
    }
    PlacementPlan p = measure(d, gpu, params, lo, e_rest);
    p.budget = budget, p.automatic = true;
    return p;
}

} // namespace ember
