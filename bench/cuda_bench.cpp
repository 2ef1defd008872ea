// cuda_bench.cpp — ember-cuda-bench: the two GPU figures bench/gpu.sh needs besides `ember bench`, with
// the CUDA module's own kernels (linked in as objects). One JSON line per measurement.
//
//   ember-cuda-bench bandwidth [MIB=2048]
//       Device-to-device copy bandwidth (cudaMemcpy, bytes read + written), best of 20: the ceiling of
//       batch-1 decode, which streams every weight once per token.
//   ember-cuda-bench attention [CTX=4096] [HEADS=32] [KV_HEADS=8] [HEAD_DIM=128] [KV=f16|q8_0|q4_0]
//       The paged attention kernels at CTX keys: a causal prefill of CTX queries and one decode query
//       at position CTX-1; TFLOP/s counts 4 * head_dim flops per (query, key, head) pair visited.
//   ember-cuda-bench gemv [TYPE=q4_0] [N_IN=4096] [N_OUT=4096] [TOKENS=1]
//       The matrix-vector kernel of a decode step (or a pass of TOKENS tokens) from DRAM (weights
//       rotated past the L2 cache): microseconds per product and the weight bytes' GB/s.
#include "attn_math.hpp"
#include "family_kernels.hpp"
#include "kernels.hpp"
#include "quant_math.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void ck(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "ember-cuda-bench: %s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

template <class F>
float time_ms(F &&f, int reps) {
    cudaEvent_t a, b;
    ck(cudaEventCreate(&a), "event"), ck(cudaEventCreate(&b), "event");
    f();  // warm-up
    ck(cudaDeviceSynchronize(), "warm-up");
    float best = 1e30f;
    for (int i = 0; i < reps; ++i) {
        ck(cudaEventRecord(a), "record");
        f();
        ck(cudaEventRecord(b), "record");
        ck(cudaEventSynchronize(b), "sync");
        float ms = 0;
        ck(cudaEventElapsedTime(&ms, a, b), "elapsed");
        best = ms < best ? ms : best;
    }
    return best;
}

int bandwidth(size_t mib) {
    const size_t bytes = mib << 20;
    void *src = nullptr, *dst = nullptr;
    ck(cudaMalloc(&src, bytes), "cudaMalloc"), ck(cudaMalloc(&dst, bytes), "cudaMalloc");
    ck(cudaMemset(src, 1, bytes), "memset");
    const float ms = time_ms([&] { ck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "copy"); }, 20);
    cudaDeviceProp p{};
    ck(cudaGetDeviceProperties(&p, 0), "properties");
    std::printf("{\"device\":\"%s\",\"copy_gb_s\":%.1f,\"mib\":%zu}\n", p.name, 2.0 * bytes / (ms * 1e-3) / 1e9, mib);
    return 0;
}

int attention(int ctx, int n_head, int n_head_kv, int hd, const std::string &kv) {
    const uint32_t kv_type = kv == "q8_0" ? 8 : kv == "q4_0" ? 2 : kv == "f16" ? 1 : 0;
    const int bs = 16, n_blocks = (ctx + bs - 1) / bs;
    const size_t nkv = size_t(n_head_kv) * hd, rb = ember::cu::kv_cache_row_bytes(kv_type, nkv);
    if (rb == 0) throw std::runtime_error("attention: KV f16, q8_0 or q4_0, rows of whole blocks of 32");
    const size_t cache = size_t(n_blocks) * bs * rb;
    std::vector<uint8_t> host(cache);
    uint32_t st = 1;
    for (size_t i = 0; i < cache; ++i) host[i] = uint8_t((st = st * 1664525u + 1013904223u) >> 24) & 0x3b;  // small halves
    std::vector<int32_t> table(n_blocks), pos(ctx), off(ctx, 0);
    for (int i = 0; i < n_blocks; ++i) table[i] = n_blocks - 1 - i;
    for (int i = 0; i < ctx; ++i) pos[i] = i;
    uint8_t *k, *v;
    int32_t *dtab, *dpos, *doff;
    float *q, *out, *part;
    const size_t nq = size_t(ctx) * n_head * hd;
    const size_t part_rows = 65536;  // as program.cpp's scratch for the partials
    ck(cudaMalloc(&k, cache), "k"), ck(cudaMalloc(&v, cache), "v");
    ck(cudaMalloc(&dtab, n_blocks * 4), "tab"), ck(cudaMalloc(&dpos, ctx * 4), "pos"), ck(cudaMalloc(&doff, ctx * 4), "off");
    ck(cudaMalloc(&q, nq * 4), "q"), ck(cudaMalloc(&out, nq * 4), "out"), ck(cudaMalloc(&part, part_rows * (hd + 2) * 4), "partials");
    ck(cudaMemcpy(k, host.data(), cache, cudaMemcpyHostToDevice), "upload");
    ck(cudaMemcpy(v, host.data(), cache, cudaMemcpyHostToDevice), "upload");
    ck(cudaMemcpy(dtab, table.data(), n_blocks * 4, cudaMemcpyHostToDevice), "upload");
    ck(cudaMemcpy(dpos, pos.data(), ctx * 4, cudaMemcpyHostToDevice), "upload");
    ck(cudaMemcpy(doff, off.data(), ctx * 4, cudaMemcpyHostToDevice), "upload");
    ck(cudaMemset(q, 0, nq * 4), "q");
    ember::cu::AttnArgs a;
    a.q = q, a.k = k, a.v = v, a.kv_type = kv_type, a.row_bytes = rb, a.block_size = bs;
    a.tables = dtab, a.tab_off = doff, a.n_head = n_head, a.n_head_kv = n_head_kv, a.head_dim = hd;
    a.scale = 0.088f, a.partials = part, a.out = out;
    // As a context of ctx positions runs them (model.cpp): splits of kAttnSplitKeys positions, the
    // tokens in groups whose partials fit part_rows.
    a.split_keys = ember::cu::kAttnSplitKeys, a.n_splits = ember::cu::splits_for(ctx, a.split_keys);
    const int group = static_cast<int>(std::max<size_t>(1, part_rows / (size_t(n_head) * a.n_splits)));
    // Prefill: every query t sees keys 0..t.
    a.pos = dpos, a.n_tokens = ctx, a.q_tile = ember::cu::attention_q_tile(n_head, n_head_kv, true);
    const float ms_pf = time_ms([&] { ember::cu::attention_ext(a, ember::cu::AttnExt{}, nullptr, group); }, 5);
    const double pairs_pf = double(ctx) * (ctx + 1) / 2 * n_head;
    // Decode: one query at position ctx - 1, split-K.
    a.pos = dpos + ctx - 1, a.tab_off = doff, a.n_tokens = 1, a.q_tile = 1;
    const float ms_dec = time_ms([&] { ember::cu::attention(a, nullptr); }, 50);
    const double pairs_dec = double(ctx) * n_head;
    std::printf("{\"ctx\":%d,\"heads\":%d,\"kv_heads\":%d,\"head_dim\":%d,\"kv\":\"%s\",\"prefill_ms\":%.3f,"
                "\"prefill_tflop_s\":%.2f,\"decode_us\":%.1f,\"decode_tflop_s\":%.3f,\"decode_kv_gb_s\":%.1f}\n",
                ctx, n_head, n_head_kv, hd, kv.c_str(), ms_pf, 4.0 * hd * pairs_pf / (ms_pf * 1e-3) / 1e12,
                ms_dec * 1e3, 4.0 * hd * pairs_dec / (ms_dec * 1e-3) / 1e12, 2.0 * ctx * rb / (ms_dec * 1e-3) / 1e9);
    return 0;
}

// The matrix-vector product of nt tokens over an n_out x n_in weight of `type` (random codes, scales
// that keep the values finite) as the decode step runs it: activations quantized once, then gemv; with
// enough copies of the weight in turn that none is in the L2 cache. GB/s counts the weight bytes.
int gemv_bench(const std::string &type_name, int64_t n_in, int64_t n_out, int nt) {
    using namespace ember::cu;
    const uint32_t type = type_name == "q4_0" ? kQ4_0 : type_name == "q8_0" ? kQ8_0 : type_name == "q4_k" ? kQ4_K
                          : type_name == "q6_k" ? kQ6_K : type_name == "f16" ? kF16 : 0;
    if (!type) throw std::runtime_error("gemv: type q4_0, q8_0, q4_k, q6_k or f16");
    const bool legacy = type == kQ4_0 || type == kQ8_0;
    // The device layout's bytes (weights.cpp; n_out a multiple of 16 here, so no padding rows).
    if (n_out % kTileRows != 0 || n_in % 256 != 0) throw std::runtime_error("gemv: N_IN a multiple of 256, N_OUT of 16");
    const size_t code_bytes = type == kQ4_0 ? size_t(n_in) * n_out / 2 : type == kQ8_0 ? size_t(n_in) * n_out
                              : type == kF16 ? size_t(n_in) * n_out * 2
                              : size_t(n_in / 256) * size_t(tile_groups(n_out)) * unit_bytes(type);
    const size_t scale_bytes = legacy ? size_t(n_in / 32) * n_out * 2 : 0, bytes = code_bytes + scale_bytes;
    const int copies = static_cast<int>(std::max<size_t>(2, (size_t(512) << 20) / bytes + 1));
    std::vector<uint8_t> host(bytes);
    uint32_t st = 7;
    for (auto &b : host) b = uint8_t((st = st * 1664525u + 1013904223u) >> 24);
    auto fix_half = [&](size_t at) { host[at] = uint8_t(st >> 8), host[at + 1] = 0x1c; };  // ~2^-8: finite
    if (legacy)
        for (size_t i = code_bytes; i < bytes; i += 2) fix_half(i);
    else if (type == kF16)
        for (size_t i = 0; i < bytes; i += 2) fix_half(i);
    else if (type == kQ4_K)  // tiles (tile_layout.hpp): per unit of 16 rows' super-block, 16 heads
        for (size_t u = 0; u < bytes; u += kQ4kUnitBytes)
            for (size_t rr = 0; rr < 16; ++rr) fix_half(u + 16 * rr), fix_half(u + 16 * rr + 2);
    else  // Q6_K's units: the 16 rows' d first
        for (size_t u = 0; u < bytes; u += kQ6kUnitBytes)
            for (size_t rr = 0; rr < 16; ++rr) fix_half(u + 2 * rr);
    std::vector<uint8_t *> dev(copies);
    for (auto &d : dev) ck(cudaMalloc(&d, bytes), "weights"), ck(cudaMemcpy(d, host.data(), bytes, cudaMemcpyHostToDevice), "upload");
    float *x, *y, *xs;
    int8_t *xq;
    ck(cudaMalloc(&x, size_t(nt) * n_in * 4), "x"), ck(cudaMalloc(&y, size_t(nt) * n_out * 4), "y");
    ck(cudaMalloc(&xq, size_t(nt) * n_in), "xq"), ck(cudaMalloc(&xs, size_t(nt) * n_in / 32 * 8), "xs");
    std::vector<float> xh(size_t(nt) * n_in);
    for (auto &v : xh) v = float(int((st = st * 1664525u + 1013904223u) >> 20) - 2048) / 2048.0f;
    ck(cudaMemcpy(x, xh.data(), xh.size() * 4, cudaMemcpyHostToDevice), "upload");
    const ActQ8 aq{xq, xs};
    quantize_acts(x, nt, n_in, aq, nullptr);
    int next = 0;
    const float ms = time_ms([&] {
        DevWeight w;
        w.type = type, w.n_in = n_in, w.n_out = n_out, w.codes = dev[next];
        w.scales = legacy ? reinterpret_cast<const uint16_t *>(dev[next] + code_bytes) : nullptr;
        next = (next + 1) % copies;
        gemv(w, x, aq, nt, y, nullptr, false, nullptr);
    }, 200);
    ck(cudaGetLastError(), "gemv");
    std::printf("{\"gemv\":\"%s\",\"n_in\":%lld,\"n_out\":%lld,\"tokens\":%d,\"us\":%.2f,\"weight_gb_s\":%.1f}\n",
                type_name.c_str(), (long long)n_in, (long long)n_out, nt, ms * 1e3, bytes / (ms * 1e-3) / 1e9);
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    const std::string mode = argc > 1 ? argv[1] : "";
    auto arg = [&](int i, int def) { return argc > i ? std::atoi(argv[i]) : def; };
    try {
        if (mode == "bandwidth") return bandwidth(static_cast<size_t>(arg(2, 2048)));
        if (mode == "gemv") return gemv_bench(argc > 2 ? argv[2] : "q4_0", arg(3, 4096), arg(4, 4096), arg(5, 1));
        if (mode == "attention")
            return attention(arg(2, 4096), arg(3, 32), arg(4, 8), arg(5, 128), argc > 6 ? argv[6] : "f16");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "ember-cuda-bench: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "usage: ember-cuda-bench bandwidth [MIB] | attention [CTX] [HEADS] [KV_HEADS] [HEAD_DIM] [f16|q8_0|q4_0]\n"
                         "       | gemv [q4_0|q8_0|q4_k|q6_k|f16] [N_IN] [N_OUT] [TOKENS]\n");
    return 2;
}
