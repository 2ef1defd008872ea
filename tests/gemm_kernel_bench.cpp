// ember-gemm-kernel: the prefill GEMM alone at TinyLlama's shapes, for tuning the panel kernels
// (matmul_panel_*.cpp) without a model's attention and elementwise work around them. A benchmark kept
// with the tests because it calls the kernels' internal entry points (src/cpu), which bench/ may not.
//
//   ember-gemm-kernel [threads] [tokens] [reps] [types]    (defaults: 1 256 5 Q4_0,Q4_K,Q6_K)
//
// Per type and shape (2048 -> 2048, 2048 -> 5632, 5632 -> 2048: TinyLlama's attention, gate/up and down
// products) it prints the best of `reps` timings in GMAC/s (multiply-adds of the n_in x n_out x tokens
// product per second) at the level in use (EMBER_CPU_ISA picks another). Q4_K and Q6_K are interleaved 16
// rows at a time first, as the model loader leaves them at the AMX and AVX-512 levels (rows16.hpp), so
// the numbers are those of a Q4_K_M prefill's products. Weights are random, quantized with the reference
// quantizers; the activations random in [-1, 1).
#include "core/dtype.hpp"
#include "cpu/kernels.hpp"
#include "cpu/rows16.hpp"
#include "cpu/threadpool.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

using namespace ember;
using namespace ember::cpu;

namespace {

double run(ThreadPool &pool, Scratch &scratch, const WeightView &w, const std::vector<float> &x, int64_t nt,
           std::vector<float> &y, int reps) {
    for (int i = 0; i < 3; ++i) matmul(pool, scratch, w, x.data(), nt, y.data(), nullptr);
    const double macs = static_cast<double>(w.n_in) * static_cast<double>(w.n_out) * static_cast<double>(nt);
    const int iters = static_cast<int>(4e10 / macs) + 1;  // ~0.1-0.2 s per rep at 200-400 GMAC/s
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) matmul(pool, scratch, w, x.data(), nt, y.data(), nullptr);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
        best = std::fmin(best, s);
    }
    return macs / best * 1e-9;
}

} // namespace

int main(int argc, char **argv) {
    const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
    const int64_t nt = argc > 2 ? std::atoll(argv[2]) : 256;
    const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
    const char *types = argc > 4 ? argv[4] : "Q4_0,Q4_K,Q6_K";
    const struct { int64_t n_in, n_out; } shapes[] = {{2048, 2048}, {2048, 5632}, {5632, 2048}};
    ThreadPool pool(threads);
    Scratch scratch;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (DType type : {DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
        if (!std::strstr(types, dtype_name(type))) continue;
        for (const auto &sh : shapes) {
            const size_t rb = dtype_row_bytes(type, static_cast<uint64_t>(sh.n_in));
            std::vector<uint8_t> data(rb * static_cast<size_t>(sh.n_out));
            std::vector<float> row(static_cast<size_t>(sh.n_in));
            for (int64_t r = 0; r < sh.n_out; ++r) {
                for (float &v : row) v = uni(rng);
                quantize_row(type, row.data(), data.data() + rb * static_cast<size_t>(r), sh.n_in);
            }
            WeightView w;
            w.type = type;
            w.n_in = sh.n_in;
            w.n_out = sh.n_out;
            w.data = data.data();
            w.row_bytes = rb;
            if (rows16_type(type) && rows16_native()) {
                rows16_pack(type, data.data(), sh.n_out, rb);
                w.rows16 = true;
            }
            std::vector<float> x(static_cast<size_t>(sh.n_in * nt)), y(static_cast<size_t>(sh.n_out * nt));
            for (float &v : x) v = uni(rng);
            const double g = run(pool, scratch, w, x, nt, y, reps);
            std::printf("%-6s %-4s %4lld -> %4lld, %lld tok, %d thr: %6.1f GMAC/s\n", isa_name(), dtype_name(type),
                        (long long)sh.n_in, (long long)sh.n_out, (long long)nt, threads, g);
            std::fflush(stdout);
        }
    }
    return 0;
}
