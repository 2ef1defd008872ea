// module_loader.cpp — finds, loads and wraps backend modules (see module_loader.hpp, module_api.h).
#include "backend/module_loader.hpp"

#include "core/error.hpp"

#include <dlfcn.h>

#include <functional>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

namespace ember {

namespace {

constexpr size_t kMsgCap = 1024;

// Turns a module status into an ember::Error carrying the module's message.
void check(int status, const char *msg, const char *what) {
    if (status == EMBER_OK) return;
    fail(static_cast<ember_status>(status), "%s: %s", what, msg[0] ? msg : "failed");
}

// The table entries that exist in a module of this struct_size (append-only table).
bool has_entry(const ember_backend_module *api, size_t offset_end) { return api->struct_size >= offset_end; }

// Whether the module has a capability (module_api.h's EMBER_MOD_CAP_* bits; none in a table without caps).
bool has_cap(const ember_backend_module *api, uint32_t cap) {
    return has_entry(api, offsetof(ember_backend_module, caps) + sizeof api->caps) && (api->caps & cap);
}
// Whether the module runs models with recurrent state (and has the table's state entries).
bool takes_state(const ember_backend_module *api) {
    return has_cap(api, EMBER_MOD_CAP_RECURRENT_STATE) &&
           has_entry(api, offsetof(ember_backend_module, write_state) + sizeof api->write_state) && api->copy_state &&
           api->read_state && api->write_state;
}
// Whether the module's contexts keep the window layers' rows apart.
bool takes_window_blocks(const ember_backend_module *api) { return has_cap(api, EMBER_MOD_CAP_WINDOW_BLOCKS); }

} // namespace

std::string backend_module_dir() {
    if (const char *env = std::getenv("EMBER_BACKEND_DIR"); env && env[0]) return env;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&backend_module_dir), &info) && info.dli_fname) {
        std::string path = info.dli_fname;
        const size_t slash = path.rfind('/');
        if (slash != std::string::npos) return path.substr(0, slash);
    }
    return "";
}

const LoadedModule *backend_module_load(const char *name, std::string *why) {
    static std::mutex mutex;
    static std::map<std::string, LoadedModule> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = loaded.find(name); it != loaded.end()) return &it->second;
    const std::string dir = backend_module_dir();
    const std::string path = (dir.empty() ? "" : dir + "/") + "libember-" + name + ".so";
    void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        *why = format("cannot load %s: %s", path.c_str(), e ? e : "unknown error");
        return nullptr;
    }
    auto entry = reinterpret_cast<ember_backend_module_fn>(dlsym(h, EMBER_BACKEND_MODULE_SYMBOL));
    const ember_backend_module *api = entry ? entry() : nullptr;
    if (!api || api->api_version != EMBER_MODULE_API_VERSION ||
        !has_entry(api, offsetof(ember_backend_module, run_op) + sizeof(api->run_op))) {
        *why = format("%s is not a compatible backend module (API version %u, this library needs %u)", path.c_str(),
                      api ? api->api_version : 0u, EMBER_MODULE_API_VERSION);
        dlclose(h);
        return nullptr;
    }
    LoadedModule &m = loaded[name];
    m.api = api;
    m.path = path;
    return &m;
}

ember_mod_context_params module_context_params(const ContextParams &p) {
    ember_mod_context_params m{};
    m.struct_size = sizeof m;
    m.n_blocks = p.n_blocks, m.block_size = p.block_size, m.n_batch = p.n_batch, m.n_logits = p.n_logits;
    m.kv_type = static_cast<uint32_t>(p.kv_type);
    m.n_threads = p.n_threads;
    m.n_window_blocks = p.n_window_blocks;
    m.n_state_slots = p.n_state_slots;
    return m;
}

namespace {

class ModuleContext final : public BackendContext {
public:
    ModuleContext(const ember_backend_module *api, ember_mod_context *c, size_t kv_bytes) : api_(api), c_(c), kv_bytes_(kv_bytes) {}
    // The module's context, when `other` is one of the same module (to share its threads), else nullptr.
    static ember_mod_context *same_module(const BackendContext *other, const ember_backend_module *api) {
        auto *m = dynamic_cast<const ModuleContext *>(other);
        return m && m->api_ == api ? m->c_ : nullptr;
    }
    ~ModuleContext() override {
        if (c_) api_->context_free(c_);
    }
    ember_mod_context **slot() { return &c_; }
    void forward(const Batch &b) override {
        ember_mod_batch mb{};
        mb.struct_size = sizeof mb;
        mb.n_tokens = b.n_tokens, mb.tokens = b.tokens, mb.pos = b.pos, mb.tables = b.tables;
        mb.window_tables = b.window_tables;
        mb.precision = b.precision;
        mb.state_slots = b.state_slots, mb.state_src = b.state_src;
        mb.inputs = b.inputs, mb.hidden = b.hidden;
        mb.input = b.input;
        mb.state_keep = b.state_keep;
        mb.n_logits = b.n_logits, mb.logits_rows = b.logits_rows, mb.logits = b.logits;
        if (b.cancel) {
            mb.cancel = [](void *flag) { return static_cast<const std::atomic<bool> *>(flag)->load() ? 1 : 0; };
            mb.cancel_data = const_cast<std::atomic<bool> *>(b.cancel);
        }
        char msg[kMsgCap] = "";
        check(api_->forward(c_, &mb, msg, sizeof msg), msg, "forward");
    }
    void copy_block(int32_t src, int32_t dst) override {
        char msg[kMsgCap] = "";
        check(api_->copy_block(c_, src, dst, msg, sizeof msg), msg, "copy_block");
    }
    size_t kv_bytes_per_token() const override { return kv_bytes_; }
    void read_kv(const int32_t *table, uint32_t n, uint8_t *dst) const override {
        char msg[kMsgCap] = "";
        check(api_->read_kv(c_, table, n, dst, msg, sizeof msg), msg, "read_kv");
    }
    void write_kv(const int32_t *table, uint32_t n, const uint8_t *src) override {
        char msg[kMsgCap] = "";
        check(api_->write_kv(c_, table, n, src, msg, sizeof msg), msg, "write_kv");
    }

    void copy_state(int32_t src, int32_t dst) override {
        char msg[kMsgCap] = "";
        check(state_api()->copy_state(c_, src, dst, msg, sizeof msg), msg, "copy_state");
    }
    void read_state(int32_t slot, float *dst) const override {
        char msg[kMsgCap] = "";
        check(state_api()->read_state(c_, slot, dst, msg, sizeof msg), msg, "read_state");
    }
    void write_state(int32_t slot, const float *src) override {
        char msg[kMsgCap] = "";
        check(state_api()->write_state(c_, slot, src, msg, sizeof msg), msg, "write_state");
    }

private:
    // The table's state entries; a context of a module without them never has state slots.
    const ember_backend_module *state_api() const {
        if (!takes_state(api_)) fail(EMBER_ERR_INTERNAL, "%s: no recurrent state in this module", api_->name);
        return api_;
    }
    const ember_backend_module *api_;
    ember_mod_context *c_;
    size_t kv_bytes_;
};

class ModuleModel final : public BackendModel {
public:
    // Made before the module's model, which it then receives through slot(): a wrapper that could not be
    // allocated after the module made its object would leak that object.
    ModuleModel(const ember_backend_module *api, const ember_mod_model_desc &desc, std::function<void()> on_free)
        : api_(api), desc_(desc), on_free_(std::move(on_free)) {}
    ~ModuleModel() override {
        if (!m_) return;
        api_->model_free(m_);
        on_free_();
    }
    ember_mod_model **slot() { return &m_; }
    std::unique_ptr<BackendContext> create_context(const ContextParams &params) override {
        check_kv_type(desc_, params.kv_type);
        // A module without the capability would ignore a window pool (and its window tables).
        if (params.n_window_blocks > 0 && !takes_window_blocks(api_))
            fail(EMBER_ERR_UNSUPPORTED, "%s: this module keeps sliding-window layers' KV rows in the main blocks", api_->name);
        if (params.n_state_slots > 0 && !takes_state(api_))
            fail(EMBER_ERR_UNSUPPORTED, "%s: this module does not run models with recurrent layers", api_->name);
        ember_mod_context_params p = module_context_params(params);
        p.share_threads_with = ModuleContext::same_module(params.share_threads_with, api_);
        auto ctx = std::make_unique<ModuleContext>(api_, nullptr, ember::kv_bytes_per_token(desc_, params.kv_type));
        char msg[kMsgCap] = "";
        check(api_->context_create(m_, &p, ctx->slot(), msg, sizeof msg), msg, "context_create");
        return ctx;
    }

private:
    const ember_backend_module *api_;
    const ember_mod_model_desc &desc_;
    ember_mod_model *m_ = nullptr;
    std::function<void()> on_free_;  // tells the backend one model fewer uses its device
};

class ModuleBackend final : public Backend {
public:
    explicit ModuleBackend(const LoadedModule &mod) : api_(mod.api) {}
    ~ModuleBackend() override {
        // The registry lives until exit, when the driver may already be partly torn down: the device is
        // left to the process's end rather than closed from a static destructor.
    }
    ember_backend_kind kind() const override { return static_cast<ember_backend_kind>(api_->backend_kind); }
    bool window_blocks() const override { return takes_window_blocks(api_); }
    bool precision_high() const override { return has_cap(api_, EMBER_MOD_CAP_PRECISION_HIGH); }
    bool recurrent_state() const override { return takes_state(api_); }
    bool keep_states() const override { return takes_state(api_) && has_cap(api_, EMBER_MOD_CAP_KEEP_STATES); }
    bool input_rows() const override { return has_cap(api_, EMBER_MOD_CAP_INPUT_ROWS); }
    const char *name() const override { return api_->name; }
    int score() const override {
        std::call_once(probe_once_, [this] {
            ember_mod_device_info info[16];
            uint32_t n = 0;
            char msg[kMsgCap] = "";
            if (api_->list_devices(info, 16, &n, msg, sizeof msg) != EMBER_OK) {
                why_ = msg;
                return;
            }
            for (uint32_t i = 0; i < n && i < 16; ++i) score_ = std::max(score_, info[i].score);
            if (score_ <= 0) why_ = format("no usable %s device", api_->name);
        });
        return score_;
    }
    std::unique_ptr<BackendModel> load_model(const ember_mod_model_desc &desc) override {
        auto model = std::make_unique<ModuleModel>(api_, desc, [this] { release(); });
        ember_mod_backend *b = acquire();
        char msg[kMsgCap] = "";
        const int st = api_->model_load(b, &desc, model->slot(), msg, sizeof msg);
        if (st != EMBER_OK) release();
        check(st, msg, "model_load");
        return model;
    }
    size_t context_bytes(const ember_mod_model_desc &desc, const ContextParams &params) const override {
        const ember_mod_context_params p = module_context_params(params);
        uint64_t bytes = 0;
        char msg[kMsgCap] = "";
        check(api_->context_bytes(nullptr, &desc, &p, &bytes, msg, sizeof msg), msg, "context_bytes");
        return static_cast<size_t>(bytes);
    }
    uint64_t device_memory_available() override {
        if (!has_entry(api_, offsetof(ember_backend_module, memory_available) + sizeof api_->memory_available) ||
            !api_->memory_available)
            return UINT64_MAX;
        ember_mod_backend *b = acquire();   // (the session or engine asking opens it next anyway)
        uint64_t bytes = UINT64_MAX;
        char msg[kMsgCap] = "";
        const int st = api_->memory_available(b, &bytes, msg, sizeof msg);
        release();
        check(st, msg, "memory_available");
        return bytes;
    }
    bool host_layout_wants(const ember_mod_tensor &t) const override {
        return has_entry(api_, offsetof(ember_backend_module, host_layout_rewrite) + sizeof api_->host_layout_rewrite) &&
               api_->host_layout_wants && api_->host_layout_rewrite && api_->host_layout_wants(&t) != 0;
    }
    void host_layout_rewrite(const ember_mod_tensor &t, void *data) const override { api_->host_layout_rewrite(&t, data); }
    void run_op(const ember_mod_op &op) {
        ember_mod_backend *b = acquire();
        char msg[kMsgCap] = "";
        const int st = api_->run_op(b, &op, msg, sizeof msg);
        release();
        check(st, msg, "run_op");
    }
    std::string device_name() {
        std::lock_guard<std::mutex> lock(mutex_);
        return b_ ? api_->device_name(b_) : "";
    }
    std::vector<ember_mod_device_info> devices() const {
        std::vector<ember_mod_device_info> info(16);
        uint32_t n = 0;
        char msg[kMsgCap] = "";
        check(api_->list_devices(info.data(), 16, &n, msg, sizeof msg), msg, "list_devices");
        if (n > 16) {
            info.resize(n);
            check(api_->list_devices(info.data(), n, &n, msg, sizeof msg), msg, "list_devices");
        }
        info.resize(std::min<size_t>(n, info.size()));
        return info;
    }
    void set_open_params(const ember_mod_open_params &p) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (b_) fail(EMBER_ERR_INVALID_STATE, "the %s device is already open (choose it before the first model is loaded on it)", api_->name);
        open_ = p;
        open_.struct_size = sizeof open_;
        open_set_ = true;
    }
    void select_device(int32_t index) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (b_) {
            if (open_set_ && open_.vk_device)
                fail(EMBER_ERR_INVALID_STATE, "the %s backend runs on the application's own device", api_->name);
            if (index != opened_index_)
                fail(EMBER_ERR_INVALID_STATE, "the %s backend has device %d open (one device per backend and process)",
                     api_->name, opened_index_);
            return;
        }
        if (!open_set_) {
            open_ = ember_mod_open_params{};
            open_.struct_size = sizeof open_;
        }
        open_.device_index = index;
        open_set_ = true;
    }
    // The index of the open device; -1 before one is open or where it is the application's own.
    int32_t open_device() {
        std::lock_guard<std::mutex> lock(mutex_);
        return b_ && !(open_set_ && open_.vk_device) ? opened_index_ : -1;
    }
    const std::string &why() const {
        score();
        return why_;
    }

private:
    // The device, opened on first use. A device of ember's own is kept for the process's life (opening
    // one compiles every pipeline); on an application's device, ember's objects go when the last model
    // using it is freed, so that the application can then destroy its device.
    ember_mod_backend *acquire() {
        std::lock_guard<std::mutex> lock(mutex_);
        ++users_;
        if (b_) return b_;
        ember_mod_open_params p{};
        p.struct_size = sizeof p;
        p.device_index = -1;
        if (open_set_) p = open_;
        else if (const char *env = std::getenv(api_->backend_kind == EMBER_BACKEND_CUDA ? "EMBER_CUDA_DEVICE" : "EMBER_VULKAN_DEVICE");
                 env && env[0])
            p.device_index = std::atoi(env);   // (the CUDA module reads its variable too: the same device)
        // The index of the device opened, for select_device (-1: the best-scoring one, which is the first
        // of the highest score, as the modules choose).
        opened_index_ = p.device_index;
        if (opened_index_ < 0) {
            int best = 0;
            const std::vector<ember_mod_device_info> devs = devices();
            for (size_t i = 0; i < devs.size(); ++i)
                if (devs[i].score > best) best = devs[i].score, opened_index_ = static_cast<int32_t>(i);
        }
        char msg[kMsgCap] = "";
        const int st = api_->open(&p, &b_, msg, sizeof msg);
        if (st != EMBER_OK) --users_, b_ = nullptr;
        check(st, msg, "open");
        return b_;
    }
    void release() {
        std::lock_guard<std::mutex> lock(mutex_);
        if (--users_ == 0 && b_ && open_set_ && open_.vk_device) {
            api_->close(b_);
            b_ = nullptr;
        }
    }

    const ember_backend_module *api_;
    std::mutex mutex_;
    ember_mod_backend *b_ = nullptr;
    uint32_t users_ = 0;            // models (and running test ops) on the device
    ember_mod_open_params open_{};  // set by set_open_params (the public ember_vulkan_set_device)
    int32_t opened_index_ = -1;     // the device b_ is
    bool open_set_ = false;
    mutable std::once_flag probe_once_;
    mutable int score_ = 0;
    mutable std::string why_;
};

} // namespace

std::unique_ptr<Backend> module_backend_create(const LoadedModule &mod) { return std::make_unique<ModuleBackend>(mod); }

void module_run_op(Backend &backend, const ember_mod_op &op) { static_cast<ModuleBackend &>(backend).run_op(op); }
std::string module_device_name(Backend &backend) { return static_cast<ModuleBackend &>(backend).device_name(); }
std::vector<ember_mod_device_info> module_list_devices(Backend &backend) {
    return static_cast<ModuleBackend &>(backend).devices();
}
void module_set_open_params(Backend &backend, const ember_mod_open_params &p) {
    static_cast<ModuleBackend &>(backend).set_open_params(p);
}
void module_select_device(Backend &backend, int32_t index) { static_cast<ModuleBackend &>(backend).select_device(index); }
int32_t module_open_device(Backend &backend) { return static_cast<ModuleBackend &>(backend).open_device(); }
std::string module_unavailable_reason(Backend &backend) { return static_cast<ModuleBackend &>(backend).why(); }

} // namespace ember
