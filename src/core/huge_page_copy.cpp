#include "core/huge_page_copy.hpp"

#include "core/error.hpp"
#include "core/run_threads.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

namespace ember {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kPage = 4096;
// The unit of work the threads take in turn: large enough that a pread's own cost vanishes, small
// enough that two threads finish together.
constexpr size_t kChunk = size_t{8} << 20;

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

} // namespace

bool huge_pages_available() {
    FILE *f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
    if (!f) return false;
    char line[128] = {};
    const bool ok = std::fgets(line, sizeof line, f) != nullptr;
    std::fclose(f);
    // The selected mode is in brackets: "always [madvise] never".
    return ok && (std::strstr(line, "[always]") || std::strstr(line, "[madvise]"));
}

size_t HugePageCopy::bytes_for(const std::vector<Range> &ranges) {
    size_t at = 0;
    for (const Range &r : ranges) at = round_up(at, kPage) + r.offset % kPage + r.bytes;
    return round_up(at, kHugePage) + kHugePage;  // + the slack that aligning the region's start takes
}

HugePageCopy::HugePageCopy(int fd, const std::string &path, std::vector<Range> ranges, unsigned n_threads,
                           const std::function<void(HugePageCopy &)> &rewrite)
    : ranges_(std::move(ranges)) {
    size_t at = 0;
    for (const Range &r : ranges_) {
        at = round_up(at, kPage) + r.offset % kPage;
        placed_.push_back(at);
        at += r.bytes;
    }
    region_bytes_ = bytes_for(ranges_);
    region_ = ::mmap(nullptr, region_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region_ == MAP_FAILED) {
        region_ = nullptr;
        fail(EMBER_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes for the weights of '%s': %s", region_bytes_,
             path.c_str(), std::strerror(errno));
    }
    base_ = reinterpret_cast<uint8_t *>(round_up(reinterpret_cast<uintptr_t>(region_), kHugePage));
#if defined(MADV_HUGEPAGE)
    advised_ = ::madvise(base_, region_bytes_ - kHugePage, MADV_HUGEPAGE) == 0;
#endif

    // The work as (range, start within it) chunks, taken in turn by the threads.
    struct Chunk {
        size_t range, begin, bytes;
    };
    std::vector<Chunk> chunks;
    for (size_t i = 0; i < ranges_.size(); ++i)
        for (size_t b = 0; b < ranges_[i].bytes; b += kChunk) chunks.push_back({i, b, std::min(kChunk, ranges_[i].bytes - b)});
    std::atomic<size_t> next{0};
    std::atomic<int> error{0};
    auto work = [&] {
        for (size_t c; !error.load(std::memory_order_relaxed) && (c = next.fetch_add(1)) < chunks.size();) {
            const Chunk &k = chunks[c];
            uint8_t *dst = base_ + placed_[k.range] + k.begin;
            const uint64_t src = ranges_[k.range].offset + k.begin;
            for (size_t done = 0; done < k.bytes;) {
                const ssize_t n = ::pread(fd, dst + done, k.bytes - done, static_cast<off_t>(src + done));
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) {
                    int expected = 0;
                    error.compare_exchange_strong(expected, n < 0 ? errno : EIO);
                    return;
                }
                done += static_cast<size_t>(n);
            }
        }
    };
    run_on_threads(static_cast<unsigned>(std::min<size_t>(std::max(1u, n_threads), chunks.size())), work);
    if (error.load()) {
        ::munmap(region_, region_bytes_);
        region_ = nullptr;
        fail(EMBER_ERR_IO, "cannot read the weights of '%s': %s", path.c_str(), std::strerror(error.load()));
    }
    if (rewrite) {
        try {
            rewrite(*this);
        } catch (...) {
            ::munmap(region_, region_bytes_);
            region_ = nullptr;
            throw;
        }
    }
    // Read-only, as the mapping would be; a failure leaves it writable, which nothing relies on.
    ::mprotect(region_, region_bytes_, PROT_READ);
}

HugePageCopy::~HugePageCopy() {
    if (region_) ::munmap(region_, region_bytes_);
}

const uint8_t *HugePageCopy::at(uint64_t offset) const {
    // The last range starting at or before offset.
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), offset, [](uint64_t o, const Range &r) { return o < r.offset; });
    if (it == ranges_.begin()) return nullptr;
    --it;
    if (offset - it->offset >= it->bytes) return nullptr;
    const size_t i = static_cast<size_t>(it - ranges_.begin());
    return base_ + placed_[i] + (offset - it->offset);
}

} // namespace ember
