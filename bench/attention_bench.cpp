// ember-attention-bench: the CPU attention kernel alone, at a model's attention shape, for measuring
// changes to src/cpu/attention*.cpp without the rest of a forward pass. One layer of a prefill of P
// tokens of one sequence, cut into passes of n_batch queries as the runtime cuts them (pass k's queries
// see the positions up to their own), over an f16 (or Q8_0) cache of random rows in 16-row blocks
// placed in reverse order (a paged layout, not one contiguous run).
//
// usage: ember-attention-bench [-p P] [-b N_BATCH] [-t THREADS] [-r ROUNDS] [--heads H] [--kv-heads H]
//                              [--head-dim D] [--q8]
// Prints the best and the median time of one layer's P tokens over the rounds, and the level in use
// (EMBER_CPU_ISA caps it as everywhere).
#include "core/fp16.hpp"
#include "cpu/kernels.hpp"
#include "cpu/threadpool.hpp"
#include "cpu/vec_dot.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace ember;
using namespace ember::cpu;

namespace {

float next_rand(uint64_t &st) {  // uniform in [-1, 1)
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int64_t>(st >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
}

} // namespace

int main(int argc, char **argv) {
    int64_t n_prompt = 512, n_batch = 256;
    int threads = 2, rounds = 7, n_head = 32, n_head_kv = 4, hd = 64;
    bool q8 = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto num = [&]() -> long { return i + 1 < argc ? std::strtol(argv[++i], nullptr, 10) : 0; };
        if (a == "-p") n_prompt = num();
        else if (a == "-b") n_batch = num();
        else if (a == "-t") threads = static_cast<int>(num());
        else if (a == "-r") rounds = static_cast<int>(num());
        else if (a == "--heads") n_head = static_cast<int>(num());
        else if (a == "--kv-heads") n_head_kv = static_cast<int>(num());
        else if (a == "--head-dim") hd = static_cast<int>(num());
        else if (a == "--q8") q8 = true;
        else {
            std::fprintf(stderr, "usage: %s [-p P] [-b N_BATCH] [-t THREADS] [-r ROUNDS] [--heads H] [--kv-heads H] "
                                 "[--head-dim D] [--q8]\n", argv[0]);
            return 2;
        }
    }
    if (n_prompt <= 0 || n_batch <= 0 || threads <= 0 || rounds <= 0 || n_head_kv <= 0 || n_head % n_head_kv != 0 || hd <= 0 ||
        (q8 && (n_head_kv * hd) % 32 != 0)) {
        std::fprintf(stderr, "bad shape\n");
        return 2;
    }
    const uint32_t bs = 16;
    const int64_t kv_row = static_cast<int64_t>(n_head_kv) * hd, q_row = static_cast<int64_t>(n_head) * hd;
    const DType type = q8 ? DType::Q8_0 : DType::F16;
    const size_t row_bytes = q8 ? static_cast<size_t>(kv_row / 32) * 34 : static_cast<size_t>(kv_row) * 2;
    const int64_t n_blocks = (n_prompt + bs - 1) / bs;
    uint64_t st = 1;
    std::vector<uint8_t> k(static_cast<size_t>(n_blocks * bs) * row_bytes), v(k.size());
    for (std::vector<uint8_t> *c : {&k, &v})
        for (size_t r = 0; r < c->size() / row_bytes; ++r) {
            uint8_t *row = c->data() + r * row_bytes;
            if (q8) {
                for (int64_t b = 0; b < kv_row / 32; ++b) {
                    const uint16_t d = fp32_to_fp16(0.01f);
                    std::memcpy(row + b * 34, &d, 2);
                    for (int i = 0; i < 32; ++i) row[b * 34 + 2 + i] = static_cast<uint8_t>(static_cast<int8_t>(next_rand(st) * 100));
                }
            } else {
                for (int64_t i = 0; i < kv_row; ++i) {
                    const uint16_t h = fp32_to_fp16(next_rand(st));
                    std::memcpy(row + 2 * i, &h, 2);
                }
            }
        }
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    for (int64_t b = 0; b < n_blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(n_blocks - 1 - b);
    std::vector<float> q(static_cast<size_t>(n_prompt * q_row)), out(q.size());
    for (float &x : q) x = 2 * next_rand(st);
    std::vector<int32_t> pos(static_cast<size_t>(n_prompt));
    for (int64_t t = 0; t < n_prompt; ++t) pos[static_cast<size_t>(t)] = static_cast<int32_t>(t);
    const std::vector<const int32_t *> tables(static_cast<size_t>(n_prompt), table.data());
    PagedKv kv;
    kv.k = k.data();
    kv.v = v.data();
    kv.type = type;
    kv.row_bytes = row_bytes;
    kv.block_size = bs;
    AttnParams p;
    p.n_head = n_head;
    p.n_head_kv = n_head_kv;
    p.head_dim = hd;
    p.scale = 1.0f / std::sqrt(static_cast<float>(hd));

    ThreadPool pool(threads);
    auto layer = [&] {
        for (int64_t t0 = 0; t0 < n_prompt; t0 += n_batch) {
            const int64_t n = std::min(n_batch, n_prompt - t0);
            attention(pool, q.data() + t0 * q_row, pos.data() + t0, tables.data() + t0, n, kv, out.data() + t0 * q_row, p);
        }
    };
    layer();  // warm up (pages, caches, the pool's threads)
    std::vector<double> ms;
    for (int r = 0; r < rounds; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        layer();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    double sum = 0;  // a checksum of the output, so two builds' bits can be compared at a glance
    for (size_t i = 0; i < out.size(); ++i) sum += out[i] * static_cast<double>(i % 97 + 1);
    std::printf("attention %s %s: P %lld (passes of %lld), %d heads on %d, head_dim %d, %d threads: best %.3f ms, median %.3f ms "
                "per layer; checksum %.9g\n",
                detail::kernels().name, dtype_name(type), static_cast<long long>(n_prompt), static_cast<long long>(n_batch), n_head,
                n_head_kv, hd, threads, ms.front(), ms[ms.size() / 2], sum);
    return 0;
}
