// mtp_model.hpp — synthetic files with a multi-token-prediction block (src/testing/synthetic.cpp), written
// to temporary files for the tests of the MTP draft through the public API (sessions and engines).
#pragma once

#include "test_util.h"

#include "ember/ember.h"
#include "gguf/gguf.hpp"
#include "testing/synthetic.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

// Removes the file when the test is done with it.
struct TempModelFile {
    std::string path;
    ~TempModelFile() {
        if (!path.empty()) unlink(path.c_str());
    }
};

// The output norm's weights and the MTP block's (shared_head_norm) set to keep one dimension alone: the
// model's and the block's logits are then both the output matrix's first column times one value each,
// so the block's guesses agree with the model now and then — random weights alone give a block that is
// never right, which leaves the paths of accepted drafts untested.
inline void concentrate_mtp_heads(std::vector<uint8_t> &bytes) {
    const ember::gguf::File g = ember::gguf::File::parse(bytes.data(), bytes.size());
    int patched = 0;
    for (const ember::gguf::TensorInfo &t : g.tensors()) {
        if (t.name != "output_norm.weight" && t.name.find("nextn.shared_head_norm.weight") == std::string_view::npos) continue;
        float *w = reinterpret_cast<float *>(bytes.data() + (static_cast<const uint8_t *>(t.data) - bytes.data()));
        const size_t n = t.n_bytes / sizeof(float);
        for (size_t i = 0; i < n; ++i) w[i] = i == 0 ? 8.0f : 0.0f;
        ++patched;
    }
    assert_int_equal(patched, 2);
}

// The file of `spec` (concentrated: concentrate_mtp_heads) in a temporary file; returns its path.
inline std::string write_mtp_model(const ember::SyntheticSpec &spec, bool concentrated = false) {
    std::vector<uint8_t> bytes = ember::synthetic_model_gguf(spec);
    if (concentrated) concentrate_mtp_heads(bytes);
    char path[] = "/tmp/ember_mtp_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes.data(), bytes.size()), (ssize_t)bytes.size());
    close(fd);
    return path;
}

// The backend these tests run on: the CPU, or Vulkan when argv[1] is "vulkan" (lavapipe in CI, with the
// validation layer: many times slower, so the tests run shorter cases there: *short_cases). Returns -1 to
// go on, else the exit code (EMBER_TEST_SKIP, the reason printed, where Vulkan has no device here).
inline int mtp_test_backend(int argc, char **argv, ember_backend_kind *backend, bool *short_cases) {
    *backend = EMBER_BACKEND_CPU;
    *short_cases = false;
    if (argc < 2 || std::strcmp(argv[1], "vulkan") != 0) return -1;
    *backend = EMBER_BACKEND_VULKAN;
    *short_cases = true;
    size_t n = 0;
    if (ember_backend_devices(EMBER_BACKEND_VULKAN, nullptr, 0, &n) != EMBER_OK || n == 0)
        return std::printf("SKIP: no vulkan backend here: %s\n", ember_last_error()), EMBER_TEST_SKIP;
    return -1;
}

// A family's synthetic spec with one multi-token-prediction layer.
inline ember::SyntheticSpec mtp_spec(const char *family) {
    ember::SyntheticSpec spec = ember::synthetic_family(family);
    spec.n_nextn = 1;
    if (!spec.recurrent_layers.empty()) spec.recurrent_layers.resize(spec.n_layer + spec.n_nextn, false);
    return spec;
}
