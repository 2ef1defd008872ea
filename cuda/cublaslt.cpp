// cublaslt.cpp — the dlopen'ed cuBLASLt table and the one product shape the module needs.
#include "cublaslt.hpp"

#include "core/error.hpp"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace ember::cu {

const LtApi *lt_api(std::string *why) {
    static LtApi api;
    static std::string err;
    static bool ok = false;
    static std::once_flag once;
    std::call_once(once, [] {
        const char *env = std::getenv("EMBER_CUBLASLT");
        const char *path = env && env[0] ? env : "libcublasLt.so.13";
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            err = format("cannot load %s: %s", path, e ? e : "unknown error");
            return;
        }
        bool all = true;
        auto get = [&](auto &fn, const char *name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
            if (!fn) {
                all = false;
                err = format("%s has no %s", path, name);
            }
        };
        get(api.create, "cublasLtCreate");
        get(api.destroy, "cublasLtDestroy");
        get(api.desc_create, "cublasLtMatmulDescCreate");
        get(api.desc_destroy, "cublasLtMatmulDescDestroy");
        get(api.desc_set, "cublasLtMatmulDescSetAttribute");
        get(api.layout_create, "cublasLtMatrixLayoutCreate");
        get(api.layout_destroy, "cublasLtMatrixLayoutDestroy");
        get(api.pref_create, "cublasLtMatmulPreferenceCreate");
        get(api.pref_destroy, "cublasLtMatmulPreferenceDestroy");
        get(api.pref_set, "cublasLtMatmulPreferenceSetAttribute");
        get(api.heuristic, "cublasLtMatmulAlgoGetHeuristic");
        get(api.matmul, "cublasLtMatmul");
        ok = all;  // the handle stays open for the process's life
    });
    if (!ok && why) *why = err;
    return ok ? &api : nullptr;
}

namespace {
void lt_check(cublasStatus_t st, const char *what) {
    if (st != CUBLAS_STATUS_SUCCESS) fail(EMBER_ERR_BACKEND, "cuda: cuBLASLt %s failed (status %d)", what, (int)st);
}
} // namespace

void lt_matmul(const LtApi &api, cublasLtHandle_t h, const LtGemm &g, void *workspace, size_t workspace_bytes,
               cudaStream_t s) {
    const cudaDataType_t in = g.half_in ? CUDA_R_16F : CUDA_R_32F;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    struct Cleanup {
        const LtApi &api;
        cublasLtMatmulDesc_t &op;
        cublasLtMatrixLayout_t &la, &lb, &lc;
        cublasLtMatmulPreference_t &pref;
        ~Cleanup() {
            if (pref) api.pref_destroy(pref);
            if (lc) api.layout_destroy(lc);
            if (lb) api.layout_destroy(lb);
            if (la) api.layout_destroy(la);
            if (op) api.desc_destroy(op);
        }
    } cleanup{api, op, la, lb, lc, pref};
    lt_check(api.desc_create(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    lt_check(api.desc_set(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
    lt_check(api.desc_set(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
    // A: k x m column-major (the weight's rows), B: k x n, C: m x n with leading dimension ldc.
    lt_check(api.layout_create(&la, in, static_cast<uint64_t>(g.k), static_cast<uint64_t>(g.m), g.k), "layout A");
    lt_check(api.layout_create(&lb, in, static_cast<uint64_t>(g.k), static_cast<uint64_t>(g.n), g.k), "layout B");
    lt_check(api.layout_create(&lc, CUDA_R_32F, static_cast<uint64_t>(g.m), static_cast<uint64_t>(g.n), g.ldc), "layout C");
    lt_check(api.pref_create(&pref), "PreferenceCreate");
    const uint64_t ws = workspace_bytes;
    lt_check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "workspace");
    // The heuristic assumes 256-byte aligned pointers unless told: tell it what they are.
    auto align_of = [](const void *p) {
        const uint64_t a = reinterpret_cast<uintptr_t>(p);
        uint32_t al = 256;
        while (al > 1 && a % al != 0) al /= 2;
        return al;
    };
    const uint32_t al_a = align_of(g.a), al_b = align_of(g.b), al_c = align_of(g.c);
    lt_check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a), "alignment A");
    lt_check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b), "alignment B");
    lt_check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c), "alignment C");
    lt_check(api.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c), "alignment D");
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    lt_check(api.heuristic(h, op, la, lb, lc, lc, pref, 1, &res, &found), "AlgoGetHeuristic");
    if (found < 1) fail(EMBER_ERR_BACKEND, "cuda: cuBLASLt has no algorithm for a %lldx%lldx%lld product", (long long)g.m,
                        (long long)g.n, (long long)g.k);
    const float alpha = 1.0f;
    lt_check(api.matmul(h, op, &alpha, g.a, la, g.b, lb, &g.beta, g.c, lc, g.c, lc, &res.algo, workspace,
                        workspace_bytes, s),
             "Matmul");
}

} // namespace ember::cu
