// test_gemma4.cpp — Gemma 4 and Gemma 3's window layouts beyond what test_families checks (every
// family × type against the fp64 reference):
//  - llama.cpp's answers on the synthetic files, pinned (CI has no llama.cpp): node-llama-cpp 3.22.1's
//    32 greedy tokens after bench/compare_logits.mjs's 12-token prompt (its peer_greedy), and its argmax
//    at the 12 teacher-forced positions (there 12/12 the reference's); Ember's must be the same;
//  - layers that read an earlier layer's KV cache keep none of their own: the cache and the memory
//    estimate count only the layers that store K/V;
//  - inconsistent metadata refused with EMBER_ERR_INVALID_MODEL naming the key.
#include "synthetic_model.hpp"
#include "test_util.h"

#include "backend/backend.hpp"
#include "core/error.hpp"
#include "engine/engine.hpp"
#include "model/model.hpp"
#include "session/session.hpp"
#include "testing/reference_forward.hpp"
#include "testing/synthetic.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

using namespace ember;

namespace {

const std::vector<int32_t> kPrompt = {1, 7, 3, 12, 40, 5, 9, 22, 31, 2, 17, 60};

int32_t argmax(const float *l, uint32_t n) { return static_cast<int32_t>(std::max_element(l, l + n) - l); }

// Ember's greedy continuation of kPrompt on the CPU, and its argmax at each prompt position.
void run(const Model &model, std::vector<int32_t> &greedy, std::vector<int32_t> &forced) {
    SessionOptions o;
    o.n_ctx = 64;
    o.n_threads = 2;
    Session s(model, o);
    const uint32_t nv = model.desc().hp.n_vocab;
    for (int32_t t : kPrompt) {
        s.feed(&t, 1);
        forced.push_back(argmax(s.logits(), nv));
    }
    for (int i = 0; i < 32; ++i) {
        const int32_t t = argmax(s.logits(), nv);
        greedy.push_back(t);
        s.feed(&t, 1);
    }
}

void test_llamacpp_tokens(void **) {
    // llama.cpp's (node-llama-cpp 3.22.1, CPU, F32 files). Gemma 3's files tie the output to the
    // embedding, which makes the current token an attractor in these random models: there the greedy
    // tokens are the prompt's last one again and again and the argmax the input token; the gemma4 files
    // have an output matrix of their own, and tokens that say more.
    const std::vector<int32_t> repeat_60(32, 60), prompt_itself = kPrompt;
    const std::map<std::string, std::pair<std::vector<int32_t>, std::vector<int32_t>>> pinned = {
        {"gemma4",
         {{315, 288, 2, 206, 127, 286, 100, 133, 181, 282, 5, 183},
          {183, 271, 290, 258, 244, 1, 158, 191, 261, 283, 256, 30, 300, 300, 300, 300,
           300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300, 300}}},
        {"gemma4moe",
         {{214, 288, 21, 12, 28, 121, 100, 66, 181, 282, 163, 83},
          {83, 131, 61, 58, 31, 181, 98, 217, 133, 54, 96, 28, 154, 81, 112, 279,
           189, 221, 207, 262, 23, 190, 215, 205, 94, 240, 89, 136, 274, 317, 270, 34}}},
        {"gemma3-p2", {prompt_itself, repeat_60}},
        {"gemma3-layers", {prompt_itself, repeat_60}},
        {"gemma3-global", {prompt_itself, repeat_60}},
    };
    for (const auto &[family, pins] : pinned) {
        const std::vector<int32_t> &want = pins.first, &want_greedy = pins.second;
        auto model = load_synthetic(synthetic_family(family));
        std::vector<int32_t> greedy, at;
        run(*model, greedy, at);
        // The reference's argmax at each position (llama.cpp's, 12 of 12 in compare_logits.mjs).
        std::printf("%-14s Ember's argmax at the 12 positions:", family.c_str());
        for (int32_t t : at) std::printf(" %d", t);
        std::printf("\n");
        const auto ref = reference_logits(*model, kPrompt);
        for (size_t t = 0; t < kPrompt.size(); ++t) {
            const auto best = static_cast<int32_t>(std::max_element(ref[t].begin(), ref[t].end()) - ref[t].begin());
            if (best != want[t] || at[t] != want[t])
                fail_msg("%s position %zu: Ember %d, reference %d, llama.cpp %d", family.c_str(), t, at[t], best, want[t]);
        }
        if (greedy != want_greedy) fail_msg("%s: Ember's greedy tokens differ from llama.cpp's", family.c_str());
        std::printf("%-14s Ember = llama.cpp: argmax at 12 positions, 32 greedy tokens\n", family.c_str());
    }
}

void test_shared_kv_layers_keep_no_cache(void **) {
    SyntheticSpec shared = synthetic_family("gemma4"), own = shared;
    own.shared_kv_layers = 0;   // every layer its own K/V (the same tensors plus K/V for layers 4 and 5)
    auto a = load_synthetic(shared), b = load_synthetic(own);
    assert_int_equal(n_kv_layers(a->desc().c), 4);
    assert_int_equal(n_kv_layers(b->desc().c), 6);
    assert_int_equal(kv_bytes_per_token(a->desc().c, DType::F16) * 6, kv_bytes_per_token(b->desc().c, DType::F16) * 4);
    EngineOptions o;
    o.n_ctx = 1024, o.n_seq_max = 2, o.n_threads = 1;
    const MemoryEstimate ea = estimate_engine_memory(*a, o), eb = estimate_engine_memory(*b, o);
    std::printf("KV of an engine (n_ctx 1024, 2 sequences): 6 layers of their own %llu bytes, 2 of them shared %llu\n",
                (unsigned long long)eb.kv_bytes, (unsigned long long)ea.kv_bytes);
    // Two window layers and two global ones store instead of three and three: both pools shrink by a third.
    assert_true(ea.kv_bytes * 3 == eb.kv_bytes * 2);
}

// The file's bytes with the u32 value of metadata `key` replaced.
std::vector<uint8_t> with_u32(std::vector<uint8_t> bytes, const std::string &key, uint32_t value) {
    const auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
    assert_true(it != bytes.end());
    const size_t at = static_cast<size_t>(it - bytes.begin()) + key.size();
    uint32_t type;
    std::memcpy(&type, &bytes[at], 4);
    assert_int_equal(type, 4);   // GGUF's u32
    std::memcpy(&bytes[at + 4], &value, 4);
    return bytes;
}

void expect_refused(const std::vector<uint8_t> &bytes, const char *key) {
    try {
        load_gguf_bytes(bytes);
        fail_msg("a file with a bad '%s' was loaded", key);
    } catch (const Error &e) {
        std::printf("refused: %s\n", e.what());
        assert_int_equal(e.status(), EMBER_ERR_INVALID_MODEL);
        assert_non_null(std::strstr(e.what(), key));
    }
}

void test_bad_metadata_refused(void **) {
    const auto dense = synthetic_model_gguf(synthetic_family("gemma4"));
    const auto moe = synthetic_model_gguf(synthetic_family("gemma4moe"));
    // A shared-KV source out of range: every layer shared, or one layer left (sources n-2 and n-1).
    expect_refused(with_u32(dense, "gemma4.attention.shared_kv_layers", 6), "attention.shared_kv_layers");
    expect_refused(with_u32(dense, "gemma4.attention.shared_kv_layers", 5), "attention.shared_kv_layers");
    // Sources whose attention differs (layer 3 is global, the shared layer 4 a window layer).
    expect_refused(with_u32(dense, "gemma4.attention.shared_kv_layers", 3), "attention.shared_kv_layers");
    // Per-layer embeddings of a size that does not match their table.
    expect_refused(with_u32(dense, "gemma4.embedding_length_per_layer_input", 16), "embedding_length_per_layer_input");
    // No experts.
    expect_refused(with_u32(moe, "gemma4.expert_count", 0), "expert_count");
}

} // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llamacpp_tokens),
        cmocka_unit_test(test_shared_kv_layers_keep_no_cache),
        cmocka_unit_test(test_bad_metadata_refused),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
