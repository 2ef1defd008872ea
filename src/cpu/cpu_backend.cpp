// cpu_backend.cpp — the CPU backend: always present, weights used in place from the file mapping.
#include "backend/backend.hpp"
#include "cpu/cpu_context.hpp"

namespace ember {

namespace {

class CpuModel final : public BackendModel {
public:
    explicit CpuModel(const ModelDesc &desc) : desc_(desc) {}
    std::unique_ptr<BackendContext> create_context(const ContextParams &params) override {
        return std::make_unique<cpu::CpuContext>(desc_, params);
    }

private:
    const ModelDesc &desc_;
};

class CpuBackend final : public Backend {
public:
    ember_backend_kind kind() const override { return EMBER_BACKEND_CPU; }
    const char *name() const override { return "cpu"; }
    int score() const override { return 1; }  // always usable, any GPU backend outranks it
    std::unique_ptr<BackendModel> load_model(const ModelDesc &desc) override {
        return std::make_unique<CpuModel>(desc);
    }
    size_t context_bytes(const ModelDesc &desc, const ContextParams &params) const override {
        return cpu::cpu_context_sizes(desc, params).bytes();
    }
};

} // namespace

std::unique_ptr<Backend> cpu_backend_create() { return std::make_unique<CpuBackend>(); }

} // namespace ember
