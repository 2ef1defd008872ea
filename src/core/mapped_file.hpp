// mapped_file.hpp — a read-only memory map of a whole file (the CPU backend reads weights from it in place).
//
// With EMBER_HUGEPAGES=1 a large file (64 MiB or more) is read instead into anonymous memory backed by
// transparent huge pages (madvise), where the kernel allows them. Why: decode streams every weight once
// per token, and with 4 KiB pages of the page cache each 4 KiB costs a TLB miss, whose page walk is
// expensive in a virtual machine (two-level paging). Measured on a 2-vCPU Xeon VM, TinyLlama-shaped
// Q4_0 at 2 threads: 28.1 -> 38.2 tokens/s. The price: loading copies the file (0.2-1.6 s for 620 MB
// from the page cache there, instead of ~0.04 s to map it), and the copy is not shared with other
// processes.
// Anything that fails on that path (no memory, no huge pages) falls back to the plain mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember {

class MappedFile {
public:
    // Maps `path` read-only. Throws Error(EMBER_ERR_IO) naming the path and the OS error.
    explicit MappedFile(const std::string &path);
    ~MappedFile();
    MappedFile(const MappedFile &) = delete;
    MappedFile &operator=(const MappedFile &) = delete;

    const uint8_t *data() const { return data_; }
    size_t size() const { return size_; }
    const std::string &path() const { return path_; }
    // Whether the bytes are the huge-page copy (EMBER_HUGEPAGES=1) rather than the mapping.
    bool copied() const { return region_ != nullptr; }

private:
    std::string path_;
    const uint8_t *data_ = nullptr;
    size_t size_ = 0;
    void *region_ = nullptr;   // the huge-page copy's whole region (aligned inside it), or nullptr
    size_t region_bytes_ = 0;
};

} // namespace ember
