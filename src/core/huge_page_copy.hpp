// huge_page_copy.hpp — byte ranges of a file read into anonymous memory backed by transparent huge pages.
//
// Why: decode streams every weight once per token, and each 4 KiB page it crosses costs a TLB miss whose
// page walk is expensive in a virtual machine (two-level paging). Whether a file mapping gets 2 MiB
// mappings depends on the page cache (Linux 6.18 on ext4 maps large folios with 2 MiB entries, but only
// when the file was read in sequentially; pages faulted in through the mapping are 4 KiB folios). On a
// 2-vCPU Xeon VM, TinyLlama-shaped Q4_0 at 2 threads decoded 24 tokens/s from 4 KiB folios and 38 from
// huge pages. A private copy in THP-advised memory gets huge pages whatever the page cache holds. Its
// price: the copy's time at load, memory not shared with other processes mapping the same file, and a
// second copy's worth of page cache until the kernel reclaims it. The policy (when to copy) is the
// model's (model/model.hpp, Model::backend_model).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ember {

// Whether the kernel would back THP-advised memory with huge pages: /sys/kernel/mm/transparent_hugepage/
// enabled is "always" or "madvise" (false where the file is missing: not Linux, or no THP).
bool huge_pages_available();

class HugePageCopy {
public:
    struct Range {
        uint64_t offset = 0;  // in the file
        uint64_t bytes = 0;
    };
    // Reads `ranges` (sorted by offset, disjoint) of the open file `fd` into one region on a 2 MiB
    // boundary, each range at the same offset within a 4 KiB page as in the file (so the copy keeps any
    // alignment the file's tensors had), using up to `n_threads` threads
    // (large preads; the huge pages are zeroed by the kernel as they are first touched, which costs as
    // much as the copy, so threads help). Throws Error(EMBER_ERR_OUT_OF_MEMORY) when the region cannot be
    // allocated and Error(EMBER_ERR_IO) when a read fails (naming `path`); nothing stays allocated then.
    // `rewrite`, if set, runs once the bytes are in and before the region becomes read-only, and may
    // change them through writable_at (the CPU backend's layout of some weights: model/weight_placement.cpp);
    // what it throws propagates, nothing staying allocated.
    HugePageCopy(int fd, const std::string &path, std::vector<Range> ranges, unsigned n_threads,
                 const std::function<void(HugePageCopy &)> &rewrite = {});
    ~HugePageCopy();
    HugePageCopy(const HugePageCopy &) = delete;
    HugePageCopy &operator=(const HugePageCopy &) = delete;

    // The copy of file byte `offset`, which must lie inside one of the ranges; nullptr otherwise.
    const uint8_t *at(uint64_t offset) const;
    // at() for the constructor's `rewrite` (the region is read-only afterwards).
    uint8_t *writable_at(uint64_t offset) { return const_cast<uint8_t *>(at(offset)); }
    // Bytes the region takes (the ranges, their alignment and the 2 MiB rounding).
    size_t region_bytes() const { return region_bytes_; }
    // Whether madvise(MADV_HUGEPAGE) was accepted (the kernel may still fall back to 4 KiB pages).
    bool advised() const { return advised_; }

    // Bytes a copy of `ranges` takes, as the constructor will allocate them (for memory checks).
    static size_t bytes_for(const std::vector<Range> &ranges);

private:
    std::vector<Range> ranges_;
    std::vector<size_t> placed_;  // [ranges] offset of each range's copy from base_
    void *region_ = nullptr;
    size_t region_bytes_ = 0;
    uint8_t *base_ = nullptr;
    bool advised_ = false;
};

} // namespace ember
