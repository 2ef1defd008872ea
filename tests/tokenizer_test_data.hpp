// tokenizer_test_data.hpp — reading llama.cpp's tokenizer test layout (texts separated by a marker line,
// one line of ids per text) and printing texts and ids in failure messages. Shared by test_tokenizer and
// test_tokenizer_pre.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tokenizer_test {

inline std::string read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Texts separated by "\n__ggml_vocab_test__\n", which also ends the file (llama.cpp's .inp files).
inline std::vector<std::string> read_texts(const std::string &path) {
    const std::string all = read_file(path);
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t pos; (pos = all.find(sep, start)) != std::string::npos; start = pos + sep.size())
        out.push_back(all.substr(start, pos - start));
    if (start < all.size()) out.push_back(all.substr(start));
    return out;
}

// The ids on one line.
inline std::vector<int32_t> parse_ids(const std::string &line) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (int32_t id; ls >> id;) ids.push_back(id);
    return ids;
}

// Control characters escaped, for messages.
inline std::string escaped(const std::string &s) {
    std::string out;
    for (unsigned char c : s) {
        char buf[8];
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c < 0x20) { std::snprintf(buf, sizeof buf, "\\x%02X", c); out += buf; }
        else out += char(c);
    }
    return out;
}

inline std::string ids_str(const std::vector<int32_t> &ids) {
    std::string s;
    for (int32_t id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
    return s;
}

} // namespace tokenizer_test
