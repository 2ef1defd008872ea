// test_mapped_file.cpp — MappedFile (the plain read-only mapping) and HugePageCopy (ranges of a file
// read into transparent huge pages, core/huge_page_copy.hpp). Both must give the file's exact bytes; the
// copy's region must start 2 MiB-aligned (what huge pages need) and keep each range's alignment; errors
// name the path. And run_on_threads (core/run_threads.hpp), which the copy and the weights' rewrite at
// load run on: every item done once, an error on a helper thread rethrown to the caller.
#include "core/error.hpp"
#include "core/huge_page_copy.hpp"
#include "core/mapped_file.hpp"
#include "core/run_threads.hpp"

#include <fcntl.h>

#include <atomic>
#include <chrono>
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

static void test_plain(void **) {
    const size_t n = (size_t{4} << 20) + 4096 + 8;  // not whole pages
    const std::string path = make_file(n);
    {
        MappedFile m(path);
        check_contents(m, n);
        assert_true(m.fd() >= 0);
    }
    unlink(path.c_str());
}

// Ranges of a file read into one huge-page region: each copy holds the file's bytes, keeps its offset
// within a 4 KiB page (the tensors' alignment), and nothing outside the ranges is reachable; one thread
// or several (the chunks taken in turn) give the same bytes.
static void test_huge_page_copy(void **) {
    const size_t n = (size_t{40} << 20) + 8;
    const std::string path = make_file(n);
    MappedFile m(path);
    // Ranges of 8-byte-aligned offsets (the words' pattern is checked per word), one spanning chunks.
    const std::vector<HugePageCopy::Range> ranges = {{8, 1000}, {4096 * 3 + 40, (size_t{20} << 20) + 16}, {n - 4096, 4096}};
    for (unsigned threads : {1u, 3u}) {
        HugePageCopy c(m.fd(), path, ranges, threads);
        assert_true(c.region_bytes() >= HugePageCopy::bytes_for(ranges) - (size_t{2} << 20));
        for (const HugePageCopy::Range &r : ranges) {
            const uint8_t *p = c.at(r.offset);
            assert_non_null(p);
            assert_int_equal(reinterpret_cast<uintptr_t>(p) % 4096, r.offset % 4096);
            assert_memory_equal(p, m.data() + r.offset, r.bytes);
            assert_ptr_equal(c.at(r.offset + r.bytes - 1), p + r.bytes - 1);
            assert_null(c.at(r.offset + r.bytes));
        }
        assert_null(c.at(0));
        // The region starts on a 2 MiB boundary (the first range is in its first page).
        assert_int_equal(reinterpret_cast<uintptr_t>(c.at(8) - 8) % (uintptr_t{2} << 20), 0);
        std::printf("%u thread(s): THP advice %s; transparent huge pages %s\n", threads, c.advised() ? "taken" : "refused",
                    huge_pages_available() ? "offered" : "not offered");
    }
    unlink(path.c_str());
}

static void test_missing_file(void **) {
    try {
        MappedFile m("/nonexistent-dir/model.gguf");
        fail_msg("no error for a missing file");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_IO);
        assert_non_null(std::strstr(e.what(), "/nonexistent-dir/model.gguf"));
    }
    // A read that fails (a descriptor open for writing only) names the path and leaves nothing behind.
    const std::string path = make_file(4096);
    const int wfd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    assert_true(wfd >= 0);
    try {
        HugePageCopy c(wfd, path, {{0, 4096}}, 2);
        fail_msg("no error for an unreadable descriptor");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_IO);
        assert_non_null(std::strstr(e.what(), path.c_str()));
    }
    close(wfd);
    unlink(path.c_str());
}

// Items taken from a counter by the caller and 2 helpers: each done exactly once. Then an item a helper
// takes throws: the caller gets that error (not std::terminate on the helper), after every thread ended.
static void test_run_on_threads(void **) {
    constexpr int kItems = 64;
    std::atomic<int> next{0}, done[kItems] = {};
    run_on_threads(3, [&] {
        for (int i; (i = next.fetch_add(1)) < kItems;) done[i].fetch_add(1);
    });
    for (int i = 0; i < kItems; ++i) assert_int_equal(done[i].load(), 1);

    const std::thread::id caller = std::this_thread::get_id();
    std::atomic<int> taken{0}, helper_items{0};
    next = 0;
    try {
        run_on_threads(3, [&] {
            for (int i; (i = next.fetch_add(1)) < kItems;) {
                taken.fetch_add(1);
                std::this_thread::sleep_for(std::chrono::milliseconds(1));   // so that the helpers take items too
                if (std::this_thread::get_id() != caller && helper_items.fetch_add(1) == 0)
                    fail(EMBER_ERR_IO, "item %d failed on a helper", i);
            }
        });
        fail_msg("no error from the helper's item");
    } catch (const Error &e) {
        assert_int_equal(e.status(), EMBER_ERR_IO);
        assert_non_null(std::strstr(e.what(), "on a helper"));
    }
    assert_int_equal(taken.load(), kItems);   // the others went on and took the rest
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_huge_page_copy),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_run_on_threads),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
