// weight_placement.cpp — where the CPU backend reads a model's weights from: the file mapping in place,
// or a private copy in transparent huge pages (the policy is documented at Model::cpu_weights_reserve).
#include "model/model.hpp"

#include "core/error.hpp"
#include "core/host_memory.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
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

void Model::cpu_copy_locked() const {
    const auto t0 = std::chrono::steady_clock::now();
    const unsigned n_threads = std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
    try {
        cpu_copy_ = std::make_unique<HugePageCopy>(file_->fd(), file_->path(), cpu_ranges(), n_threads);
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
}

const ember_mod_model_desc &Model::cpu_desc_locked(bool long_ctx) const {
    if (!cpu_decided_) cpu_decide_locked(0);
    if (cpu_wants_copy_ && !cpu_copy_) cpu_copy_locked();
    const ember_mod_model_desc &in = long_ctx ? desc_long_->c : desc_.c;
    if (!cpu_copy_) return in;
    std::unique_ptr<CDesc> &out = cpu_desc_[long_ctx ? 1 : 0];
    if (!out) {
        out = std::make_unique<CDesc>();
        out->tensors.assign(in.tensors, in.tensors + in.n_tensors);
        const uint8_t *base = file_->data();
        for (ember_mod_tensor &t : out->tensors) {
            const auto *p = static_cast<const uint8_t *>(t.data);
            if (t.n_bytes > 0 && p >= base && p + t.n_bytes <= base + file_->size())
                t.data = cpu_copy_->at(static_cast<uint64_t>(p - base));
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

} // namespace ember
