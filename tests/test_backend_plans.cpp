// test_backend_plans.cpp — the plans the GPU backends make of the model families' programs, pinned: for
// llama, a mixture of experts (qwen3moe), a hybrid of recurrent and attention layers (qwen35), sliding
// windows with alternating rope bases (gemma3) and YaRN with sinks (gpt-oss), each with F32 matrices and
// with the Q4_K_M mix, the CUDA program (cuda/program.cpp: which products accumulate into the residual,
// which share their prepared input, which ropes fill the angle table) and the Vulkan program
// (vulkan/vk_program.cpp, where the Vulkan headers are present: its steps, folded runs, quantized inputs,
// rope tables and the buffers given memory) are written as text and compared with
// tests/data/backend_plans/<family>-<types>.txt.
//
// What the device runs follows these plans blindly, so a change in them is a change on every GPU: when an
// architecture's program changes on purpose, rerun with EMBER_WRITE_PLANS=1 (the files are rewritten in
// the source tree) and read the diff.
#include "synthetic_model.hpp"
#include "test_util.h"

#include "../cuda/program.hpp"
#if EMBER_TEST_VULKAN_PLAN
#include "../vulkan/vk_program.hpp"
#endif
#include "model/model.hpp"
#include "testing/synthetic.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

using namespace ember;

namespace {

// The CUDA plan: the nodes whose NodeRun says anything.
std::string cuda_plan(const ember_mod_model_desc &d) {
    const cu::Program pg = cu::program_of(d);
    std::ostringstream o;
    o << "# cuda: " << pg.nodes.size() << " nodes\n";
    for (size_t i = 0; i < pg.nodes.size(); ++i) {
        const cu::NodeRun &h = pg.how[i];
        if (!h.share_input && !h.accumulate && !h.skip && !h.new_angles) continue;
        o << i << ' ' << ember_graph_op_name(pg.nodes[i].op) << (h.share_input ? " share_input" : "")
          << (h.accumulate ? " accumulate" : "") << (h.skip ? " skip" : "") << (h.new_angles ? " new_angles" : "") << '\n';
    }
    return o.str();
}

#if EMBER_TEST_VULKAN_PLAN
// The Vulkan plan: every step (a node, or a folded run recorded as one) and the buffers given no memory.
std::string vulkan_plan(const ember_mod_model_desc &d) {
    const vk::Program p = vk::plan_program(d);
    std::ostringstream o;
    o << "# vulkan: " << p.nodes.size() << " nodes, " << p.steps.size() << " steps, " << p.ropes.size()
      << " rope tables, quantized widths " << p.quant_width[0] << ' ' << p.quant_width[1] << '\n';
    for (const vk::Step &s : p.steps) {
        const ember_graph_node &n = p.nodes[s.node];
        o << s.node << ' ' << ember_graph_op_name(n.op) << " layer " << s.layer << " src " << s.src << " dst " << s.dst
          << (s.quantize ? " quantize" : "") << (s.accumulate ? " accumulate" : "") << (s.gathered ? " gathered" : "");
        if (n.op == EMBER_GRAPH_ROPE || n.op == EMBER_GRAPH_ROPE_YARN) o << " rope " << s.rope;
        o << '\n';
    }
    o << "unused buffers:";
    for (size_t b = 0; b < p.buf_used.size(); ++b)
        if (!p.buf_used[b]) o << ' ' << b;
    o << '\n';
    return o.str();
}
#endif

std::string read_file(const std::string &path) {
    std::ifstream f(path);
    if (!f) return {};
    std::ostringstream o;
    o << f.rdbuf();
    return o.str();
}

// Compares `plan` with the section of the pinned file that starts with its first line (a section runs to
// the next line starting with "# cuda" or "# vulkan"), line by line, naming the first difference.
void expect_section(const std::string &pinned, const std::string &plan, const std::string &name) {
    const std::string head = plan.substr(0, plan.find(' ', 2));  // "# cuda:" / "# vulkan:"
    const size_t at = pinned.find(head);
    if (at == std::string::npos) fail_msg("%s: no '%s' section", name.c_str(), head.c_str());
    size_t end = pinned.find("\n# ", at);
    end = end == std::string::npos ? pinned.size() : end + 1;
    std::istringstream want(pinned.substr(at, end - at)), got(plan);
    std::string w, g;
    for (int line = 1;; ++line) {
        const bool hw = static_cast<bool>(std::getline(want, w)), hg = static_cast<bool>(std::getline(got, g));
        if (!hw && !hg) return;
        if (hw != hg || w != g)
            fail_msg("%s, %s line %d: pinned '%s', planned '%s' (EMBER_WRITE_PLANS=1 rewrites the file)", name.c_str(),
                     head.c_str(), line, hw ? w.c_str() : "(end)", hg ? g.c_str() : "(end)");
    }
}

void check_family(const char *family, bool quantized) {
    SyntheticSpec s = synthetic_family(family);
    if (quantized) s.mix = WeightMix::Q4_K_M;
    auto m = load_synthetic(s);
    const ember_mod_model_desc &d = m->desc().c;
    std::string plan = cuda_plan(d);
#if EMBER_TEST_VULKAN_PLAN
    plan += vulkan_plan(d);
#endif
    const char *src = std::getenv("EMBER_SOURCE_DIR");
    if (!src) fail_msg("EMBER_SOURCE_DIR is not set (ctest sets it)");
    const std::string name = std::string(family) + (quantized ? "-q4_k_m" : "-f32");
    const std::string path = std::string(src) + "/tests/data/backend_plans/" + name + ".txt";
    if (const char *w = std::getenv("EMBER_WRITE_PLANS"); w && w[0] == '1') {
        std::ofstream(path) << plan;
        std::printf("wrote %s\n", path.c_str());
        return;
    }
    const std::string pinned = read_file(path);
    if (pinned.empty()) fail_msg("%s: no pinned plan at %s", name.c_str(), path.c_str());
    expect_section(pinned, cuda_plan(d), name);
#if EMBER_TEST_VULKAN_PLAN
    expect_section(pinned, vulkan_plan(d), name);
#endif
}

void test_llama(void **) { check_family("llama", false), check_family("llama", true); }
void test_qwen3moe(void **) { check_family("qwen3moe", false), check_family("qwen3moe", true); }
void test_qwen35(void **) { check_family("qwen35", false), check_family("qwen35", true); }
void test_gemma3(void **) { check_family("gemma3", false), check_family("gemma3", true); }
void test_gpt_oss(void **) { check_family("gpt-oss", false), check_family("gpt-oss", true); }

} // namespace

int main() {
#if !EMBER_TEST_VULKAN_PLAN
    std::printf("the Vulkan headers are absent: the CUDA plans only\n");
#endif
    const CMUnitTest tests[] = {cmocka_unit_test(test_llama), cmocka_unit_test(test_qwen3moe), cmocka_unit_test(test_qwen35),
                                cmocka_unit_test(test_gemma3), cmocka_unit_test(test_gpt_oss)};
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
