// matmul.cpp — matrix products: argument checks, activation quantization, and splitting the output
// rows over the thread pool. The inner loops are the row kernels of vec_dot_*.cpp.
#include "core/error.hpp"
#include "cpu/kernels.hpp"
#include "cpu/rows16.hpp"
#include "cpu/row_steal.hpp"
#include "cpu/vec_dot.hpp"

#include <algorithm>

namespace ember::cpu {

namespace {

using detail::KernelTable;
using detail::MatmulJob;
using detail::MatmulRowsFn;
using detail::QuantActs;
using detail::QuantActsK;
using detail::WeightKind;

// Below this many multiply-adds a job is done on the calling thread: waking a worker and waiting for
// it (~0.5 us with spinning workers) would cost more than the work (a 64x64 product is ~0.2 us).
constexpr int64_t kMinParallelMacs = 32 * 1024;
// Quantizing the input takes ~1 ns per element; spread it over the pool above this many elements.
constexpr int64_t kMinParallelQuant = 64 * 1024;
// Row chunks per thread. Handed out dynamically, so that a thread that starts late (a worker waking
// up) or is slowed by another process does not hold up the others by more than a chunk; but few,
// because each hand-out is an atomic RMW whose cache line moves between cores (measured: 2-4 per
// thread is best for 288 x 288 .. 288 x 2304, 1 and 8 are 10-20% slower).
constexpr int kChunksPerThread = 3;
// Big products (prefill) are split finer: there a hand-out costs nothing next to a chunk, and a late
// thread would otherwise leave a large piece of work for the end.
constexpr int kChunksPerThreadBig = 16;
constexpr int64_t kBigMacs = int64_t{1} << 24;

WeightKind weight_kind(DType t) {
    switch (t) {
    case DType::F32: return detail::kWF32;
    case DType::F16: return detail::kWF16;
    case DType::BF16: return detail::kWBF16;
    case DType::Q8_0: return detail::kWQ8_0;
    case DType::Q4_0: return detail::kWQ4_0;
    case DType::Q4_1: return detail::kWQ4_1;
    case DType::Q5_0: return detail::kWQ5_0;
    case DType::Q5_1: return detail::kWQ5_1;
    case DType::Q4_K: return detail::kWQ4_K;
    case DType::Q5_K: return detail::kWQ5_K;
    case DType::Q6_K: return detail::kWQ6_K;
    case DType::Q2_K: return detail::kWQ2_K;
    case DType::Q3_K: return detail::kWQ3_K;
    case DType::IQ4_NL: return detail::kWIQ4_NL;
    case DType::IQ4_XS: return detail::kWIQ4_XS;
    case DType::MXFP4: return detail::kWMXFP4;
    default: fail(EMBER_ERR_UNSUPPORTED, "cpu matmul: weight type %s is not supported", dtype_name(t));
    }
}

// The product's kernel and its job's weight fields for w.
void set_weight(const KernelTable &k, const WeightView &w, MatmulRowsFn &fn, MatmulJob &job) {
    fn = !w.rows16 ? k.matmul[weight_kind(w.type)] : k.matmul_rows16[rows16_kind(w.type)];
    job.w = static_cast<const uint8_t *>(w.data);
    job.row_bytes = w.row_bytes;
    job.n_rows16 = w.rows16 ? w.n_out / kRows16 * kRows16 : 0;
}

// Every kind after the float ones multiplies against the quantized activations.
bool is_quantized(WeightKind k) { return k >= detail::kWQ8_0; }

size_t round64(size_t n) { return (n + 63) & ~size_t{63}; }

// Tokens per group of QuantActs::d16 and QuantActsK::d16 / sum16 (the AMX tiles' 16 token rows).
constexpr int64_t kGroup16 = 16;

// Which activations a product needs: the per-32 ones (QuantActs) for every quantized weight but Q4_K,
// the per-256 ones (QuantActsK) for Q4_K.
struct ActKinds {
    bool b32 = false, k = false;
    void add(WeightKind kind) {
        if (kind == detail::kWQ4_K) k = true;
        else if (is_quantized(kind)) b32 = true;
    }
};

// The quantized activations' arrays, writable (the kernels get them as QuantActs / QuantActsK); a kind
// not asked for has null arrays, and so do the groups of 16 below kGroup16 tokens.
struct ActArrays {
    int8_t *qs = nullptr;
    float *d = nullptr, *sum = nullptr;
    float *d16 = nullptr;
    int8_t *kqs = nullptr;
    float *kd = nullptr, *kd16 = nullptr;
    int16_t *ksum = nullptr, *ksum16 = nullptr;
    int64_t nb = 0, nsb = 0;
    QuantActs view() const { return QuantActs{qs, d, sum, nb, d16}; }
    QuantActsK kview() const { return QuantActsK{kqs, kd, ksum, nsb, nb, kd16, ksum16}; }
};

// Carves n_tokens quantized rows of n_in out of base (each array 64-byte aligned), or only measures when
// base is null; returns the bytes taken plus 64 (room to align base). One function, so the memory
// estimate and the kernels agree.
size_t carve_acts(uint8_t *base, int64_t n_in, int64_t n_tokens, ActKinds kinds, ActArrays *out) {
    size_t at = 0;
    auto take = [&](size_t bytes) {
        uint8_t *p = base ? base + at : nullptr;
        at += round64(bytes);
        return p;
    };
    const auto nt = static_cast<size_t>(n_tokens);
    const auto padded = static_cast<size_t>((n_tokens + kGroup16 - 1) / kGroup16 * kGroup16);
    const bool groups = n_tokens >= kGroup16;
    ActArrays a;
    a.nb = n_in / 32;
    a.nsb = n_in / QK_K;
    const auto nb = static_cast<size_t>(a.nb), nsb = static_cast<size_t>(a.nsb);
    if (kinds.b32) {
        a.qs = reinterpret_cast<int8_t *>(take(nt * static_cast<size_t>(n_in)));
        a.d = reinterpret_cast<float *>(take(nt * nb * sizeof(float)));
        a.sum = reinterpret_cast<float *>(take(nt * nb * sizeof(float)));
        if (groups) a.d16 = reinterpret_cast<float *>(take(padded * nb * sizeof(float)));
    }
    if (kinds.k) {
        a.kqs = reinterpret_cast<int8_t *>(take(nt * static_cast<size_t>(n_in)));
        a.kd = reinterpret_cast<float *>(take(nt * nsb * sizeof(float)));
        a.ksum = reinterpret_cast<int16_t *>(take(nt * nb * sizeof(int16_t)));
        if (groups) {
            a.kd16 = reinterpret_cast<float *>(take(padded * nsb * sizeof(float)));
            a.ksum16 = reinterpret_cast<int16_t *>(take(padded * nb * sizeof(int16_t)));
        }
    }
    if (out) *out = a;
    return at + 64;
}

// The padding tokens of the groups' last one (n_tokens of them real): zeros.
void zero_group_tail(const ActArrays &xq, int64_t n_tokens) {
    const int64_t g = n_tokens / kGroup16, i0 = n_tokens % kGroup16;
    if (i0 == 0) return;
    if (xq.d16)
        for (int64_t b = 0; b < xq.nb; ++b)
            for (int64_t i = i0; i < kGroup16; ++i) xq.d16[(g * xq.nb + b) * kGroup16 + i] = 0;
    if (xq.kd16)
        for (int64_t s = 0; s < xq.nsb; ++s)
            for (int64_t i = i0; i < kGroup16; ++i) {
                const int64_t at = (g * xq.nsb + s) * kGroup16 + i;
                xq.kd16[at] = 0;
                for (int j = 0; j < 8; ++j) xq.ksum16[at * 8 + j] = 0;
            }
}

// At least `bytes` of scratch, 64-byte aligned. The scratch buffer only ever grows, so a steady decode
// loop allocates nothing.
uint8_t *scratch_at(Scratch &scratch, size_t bytes) {
    const auto addr = reinterpret_cast<uintptr_t>(scratch.get(bytes));
    return reinterpret_cast<uint8_t *>((addr + 63) & ~uintptr_t{63});
}

// Row `row` of xq's per-32 arrays (n_in wide) = x quantized, with the groups' copy of its scales.
void quantize_row_b32(const KernelTable &k, const float *x, int64_t n_in, const ActArrays &xq, int64_t row) {
    const int64_t nb = xq.nb;
    k.quantize_acts(x, n_in, xq.qs + row * n_in, xq.d + row * nb, xq.sum + row * nb);
    if (!xq.d16) return;
    const int64_t g0 = row / kGroup16 * nb * kGroup16 + row % kGroup16;  // block b at g0 + 16 b
    for (int64_t b = 0; b < nb; ++b) xq.d16[g0 + kGroup16 * b] = xq.d[row * nb + b];
}

// Row `row` of xq's per-256 arrays (Q4_K's) = x quantized, with the groups' copies.
void quantize_row_k(const KernelTable &k, const float *x, int64_t n_in, const ActArrays &xq, int64_t row) {
    const int64_t nb = xq.nb, nsb = xq.nsb;
    k.quantize_acts_k(x, n_in, xq.kqs + row * n_in, xq.kd + row * nsb, xq.ksum + row * nb);
    if (!xq.kd16) return;
    const int64_t g0 = row / kGroup16 * nsb * kGroup16 + row % kGroup16;  // super-block s at g0 + 16 s
    for (int64_t s = 0; s < nsb; ++s) {
        xq.kd16[g0 + kGroup16 * s] = xq.kd[row * nsb + s];
        for (int j = 0; j < 8; ++j) xq.ksum16[(g0 + kGroup16 * s) * 8 + j] = xq.ksum[row * nb + 8 * s + j];
    }
}

void quantize_row(const KernelTable &k, const float *x, int64_t n_in, const ActArrays &xq, int64_t row) {
    if (xq.qs) quantize_row_b32(k, x, n_in, xq, row);
    if (xq.kqs) quantize_row_k(k, x, n_in, xq, row);
}

// Quantizes n_tokens rows of n_in floats into scratch, the kinds asked for (layouts in vec_dot.hpp).
ActArrays quantize_input(ThreadPool &pool, Scratch &scratch, const KernelTable &k, const float *x, int64_t n_in,
                         int64_t n_tokens, ActKinds kinds) {
    ActArrays xq;
    carve_acts(scratch_at(scratch, carve_acts(nullptr, n_in, n_tokens, kinds, nullptr)), n_in, n_tokens, kinds, &xq);
    auto rows = [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) quantize_row(k, x + t * n_in, n_in, xq, t);
    };
    if (pool.size() > 1 && n_tokens > 1 && n_tokens * n_in >= kMinParallelQuant)
        pool.parallel_for(n_tokens, rows);
    else
        rows(0, n_tokens);
    zero_group_tail(xq, n_tokens);
    return xq;
}

struct Segment {
    MatmulRowsFn fn;
    MatmulJob job;
    int64_t n_out;
};

void run_segments_on(ThreadPool &pool, const Segment *segs, int n_seg, int64_t macs) {
    int64_t total = 0;
    // Ranges and chunks start at a multiple of `align` rows: the decode tiles' 4, or an interleaved
    // group (16), whose tile would otherwise copy the rows of a split group back to the file's
    // layout (rows16.hpp).
    int64_t align = 4;
    for (int s = 0; s < n_seg; ++s) {
        total += segs[s].n_out;
        if (segs[s].job.n_rows16 > 0) align = kRows16;
    }
    if (pool.size() == 1 || macs < kMinParallelMacs || total < 2) {
        for (int s = 0; s < n_seg; ++s) segs[s].fn(segs[s].job, 0, segs[s].n_out);
        return;
    }
    // Decode: a contiguous range per thread, with stealing (row_steal.hpp says why). The segments' rows
    // are one index space; a range may end in one segment and go on in the next.
    if (segs[0].job.n_tokens == 1 &&
        detail::run_rows_stealing(pool, total, segs[0].job.row_bytes, align, [&](int64_t r0, int64_t r1) {
            int64_t base = 0;  // segment s's first row in the index space
            for (int s = 0; s < n_seg; base += segs[s].n_out, ++s) {
                const int64_t a = r0 - base > 0 ? r0 - base : 0, b = r1 - base < segs[s].n_out ? r1 - base : segs[s].n_out;
                if (a < b) segs[s].fn(segs[s].job, a, b);
            }
        }))
        return;
    // Chunks are a multiple of 4 rows so that the decode tile (4 rows) never splits at a chunk edge, and
    // in big products (prefill) of 16 rows, the panel height of the AVX-512 and AMX GEMMs, so that no
    // chunk ends in a partial panel that computes 16 rows to keep fewer. They are sized for the threads
    // the pool uses now (width), which is fewer than its size while the machine is busy
    // (threadpool.hpp).
    const int nth = pool.width();
    const bool big = macs >= kBigMacs;
    const int64_t per_thread = big ? kChunksPerThreadBig : kChunksPerThread;
    int64_t chunk = (total + nth * per_thread - 1) / (nth * per_thread);
    chunk = chunk < 8 ? 8 : (chunk + 3) & ~int64_t{3};
    if (big || align == kRows16) chunk = (chunk + 15) & ~int64_t{15};
    int64_t first[5] = {0, 0, 0, 0, 0};  // first chunk index of each segment
    for (int s = 0; s < n_seg; ++s) first[s + 1] = first[s] + (segs[s].n_out + chunk - 1) / chunk;
    pool.run_chunks(first[n_seg], [&](int64_t c) {
        int s = 0;
        while (c >= first[s + 1]) ++s;
        const int64_t r0 = (c - first[s]) * chunk;
        const int64_t r1 = r0 + chunk < segs[s].n_out ? r0 + chunk : segs[s].n_out;
        segs[s].fn(segs[s].job, r0, r1);
    });
}

// The product of the segments; EMBER_ERR_OUT_OF_MEMORY when a kernel could not get its memory (MatmulJob::
// failed: kernels run on pool threads and cannot throw).
void run_segments(ThreadPool &pool, Segment *segs, int n_seg, int64_t macs) {
    std::atomic<bool> failed{false};
    for (int s = 0; s < n_seg; ++s) segs[s].job.failed = &failed;
    run_segments_on(pool, segs, n_seg, macs);
    if (failed.load())
        fail(EMBER_ERR_OUT_OF_MEMORY, "cpu matmul: no memory for the rows a product copies back to the file's layout");
}

void check_weight(const WeightView &w, int64_t n_in) {
    if (w.n_in != n_in)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cpu matmul: weights disagree on the input size (%lld vs %lld)",
             static_cast<long long>(w.n_in), static_cast<long long>(n_in));
    // Quantized rows must be whole blocks of their type (32 or 256), and so whole activation blocks.
    if (is_quantized(weight_kind(w.type)) && w.n_in % dtype_info(w.type).block_size != 0)
        fail(EMBER_ERR_INVALID_ARGUMENT, "cpu matmul: %s row of %lld elements is not whole blocks", dtype_name(w.type),
             static_cast<long long>(w.n_in));
}

// EMBER_PRECISION_HIGH. Rounding activations to int8 per block of 32 is the whole of a quantized
// product's error against exact arithmetic on the file's weights (the weights are what they are); at
// near-ties it decides the argmax, or which experts a router picks. Here each activation row is
// rounded as usual (scales d, integers q), and what that rounding left, r = x - d q (at most d/2 per
// element), is rounded the same way with scales of its own: x = d q + d' q' + (at most d'/2), about 7
// bits more. The pair goes to the kernels as two tokens of one batch, so the weights are read once and
// the integer work doubles; y = (product of the first row + product of the second) + bias. Each token's
// bits come from its own pair, at any batch size, since the kernels are batch-invariant.
// Tokens go in chunks whose pair products fit in kPreciseOutBytes.
constexpr size_t kPreciseOutBytes = size_t{4} << 20;

void matmul_precise(ThreadPool &pool, Scratch &scratch, const WeightView *const *w, const int *idx, int n_q,
                    const float *x, int64_t n_tokens, float *const *y, const float *const *bias) {
    const KernelTable &k = detail::kernels();
    const int64_t n_in = w[idx[0]]->n_in;
    int64_t out_total = 0;
    ActKinds kinds;
    for (int i = 0; i < n_q; ++i) {
        out_total += w[idx[i]]->n_out;
        kinds.add(weight_kind(w[idx[i]]->type));
    }
    const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n_tokens,
        static_cast<int64_t>(kPreciseOutBytes / (2 * sizeof(float) * static_cast<size_t>(out_total)))));
    const size_t act_bytes = carve_acts(nullptr, n_in, 2 * chunk, kinds, nullptr);
    const size_t resid_bytes = round64(static_cast<size_t>(chunk * n_in) * sizeof(float));
    const size_t out_bytes = round64(static_cast<size_t>(2 * chunk * out_total) * sizeof(float));
    uint8_t *base = scratch_at(scratch, act_bytes + resid_bytes + out_bytes);
    ActArrays xq;
    carve_acts(base, n_in, 2 * chunk, kinds, &xq);
    auto *resid = reinterpret_cast<float *>(base + act_bytes - 64);
    auto *out = reinterpret_cast<float *>(reinterpret_cast<uint8_t *>(resid) + resid_bytes);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += chunk) {
        const int64_t c = std::min(chunk, n_tokens - t0);
        auto rows = [&](int64_t a, int64_t b) {
            for (int64_t i = a; i < b; ++i) {
                const float *xt = x + (t0 + i) * n_in;
                float *rt = resid + i * n_in;
                // Each kind's pair from its own rounding of x.
                if (xq.qs) {
                    quantize_row_b32(k, xt, n_in, xq, 2 * i);
                    const int8_t *q0 = xq.qs + 2 * i * n_in;
                    const float *d0 = xq.d + 2 * i * xq.nb;
                    for (int64_t j = 0; j < n_in; ++j) rt[j] = xt[j] - d0[j / 32] * static_cast<float>(q0[j]);
                    quantize_row_b32(k, rt, n_in, xq, 2 * i + 1);
                }
                if (xq.kqs) {
                    quantize_row_k(k, xt, n_in, xq, 2 * i);
                    const int8_t *q0 = xq.kqs + 2 * i * n_in;
                    const float *d0 = xq.kd + 2 * i * xq.nsb;
                    for (int64_t j = 0; j < n_in; ++j) rt[j] = xt[j] - d0[j / QK_K] * static_cast<float>(q0[j]);
                    quantize_row_k(k, rt, n_in, xq, 2 * i + 1);
                }
            }
        };
        if (pool.size() > 1 && c > 1 && c * n_in >= kMinParallelQuant) pool.parallel_for(c, rows);
        else rows(0, c);
        // The arrays are sized for 2 chunk tokens; this pass has 2 c (no groups below 16 of them).
        ActArrays pass = xq;
        if (2 * c < kGroup16) pass.d16 = pass.kd16 = nullptr, pass.ksum16 = nullptr;
        zero_group_tail(pass, 2 * c);
        Segment segs[4];
        int64_t macs = 0, at = 0;
        for (int i = 0; i < n_q; ++i) {
            const WeightView &wi = *w[idx[i]];
            Segment &sg = segs[i];
            set_weight(k, wi, sg.fn, sg.job);
            sg.n_out = wi.n_out;
            sg.job.n_in = n_in;
            sg.job.n_tokens = 2 * c;
            sg.job.xq = pass.view();
            sg.job.xk = pass.kview();
            sg.job.y = out + 2 * c * at;
            sg.job.y_stride = wi.n_out;
            macs += wi.n_out * n_in * 2 * c;
            at += wi.n_out;
        }
        run_segments(pool, segs, n_q, macs);
        at = 0;
        for (int i = 0; i < n_q; ++i) {
            const int64_t n_out = w[idx[i]]->n_out;
            const float *o = out + 2 * c * at, *bi = bias ? bias[idx[i]] : nullptr;
            for (int64_t t = 0; t < c; ++t) {
                const float *hi = o + 2 * t * n_out, *lo = hi + n_out;
                float *yt = y[idx[i]] + (t0 + t) * n_out;
                for (int64_t r = 0; r < n_out; ++r) yt[r] = (hi[r] + lo[r]) + (bi ? bi[r] : 0.0f);
            }
            at += n_out;
        }
    }
}

} // namespace

size_t matmul_scratch_bytes(int64_t n_in, int64_t n_tokens) {
    ActKinds all;
    all.b32 = true;
    all.k = n_in % QK_K == 0;
    return carve_acts(nullptr, n_in, n_tokens, all, nullptr);
}

void matmul_multi(ThreadPool &pool, Scratch &scratch, const WeightView *const *w, int n_w, const float *x,
                  int64_t n_tokens, float *const *y, const float *const *bias, bool precise) {
    if (n_w < 1 || n_w > 4) fail(EMBER_ERR_INVALID_ARGUMENT, "cpu matmul_multi: %d weights (1..4)", n_w);
    if (n_tokens <= 0) return;
    const int64_t n_in = w[0]->n_in;
    bool any_quantized = false;
    ActKinds kinds;
    for (int i = 0; i < n_w; ++i) {
        check_weight(*w[i], n_in);
        any_quantized |= is_quantized(weight_kind(w[i]->type));
        kinds.add(weight_kind(w[i]->type));
    }
    if (precise && any_quantized) {
        // The quantized weights through matmul_precise, the float ones (which read x itself) as usual.
        int q[4], n_q = 0;
        const WeightView *fw[4];
        float *fy[4];
        const float *fb[4];
        int n_f = 0;
        for (int i = 0; i < n_w; ++i) {
            if (is_quantized(weight_kind(w[i]->type))) q[n_q++] = i;
            else fw[n_f] = w[i], fy[n_f] = y[i], fb[n_f] = bias ? bias[i] : nullptr, ++n_f;
        }
        matmul_precise(pool, scratch, w, q, n_q, x, n_tokens, y, bias);
        if (n_f > 0) matmul_multi(pool, scratch, fw, n_f, x, n_tokens, fy, fb);
        return;
    }
    const KernelTable &k = detail::kernels();
    const ActArrays xq = any_quantized ? quantize_input(pool, scratch, k, x, n_in, n_tokens, kinds) : ActArrays{};

    Segment segs[4];
    int64_t macs = 0;
    for (int i = 0; i < n_w; ++i) {
        Segment &s = segs[i];
        set_weight(k, *w[i], s.fn, s.job);
        s.n_out = w[i]->n_out;
        s.job.n_in = n_in;
        s.job.n_tokens = n_tokens;
        s.job.x = x;
        s.job.xq = xq.view();
        s.job.xk = xq.kview();
        s.job.y = y[i];
        s.job.y_stride = w[i]->n_out;
        s.job.bias = bias ? bias[i] : nullptr;
        macs += s.n_out * n_in * n_tokens;
    }
    run_segments(pool, segs, n_w, macs);
}

void matmul(ThreadPool &pool, Scratch &scratch, const WeightView &w, const float *x, int64_t n_tokens, float *y,
            const float *bias, bool precise) {
    const WeightView *ws[1] = {&w};
    float *ys[1] = {y};
    const float *bs[1] = {bias};
    matmul_multi(pool, scratch, ws, 1, x, n_tokens, ys, bs, precise);
}

} // namespace ember::cpu
