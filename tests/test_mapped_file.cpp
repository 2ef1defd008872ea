// test_mapped_file.cpp — MappedFile: the plain read-only mapping, and the copy into transparent huge
// pages that EMBER_HUGEPAGES=1 asks for on large files (src/core/mapped_file.hpp). Both must give the
// file's exact bytes and size; the copy's start must be 2 MiB-aligned (what huge pages need); errors
// name the path.
#include "core/error.hpp"
#include "core/mapped_file.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "test_util.h"

using namespace ember;

namespace {

// A temporary file of n bytes with a pattern that differs at every 8-byte word, removed by the caller.
std::string make_file(size_t n) {
    char path[] = "/tmp/test_mapped_file_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    std::vector<uint64_t> chunk(1 << 17);
    for (size_t done = 0; done < n;) {
        for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = (done / 8 + i) * 0x9e3779b97f4a7c15ull;
        const size_t want = n - done < chunk.size() * 8 ? n - done : chunk.size() * 8;
        assert_true(write(fd, chunk.data(), want) == static_cast<ssize_t>(want));
        done += want;
    }
    close(fd);
    return path;
}

void check_contents(const MappedFile &m, size_t n) {
    assert_int_equal(m.size(), n);
    for (size_t w = 0; w < n / 8; w += 4099) {  // a prime stride: every page boundary class is hit
        uint64_t v;
        std::memcpy(&v, m.data() + w * 8, 8);
        if (v != w * 0x9e3779b97f4a7c15ull) fail_msg("word %zu differs", w);
    }
    uint64_t last;
    std::memcpy(&last, m.data() + n - 8, 8);
    assert_true(last == (n / 8 - 1) * 0x9e3779b97f4a7c15ull);
}

} // namespace

static void test_plain_and_huge(void **) {
    const size_t n = (size_t{64} << 20) + 4096 + 8;  // just above the size where the copy starts, not whole pages
    const std::string path = make_file(n);
    unsetenv("EMBER_HUGEPAGES");
    {
        MappedFile m(path);
        assert_false(m.copied());
        check_contents(m, n);
    }
    setenv("EMBER_HUGEPAGES", "1", 1);
    {
        MappedFile m(path);
        check_contents(m, n);
        // Where the kernel offers no huge pages the plain mapping is used; either way the bytes are the
        // file's. The copy, when made, starts on a 2 MiB boundary.
        if (m.copied()) assert_int_equal(reinterpret_cast<uintptr_t>(m.data()) & ((uintptr_t{2} << 20) - 1), 0);
        std::printf("EMBER_HUGEPAGES=1: %s\n", m.copied() ? "copied into huge-page memory" : "plain mapping (no huge pages here)");
    }
    unsetenv("EMBER_HUGEPAGES");
    unlink(path.c_str());
}

static void test_missing_file(void **) {
    setenv("EMBER_HUGEPAGES", "1", 1);
    try {
        MappedFile m("/nonexistent-dir/model.gguf");
        fail_msg("no error for a missing file");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_IO);
        assert_non_null(std::strstr(e.what(), "/nonexistent-dir/model.gguf"));
    }
    unsetenv("EMBER_HUGEPAGES");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_and_huge),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
