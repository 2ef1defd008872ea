// test_memory_check.cpp — the check before a session's or engine's large allocation, on the CPU alone:
// the device-memory half (core/host_memory.hpp's check_device_memory) gives the host check's message
// with the device's figures and is off with $EMBER_MEMORY_CHECK=0; and a module's memory_available
// entry (module_api.h) reaches Backend::device_memory_available through the loader, while a table
// without it (NULL, or a struct_size that stops before it: an older module) reads as unknown. The CUDA
// module's own entry (cudaMemGetInfo) and the sessions on it run in test_faults on a GPU machine.
#include "test_util.h"

#include "backend/module_guard.hpp"
#include "backend/module_loader.hpp"
#include "core/error.hpp"
#include "core/host_memory.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace ember;

namespace {

// The status and message check_device_memory throws, or EMBER_OK and "".
ember_status device_check(uint64_t bytes, uint64_t available, std::string *msg) {
    try {
        check_device_memory(bytes, available, "cuda device memory", "a session of n_ctx 16 x n_seq_max 1");
    } catch (const Error &e) {
        *msg = e.what();
        return e.status();
    }
    msg->clear();
    return EMBER_OK;
}

void test_device_check(void **) {
    unsetenv("EMBER_MEMORY_CHECK");
    std::string msg;
    assert_int_equal(device_check(2048, 1024, &msg), EMBER_ERR_OUT_OF_MEMORY);
    // Both figures and where, as test_faults reads them ("needs N bytes", "available").
    assert_non_null(std::strstr(msg.c_str(), "a session of n_ctx 16 x n_seq_max 1 needs 2048 bytes"));
    assert_non_null(std::strstr(msg.c_str(), "of cuda device memory; 1024 bytes"));
    assert_non_null(std::strstr(msg.c_str(), "available"));
    assert_int_equal(device_check(1024, 1024, &msg), EMBER_OK);       // exactly what is there fits
    assert_int_equal(device_check(UINT64_MAX - 1, UINT64_MAX, &msg), EMBER_OK);   // unknown: never refused
    setenv("EMBER_MEMORY_CHECK", "0", 1);
    assert_int_equal(device_check(2048, 1024, &msg), EMBER_OK);
    unsetenv("EMBER_MEMORY_CHECK");
}

// A module table like the CPU's with a memory_available entry of its own, through the loader's adapter.
uint64_t g_free = 0;
int g_calls = 0;

struct FakeGpu {
    static int memory_available(ember_mod_backend *b, uint64_t *out, char *msg, size_t cap) {
        return module_guard("fake", msg, cap, [&] {
            if (!b) fail(EMBER_ERR_INTERNAL, "fake: asked before the device was opened");
            ++g_calls;
            *out = g_free;
        });
    }
};

uint64_t available_through(const ember_backend_module &table) {
    const LoadedModule mod{&table, "test"};
    return module_backend_create(mod)->device_memory_available();
}

void test_module_entry(void **) {
    const ember_backend_module &cpu = *ember_cpu_backend_module();
    assert_null(cpu.memory_available);   // the glue writes NULL for a module without the hook
    assert_true(available_through(cpu) == UINT64_MAX);

    ember_backend_module fake = cpu;
    fake.memory_available = FakeGpu::memory_available;
    g_free = uint64_t{3} << 30;
    assert_true(available_through(fake) == g_free);
    assert_int_equal(g_calls, 1);
    // An older module's table stops before the entry: whatever lies past its end is not called.
    fake.struct_size = offsetof(ember_backend_module, memory_available);
    assert_true(available_through(fake) == UINT64_MAX);
    assert_int_equal(g_calls, 1);
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_check),
        cmocka_unit_test(test_module_entry),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
