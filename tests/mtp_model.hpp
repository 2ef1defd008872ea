// mtp_model.hpp — synthetic files with a multi-token-prediction block (src/testing/synthetic.cpp), written
// to temporary files for the tests of the MTP draft through the public API (sessions and engines).
#pragma once

#include "test_util.h"

#include "gguf/gguf.hpp"
#include "testing/synthetic.hpp"

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

// A family's synthetic spec with one multi-token-prediction layer.
inline ember::SyntheticSpec mtp_spec(const char *family) {
    ember::SyntheticSpec spec = ember::synthetic_family(family);
    spec.n_nextn = 1;
    if (!spec.recurrent_layers.empty()) spec.recurrent_layers.resize(spec.n_layer + spec.n_nextn, false);
    return spec;
}
