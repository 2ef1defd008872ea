// mapped_file.hpp — a read-only memory map of a whole file (the CPU backend reads weights from it in place).
//
// The descriptor stays open as long as the map, so that the model can read the same file (not one put
// in its place since) into huge pages later (core/huge_page_copy.hpp).
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
    // The open file (read-only), valid as long as this object.
    int fd() const { return fd_; }

private:
    std::string path_;
    const uint8_t *data_ = nullptr;
    size_t size_ = 0;
    int fd_ = -1;
};

} // namespace ember
