#include "abi/boundary.hpp"

namespace ember::abi {

std::string &last_error() {
    thread_local std::string msg;
    return msg;
}

ember_status set_error(ember_status status, const std::string &message) {
    try {
        last_error() = message;
    } catch (...) {
        // Out of memory while storing the message: the status still tells what happened.
    }
    return status;
}

} // namespace ember::abi
