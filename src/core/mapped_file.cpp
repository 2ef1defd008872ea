#include "core/mapped_file.hpp"

#include "core/error.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ember {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeMinBytes = size_t{64} << 20;  // below this the TLB covers most of the file anyway

bool want_huge_pages() {
    const char *e = std::getenv("EMBER_HUGEPAGES");
    return e && e[0] == '1';
}

// Reads the whole file into fresh anonymous memory advised for huge pages, made read-only after. Returns
// the region (to unmap) and sets *data to the file's first byte in it (2 MiB-aligned, as THP needs); null
// when anything fails, and then nothing is left allocated.
void *read_into_huge_pages(int fd, size_t size, const uint8_t **data, size_t *region_bytes) {
#if defined(MADV_HUGEPAGE)
    const size_t bytes = (size + kHugePage - 1) / kHugePage * kHugePage + kHugePage;
    void *region = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return nullptr;
    auto *base = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(region) + kHugePage - 1) & ~uintptr_t{kHugePage - 1});
    if (::madvise(base, size, MADV_HUGEPAGE) != 0) {
        ::munmap(region, bytes);
        return nullptr;
    }
    for (size_t done = 0; done < size;) {
        const ssize_t n = ::pread(fd, base + done, size - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ::munmap(region, bytes);
            return nullptr;
        }
        done += static_cast<size_t>(n);
    }
    ::mprotect(region, bytes, PROT_READ);  // as the mapping would be; failure leaves it writable, harmless
    *data = base;
    *region_bytes = bytes;
    return region;
#else
    (void)fd, (void)size, (void)data, (void)region_bytes;
    return nullptr;
#endif
}

} // namespace

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
    if (size_ >= kHugeMinBytes && want_huge_pages()) region_ = read_into_huge_pages(fd, size_, &data_, &region_bytes_);
    if (size_ > 0 && !region_) {
        void *p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            ::close(fd);
            fail(EMBER_ERR_IO, "cannot map '%s': %s", path.c_str(), std::strerror(e));
        }
        data_ = static_cast<const uint8_t *>(p);
    }
    ::close(fd);
}

MappedFile::~MappedFile() {
    if (region_) ::munmap(region_, region_bytes_);
    else if (data_) ::munmap(const_cast<uint8_t *>(data_), size_);
}

} // namespace ember
