// gguf_format.hpp — metadata values as text (ember info, ember_model_meta_string).
#pragma once

#include "gguf/gguf.hpp"

#include <string>

namespace ember::gguf {

// Numbers in decimal, booleans as true/false, strings as they are, arrays as "[a, b, ...]" with at most
// max_elems elements shown followed by "... (N total)".
std::string value_to_string(const Value &v, size_t max_elems = 16);

} // namespace ember::gguf
