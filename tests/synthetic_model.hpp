// synthetic_model.hpp — a synthetic model (src/testing/synthetic.hpp) written to a temporary file and
// loaded: for the tests of the decoder. The file is removed once loaded (the mapping stays valid).
#pragma once

#include "test_util.h"

#include "model/model.hpp"
#include "testing/synthetic.hpp"

#include <memory>
#include <unistd.h>
#include <vector>

// A model file's bytes written to a temporary file and loaded.
inline std::unique_ptr<ember::Model> load_gguf_bytes(const std::vector<uint8_t> &bytes) {
    char path[] = "/tmp/ember_synthetic_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes.data(), bytes.size()), (ssize_t)bytes.size());
    close(fd);
    struct Unlink {
        const char *p;
        ~Unlink() { unlink(p); }
    } gone{path};  // also when the load throws (tests of refused files)
    return ember::Model::load(path, ember::LoadOptions{});
}

inline std::unique_ptr<ember::Model> load_synthetic(const ember::SyntheticSpec &spec) {
    return load_gguf_bytes(ember::synthetic_model_gguf(spec));
}
