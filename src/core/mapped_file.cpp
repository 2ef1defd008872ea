#include "core/mapped_file.hpp"

#include "core/error.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ember {

MappedFile::MappedFile(const std::string &path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(EMBER_ERR_IO, "cannot open '%s': %s", path.c_str(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int e = errno;
        ::close(fd);
        fail(EMBER_ERR_IO, "cannot stat '%s': %s", path.c_str(), std::strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(EMBER_ERR_IO, "'%s' is not a regular file", path.c_str());
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
        void *p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            fail(EMBER_ERR_IO, "cannot map '%s': %s", path.c_str(), std::strerror(e));
        }
        data_ = static_cast<const uint8_t *>(p);
    }
    fd_ = fd;
}

MappedFile::~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t *>(data_), size_);
    ::close(fd_);
}

} // namespace ember
