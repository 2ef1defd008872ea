// api_common.cpp — versions, statuses, the thread-local error message and process-wide logging.
#include "abi/boundary.hpp"

#include "core/log.hpp"

extern "C" {

const char *ember_version(void) { return EMBER_VERSION_STRING; }

uint32_t ember_abi_version(void) { return EMBER_ABI_VERSION; }

const char *ember_status_string(ember_status status) {
    switch (status) {
    case EMBER_OK: return "EMBER_OK";
    case EMBER_END_OF_GENERATION: return "EMBER_END_OF_GENERATION";
    case EMBER_STOPPED: return "EMBER_STOPPED";
    case EMBER_ERR_INVALID_ARGUMENT: return "EMBER_ERR_INVALID_ARGUMENT";
    case EMBER_ERR_OUT_OF_MEMORY: return "EMBER_ERR_OUT_OF_MEMORY";
    case EMBER_ERR_IO: return "EMBER_ERR_IO";
    case EMBER_ERR_INVALID_MODEL: return "EMBER_ERR_INVALID_MODEL";
    case EMBER_ERR_UNSUPPORTED: return "EMBER_ERR_UNSUPPORTED";
    case EMBER_ERR_CANCELLED: return "EMBER_ERR_CANCELLED";
    case EMBER_ERR_CONTEXT_FULL: return "EMBER_ERR_CONTEXT_FULL";
    case EMBER_ERR_BUFFER_TOO_SMALL: return "EMBER_ERR_BUFFER_TOO_SMALL";
    case EMBER_ERR_NOT_FOUND: return "EMBER_ERR_NOT_FOUND";
    case EMBER_ERR_TYPE_MISMATCH: return "EMBER_ERR_TYPE_MISMATCH";
    case EMBER_ERR_BACKEND: return "EMBER_ERR_BACKEND";
    case EMBER_ERR_INVALID_STATE: return "EMBER_ERR_INVALID_STATE";
    case EMBER_ERR_CORRUPT_DATA: return "EMBER_ERR_CORRUPT_DATA";
    case EMBER_ERR_GRAMMAR_DEAD_END: return "EMBER_ERR_GRAMMAR_DEAD_END";
    case EMBER_ERR_INTERNAL: return "EMBER_ERR_INTERNAL";
    }
    return "unknown status";
}

const char *ember_last_error(void) { return ember::abi::last_error().c_str(); }

void ember_log_set(ember_log_fn fn, void *user_data, ember_log_level min_level) {
    ember::log_set_global(fn, user_data, min_level);
}

} // extern "C"
