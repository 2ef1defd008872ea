// test_cuda_host.cpp — the CUDA backend's arithmetic that needs no GPU (cuda/attn_math.hpp), on the CPU:
// split-K key ranges cover every key exactly once, in order; partial softmax results combine to the
// plain softmax whatever the split and whichever splits are empty; the Q8_0 cache offsets and paged
// row lookup match the CPU backend's layout. The kernels include the same header.
#include "test_util.h"

#include "../cuda/attn_math.hpp"
#include "core/dtype.hpp"
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"

#include <cmath>
#include <cstring>
#include <vector>

using namespace ember;

namespace {

void test_split_ranges(void **) {
    for (int32_t n_keys : {1, 2, 31, 32, 33, 100, 150, 1000, 4096, 4097})
        for (int32_t n_splits : {1, 2, 3, 4, 7, 8, 16, 32}) {
            int32_t next = 0;
            for (int32_t i = 0; i < n_splits; ++i) {
                const cu::KeyRange r = cu::split_range(n_keys, n_splits, i);
                if (r.begin >= r.end) {
                    assert_int_equal(r.begin, r.end);
                    assert_int_equal(r.begin, n_keys);  // empty splits only at the end
                    continue;
                }
                assert_int_equal(r.begin, next);
                assert_int_equal(r.begin % 32, 0);
                next = r.end;
            }
            assert_int_equal(next, n_keys);
        }
}

void test_choose_splits(void **) {
    // Decode of one token over a long context: many splits; prefill: one per query; never more than
    // the buffer holds, never more keys' tiles than splits.
    assert_true(cu::choose_splits(1, 32, 4096, 1024) >= 16);
    assert_int_equal(cu::choose_splits(512, 32, 4096, 512 * 32), 1);
    assert_int_equal(cu::choose_splits(1, 32, 20, 1024), 1);
    for (int32_t nt : {1, 2, 5, 9, 64})
        for (int32_t nh : {1, 4, 32})
            for (int32_t keys : {1, 64, 500, 8192}) {
                const int32_t s = cu::choose_splits(nt, nh, keys, 1024);
                assert_true(s >= 1 && s <= 32);
                assert_true(s == 1 || nt * nh * s <= 1024);
                assert_true(s == 1 || s <= (keys + 31) / 32);
            }
}

// Partials computed the way the kernel does (online softmax over each range), combined, against a
// plain softmax in double.
void test_combine(void **) {
    uint64_t st = 5;
    const int hd = 24;
    for (int32_t n_keys : {1, 5, 40, 333})
        for (int32_t n_splits : {1, 2, 4, 8, 32}) {
            std::vector<float> s(n_keys), v(size_t(n_keys) * hd);
            for (float &x : s) x = test_randf(&st, -12, 12);
            for (float &x : v) x = test_randf(&st, -1, 1);
            const int stride = hd + 2;
            std::vector<float> part(size_t(n_splits) * stride);
            for (int32_t i = 0; i < n_splits; ++i) {
                const cu::KeyRange r = cu::split_range(n_keys, n_splits, i);
                float m = -INFINITY, l = 0, *acc = &part[size_t(i) * stride + 2];
                for (int d = 0; d < hd; ++d) acc[d] = 0;
                for (int32_t j = r.begin; j < r.end; ++j) {
                    const float mn = std::fmax(m, s[j]), corr = std::exp(m - mn), w = std::exp(s[j] - mn);
                    l = l * corr + w;
                    for (int d = 0; d < hd; ++d) acc[d] = acc[d] * corr + w * v[size_t(j) * hd + d];
                    m = mn;
                }
                part[size_t(i) * stride] = m, part[size_t(i) * stride + 1] = l;
            }
            std::vector<float> out(hd);
            assert_true(cu::combine_partials(part.data(), n_splits, stride, hd, out.data(), [](float x) { return std::exp(x); }));
            double mx = -INFINITY;
            for (float x : s) mx = std::fmax(mx, x);
            double L = 0;
            for (float x : s) L += std::exp(x - mx);
            for (int d = 0; d < hd; ++d) {
                double o = 0;
                for (int32_t j = 0; j < n_keys; ++j) o += std::exp(s[j] - mx) * v[size_t(j) * hd + d];
                if (std::fabs(out[d] - o / L) > 1e-5)
                    fail_msg("keys %d splits %d dim %d: %.7g vs %.7g", n_keys, n_splits, d, out[d], o / L);
            }
        }
    // Every split empty: reported, nothing written.
    std::vector<float> part(4 * 6, 0.0f);
    for (int i = 0; i < 4; ++i) part[i * 6] = -INFINITY;
    float out[4] = {7, 7, 7, 7};
    assert_false(cu::combine_partials(part.data(), 4, 6, 4, out, [](float x) { return std::exp(x); }));
    assert_true(out[0] == 7.0f);
}

// The kernels' Q8_0 element offsets read the CPU's cache rows (cpu::store_kv_row) back exactly.
void test_q8_offsets(void **) {
    uint64_t st = 9;
    const int n = 96;
    std::vector<float> x(n);
    for (float &v : x) v = test_randf(&st, -3, 3);
    std::vector<uint8_t> row(dtype_row_bytes(DType::Q8_0, n));
    cpu::store_kv_row(DType::Q8_0, x.data(), row.data(), n);
    std::vector<float> want(n);
    cpu::dequantize_row(DType::Q8_0, row.data(), want.data(), n);
    for (uint32_t j = 0; j < uint32_t(n); ++j) {
        uint16_t h;
        std::memcpy(&h, row.data() + cu::q8_scale_offset(j), 2);
        const float got = fp16_to_fp32(h) * float(int8_t(row[cu::q8_code_offset(j)]));
        assert_true(got == want[j]);
    }
    const int32_t table[3] = {5, 0, 9};
    assert_int_equal(cu::cache_row(table, 0, 16), 80);
    assert_int_equal(cu::cache_row(table, 17, 16), 1);
    assert_int_equal(cu::cache_row(table, 40, 16), 9 * 16 + 8);
    assert_int_equal(cu::cache_row(table, 20, 7), 9 * 7 + 6);
}

} // namespace

int main() {
    const CMUnitTest tests[] = {cmocka_unit_test(test_split_ranges), cmocka_unit_test(test_choose_splits),
                                cmocka_unit_test(test_combine), cmocka_unit_test(test_q8_offsets)};
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
