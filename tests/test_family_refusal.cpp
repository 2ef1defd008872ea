// test_family_refusal.cpp — a backend that has not implemented an op of the model families refuses the
// model with EMBER_ERR_UNSUPPORTED naming the op, never runs it wrong. Checked for the program reader
// every backend starts with (backend/program_read.hpp, default op list: graph.h's first nine, what a
// backend that lists no ops of its own is held to), on every synthetic family whose program uses a new
// op. The CPU, which runs them all, loads each; so does the CUDA module's program check (cuda/program.cpp,
// compiled here without CUDA), which lists every op since the families' ops were implemented there.
#include "synthetic_model.hpp"
#include "test_util.h"

#include "../cuda/program.hpp"
#include "backend/program_read.hpp"
#include "core/error.hpp"
#include "model/model.hpp"
#include "testing/synthetic.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

using namespace ember;

namespace {

// The first op of the program that is not among graph.h's first nine, or nullptr.
const char *first_new_op(const ModelDesc &d) {
    for (const ember_graph_node &n : d.nodes)
        if (std::find(std::begin(kGraphOpsFirst), std::end(kGraphOpsFirst), n.op) == std::end(kGraphOpsFirst))
            return ember_graph_op_name(n.op);
    return nullptr;
}

void test_new_ops_are_refused_by_name(void **) {
    int checked = 0;
    for (const std::string &family : synthetic_families()) {
        auto model = load_synthetic(synthetic_family(family));  // the CPU backend takes every op (Model::load builds the program)
        const ModelDesc &d = model->desc();
        const char *op = first_new_op(d);
        if (!op) continue;  // llama, qwen2, qwen3: graph.h's first ops only
        ++checked;
        try {
            read_program(d.c, "gpu");
            fail_msg("program_read's default list accepted a %s program with op %s", family.c_str(), op);
        } catch (const Error &e) {
            if (e.status() != EMBER_ERR_UNSUPPORTED || !std::strstr(e.what(), op))
                fail_msg("program_read on %s: status %d '%s'; expected UNSUPPORTED naming %s", family.c_str(), e.status(),
                         e.what(), op);
        }
        cu::program_of(d.c);  // throws (failing the test) if the CUDA module refused it
    }
    // mixtral, qwen3moe, gemma2, gemma3, phi3 (rope_yarn), granite (scale), gpt-oss; olmo2 needs no new op.
    assert_true(checked >= 7);
}

} // namespace

int main() {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_new_ops_are_refused_by_name)};
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
