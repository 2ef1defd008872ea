// module_loader.hpp — backend modules (libember-<name>.so) loaded at run time behind the Backend
// interface. The C boundary is module_api.h; this side turns its status codes into ember::Error.
#pragma once

#include "backend/backend.hpp"
#include "backend/module_api.h"

#include <memory>
#include <string>
#include <vector>

namespace ember {

// The folder the modules are looked for in: $EMBER_BACKEND_DIR if set, else the folder libember
// itself was loaded from (dladdr), else "" (the dynamic linker's search path).
std::string backend_module_dir();

// A module's table: loaded (dlopen) and never unloaded, since objects it made may outlive any owner, or
// built in (the CPU backend, path "built in").
struct LoadedModule {
    const ember_backend_module *api = nullptr;
    std::string path;
};

// Loads libember-<name>.so from backend_module_dir(); on failure returns nullptr and sets *why.
const LoadedModule *backend_module_load(const char *name, std::string *why);

// The module's backend as a Backend. Opening the device is deferred to the first load_model(); score()
// lists the devices (0 when there are none or the module's API is missing; `why()` then says why).
std::unique_ptr<Backend> module_backend_create(const LoadedModule &mod);

// Tests (test_parity): runs one op on the module's default device; throws ember::Error on failure.
void module_run_op(Backend &backend, const ember_mod_op &op);
// The opened device's description, or "" before a model was loaded on it.
std::string module_device_name(Backend &backend);
// The module's devices (throws EMBER_ERR_UNSUPPORTED with the reason when it has none or no loader).
std::vector<ember_mod_device_info> module_list_devices(Backend &backend);
// What the device will be opened with; EMBER_ERR_INVALID_STATE once it is open.
void module_set_open_params(Backend &backend, const ember_mod_open_params &p);
// Makes device `index` the one the module opens: before it is open, as module_set_open_params with that
// index; once open, fine if it is that device, else EMBER_ERR_INVALID_STATE naming the open one.
void module_select_device(Backend &backend, int32_t index);
// The index of the device the backend has open (in module_list_devices' order); -1 before one is open,
// or where the backend runs on the application's own device (ember_vulkan_set_device's handles).
int32_t module_open_device(Backend &backend);
// Why a module backend scores 0 ("" when it does not).
std::string module_unavailable_reason(Backend &backend);

ember_mod_context_params module_context_params(const ContextParams &p);

} // namespace ember
