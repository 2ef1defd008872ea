// weight_placement.cpp — where the CPU backend reads a model's weights from: the file mapping in place,
// or a private copy in transparent huge pages (the policy is documented at Model::cpu_weights_reserve).
#include "model/model.hpp"

#include "core/error.hpp"
#include "core/host_memory.hpp"
#include "core/run_threads.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

namespace ember {

namespace {

// Below this the copy's time buys little: the TLB's 2nd level covers a good part of the weights.
constexpr uint64_t kCopyMinBytes = uint64_t{64} << 20;
// Tensors closer than this are copied as one range, the gap with them (GGUF pads to 32 bytes).
constexpr uint64_t kMergeGap = uint64_t{1} << 20;

} // namespace

std::vector<HugePageCopy::Range> Model::cpu_ranges() const {
    std::vector<HugePageCopy::Range> r;
    const uint8_t *base = file_->data();
    auto add = [&](const ember_mod_model_desc &d) {
        for (uint32_t i = 0; i < d.n_tensors; ++i) {
            const auto *p = static_cast<const uint8_t *>(d.tensors[i].data);
            if (d.tensors[i].n_bytes == 0 || p < base || p + d.tensors[i].n_bytes > base + file_->size()) continue;
            r.push_back({static_cast<uint64_t>(p - base), d.tensors[i].n_bytes});
        }
    };
    add(desc_.c);
    if (desc_long_) add(desc_long_->c);
    std::sort(r.begin(), r.end(), [](const auto &a, const auto &b) { return a.offset < b.offset; });
    std::vector<HugePageCopy::Range> merged;
    for (const auto &x : r) {
        if (!merged.empty() && x.offset <= merged.back().offset + merged.back().bytes + kMergeGap)
            merged.back().bytes = std::max(merged.back().bytes, x.offset + x.bytes - merged.back().offset);
        else
            merged.push_back(x);
    }
    return merged;
}

// The tensors the CPU backend reads in a layout of its own (module_api.h's host_layout_wants; the AVX-512
// kernels' interleaved Q4_K and Q6_K rows, src/cpu/rows16.hpp), rewritten so in the private copy, which costs
// no memory (the same bytes in another order) and leaves the file mapping untouched. Only 2-D tensors
// that every program reads with MATMUL alone (an embedding's GET_ROWS, MOE's experts and everything else
// read the file's layout), and those the backend wants. EMBER_CPU_REPACK=0 keeps the file's layout (for
// comparisons).
std::vector<std::pair<uint64_t, const ember_mod_tensor *>> Model::cpu_layout_candidates(const Backend &backend) const {
    std::vector<std::pair<uint64_t, const ember_mod_tensor *>> out;
    const char *env = std::getenv("EMBER_CPU_REPACK");
    if (env && env[0] == '0') return out;
    const uint8_t *base = file_->data();
    std::map<uint64_t, std::pair<const ember_mod_tensor *, bool>> seen;  // offset -> (tensor, only MATMUL's w)
    auto scan = [&](const ember_mod_model_desc &d) {
        auto use = [&](int32_t t, bool as_matmul_w) {
            if (t < 0 || static_cast<uint32_t>(t) >= d.n_tensors) return;
            const ember_mod_tensor &x = d.tensors[t];
            const auto *p = static_cast<const uint8_t *>(x.data);
            if (x.n_bytes == 0 || p < base || p + x.n_bytes > base + file_->size()) return;
            auto it = seen.emplace(static_cast<uint64_t>(p - base), std::make_pair(&x, true)).first;
            it->second.second = it->second.second && as_matmul_w;
        };
        const auto *nodes = reinterpret_cast<const uint8_t *>(d.nodes);
        for (uint32_t i = 0; i < d.n_nodes; ++i) {
            ember_graph_node n{};  // (the core's own nodes: node_size is sizeof n)
            std::memcpy(&n, nodes + static_cast<size_t>(i) * d.node_size, std::min<size_t>(sizeof n, d.node_size));
            use(n.w, n.op == EMBER_GRAPH_MATMUL);
            for (int32_t t : {n.b, n.w2, n.w3, n.b2, n.b3}) use(t, false);
        }
    };
    scan(desc_.c);
    if (desc_long_) scan(desc_long_->c);
    for (const auto &[offset, v] : seen) {
        const ember_mod_tensor &t = *v.first;
        if (v.second && t.n_dims == 2 && backend.host_layout_wants(t)) out.emplace_back(offset, &t);
    }
    return out;
}

bool Model::cpu_decide_locked(uint64_t context_bytes) const {
    cpu_decided_ = true;
    const char *env = std::getenv("EMBER_HUGEPAGES");
    const bool forced_on = env && env[0] == '1', forced_off = env && env[0] == '0';
    const uint64_t bytes = HugePageCopy::bytes_for(cpu_ranges());
    const char *why = nullptr;
    if (forced_off) why = "EMBER_HUGEPAGES=0";
    else if (!huge_pages_available()) why = "the kernel offers no transparent huge pages";
    else if (!forced_on && size_bytes_ < kCopyMinBytes) why = "the weights are under 64 MiB";
    else if (!forced_on) {
        const uint64_t avail = host_memory_available();
        if (avail != UINT64_MAX && bytes + context_bytes > avail / 2) why = "a copy would take over half of the available memory";
    }
    cpu_wants_copy_ = why == nullptr;
    if (why) log_msg(&log_, EMBER_LOG_INFO, "CPU weights: the file mapping in place (%s)", why);
    return cpu_wants_copy_;
}

void Model::cpu_copy_locked(const Backend &backend) const {
    const auto t0 = std::chrono::steady_clock::now();
    const unsigned n_threads = std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
    const auto rows16 = cpu_layout_candidates(backend);
    uint64_t rows16_bytes = 0;
    double rows16_s = 0;
    // Rewritten by the copy's threads, a tensor at a time.
    auto interleave = [&](HugePageCopy &copy) {
        const auto t_r = std::chrono::steady_clock::now();
        std::atomic<size_t> next{0};
        run_on_threads(std::min<unsigned>(n_threads, static_cast<unsigned>(rows16.size())), [&] {
            for (size_t i; (i = next.fetch_add(1)) < rows16.size();)
                backend.host_layout_rewrite(*rows16[i].second, copy.writable_at(rows16[i].first));
        });
        for (const auto &r : rows16) rows16_bytes += r.second->n_bytes;
        rows16_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_r).count();
    };
    try {
        cpu_copy_ = std::make_unique<HugePageCopy>(file_->fd(), file_->path(), cpu_ranges(), n_threads,
                                                   rows16.empty() ? std::function<void(HugePageCopy &)>{} : interleave);
        cpu_rows16_.clear();
        for (const auto &r : rows16) cpu_rows16_.push_back(r.first);
        std::sort(cpu_rows16_.begin(), cpu_rows16_.end());
    } catch (const Error &e) {
        // The mapping still works: slower decode, not a failure.
        cpu_wants_copy_ = false;
        log_msg(&log_, EMBER_LOG_WARN, "CPU weights: the file mapping in place (the huge-page copy failed: %s)", e.what());
        return;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log_msg(&log_, EMBER_LOG_INFO, "CPU weights: copied into %s memory, %.1f MiB in %.3f s (%u threads)",
            cpu_copy_->advised() ? "huge-page" : "anonymous (THP advice refused)", cpu_copy_->region_bytes() / 1048576.0, s,
            n_threads);
    if (!rows16.empty())
        log_msg(&log_, EMBER_LOG_INFO, "CPU weights: %zu tensors (%.1f MiB) in the backend's own layout, rewritten in place in %.3f s",
                rows16.size(), rows16_bytes / 1048576.0, rows16_s);
}

const ember_mod_model_desc &Model::cpu_desc_locked(bool long_ctx, const Backend &backend) const {
    if (!cpu_decided_) cpu_decide_locked(0);
    if (cpu_wants_copy_ && !cpu_copy_) cpu_copy_locked(backend);
    const ember_mod_model_desc &in = long_ctx ? desc_long_->c : desc_.c;
    if (!cpu_copy_) return in;
    std::unique_ptr<CDesc> &out = cpu_desc_[long_ctx ? 1 : 0];
    if (!out) {
        out = std::make_unique<CDesc>();
        out->tensors.assign(in.tensors, in.tensors + in.n_tensors);
        const uint8_t *base = file_->data();
        for (ember_mod_tensor &t : out->tensors) {
            const auto *p = static_cast<const uint8_t *>(t.data);
            if (t.n_bytes > 0 && p >= base && p + t.n_bytes <= base + file_->size()) {
                const auto offset = static_cast<uint64_t>(p - base);
                t.data = cpu_copy_->at(offset);
                if (std::binary_search(cpu_rows16_.begin(), cpu_rows16_.end(), offset)) t.type |= EMBER_MOD_TYPE_HOST_LAYOUT;
            }
        }
        out->c = in;
        out->c.tensors = out->tensors.data();
    }
    return out->c;
}

uint64_t Model::cpu_weights_reserve(uint64_t context_bytes) const {
    std::lock_guard<std::mutex> lock(backend_mutex_);
    if (vocab_only_) return 0;
    if (!cpu_decided_) cpu_decide_locked(context_bytes);
    return cpu_wants_copy_ && !cpu_copy_ ? HugePageCopy::bytes_for(cpu_ranges()) : 0;
}

bool Model::cpu_weights_copied() const {
    std::lock_guard<std::mutex> lock(backend_mutex_);
    return cpu_copy_ != nullptr;
}

size_t Model::cpu_weights_rewritten() const {
    std::lock_guard<std::mutex> lock(backend_mutex_);
    return cpu_rows16_.size();
}

} // namespace ember
