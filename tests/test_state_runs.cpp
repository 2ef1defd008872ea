// test_state_runs.cpp — a batch's tokens grouped into one run per recurrent-state slot
// (backend/state_runs.hpp), the grouping the CPU, Vulkan and CUDA backends run their stateful ops by: the
// runs of a batch of three sequences (a new one, one going on in place, a fork), and every batch the
// backends refuse, named.
#include "test_util.h"

#include "backend/state_runs.hpp"

#include <cstring>
#include <vector>

using namespace ember;

namespace {

struct Batch {
    std::vector<int32_t> slots, src, pos;
    ember_mod_batch b{};
    const ember_mod_batch &get() {
        b.struct_size = sizeof b;
        b.n_tokens = static_cast<uint32_t>(slots.size()), b.pos = pos.data();
        b.state_slots = slots.data(), b.state_src = src.data();
        return b;
    }
};

void expect_refused(Batch &bt, uint32_t n_slots, const char *text) {
    try {
        slot_runs(bt.get(), n_slots, "test forward");
        fail_msg("accepted; expected '%s'", text);
    } catch (const Error &e) {
        if (e.status() != EMBER_ERR_INTERNAL || !std::strstr(e.what(), text) || !std::strstr(e.what(), "test forward: "))
            fail_msg("status %d '%s'; expected '%s'", e.status(), e.what(), text);
    }
}

void test_runs(void **) {
    // Slot 5: a new sequence's three tokens; slot 1 going on in place; slot 2 forked from slot 0.
    Batch bt{{5, 5, 5, 1, 2, 2}, {-1, -1, -1, 1, 0, 0}, {0, 1, 2, 9, 4, 5}};
    const std::vector<SlotRun> runs = slot_runs(bt.get(), 6, "test forward");
    assert_int_equal(runs.size(), 3);
    const uint32_t t0[3] = {0, 3, 4}, t1[3] = {3, 4, 6};
    const int32_t slot[3] = {5, 1, 2}, from[3] = {-1, 1, 0};
    for (size_t r = 0; r < 3; ++r) {
        assert_int_equal(runs[r].t0, t0[r]);
        assert_int_equal(runs[r].t1, t1[r]);
        assert_int_equal(runs[r].slot, slot[r]);
        assert_int_equal(runs[r].from, from[r]);
    }
    // The later tokens' state_src is not read: their state follows from the run's first token.
    bt.src[1] = 4;
    assert_int_equal(slot_runs(bt.get(), 6, "test forward").size(), 3);
}

void test_refusals(void **) {
    Batch base{{5, 5, 5, 1, 2, 2}, {-1, -1, -1, 1, 0, 0}, {0, 1, 2, 9, 4, 5}};
    {
        Batch bt = base;
        bt.slots[3] = 6;
        expect_refused(bt, 6, "state slot 6 of 6");
    }
    {
        Batch bt = base;
        bt.src[3] = -2;
        expect_refused(bt, 6, "state slot -2 of 6");
    }
    {
        Batch bt = base;  // slot 5's tokens at positions 0-2, then one at 9
        bt.slots[3] = 5;
        expect_refused(bt, 6, "out of order");
    }
    {
        Batch bt = base;  // slot 5 again after slot 1's token
        bt.slots[4] = 5;
        expect_refused(bt, 6, "not consecutive");
    }
    {
        Batch bt = base;  // a fork of slot 1, which this pass writes
        bt.src[4] = 1;
        expect_refused(bt, 6, "reads a state slot the same pass writes");
    }
    {
        Batch bt = base;  // no state arrays, or a batch struct from before them
        bt.get();
        bt.b.state_src = nullptr;
        try {
            slot_runs(bt.b, 6, "test forward");
            fail_msg("a batch without state_src accepted");
        } catch (const Error &e) {
            assert_non_null(std::strstr(e.what(), "needs the batch's state slots"));
        }
        bt.get();
        bt.b.struct_size = offsetof(ember_mod_batch, state_src);
        try {
            slot_runs(bt.b, 6, "test forward");
            fail_msg("an older batch accepted");
        } catch (const Error &e) {
            assert_non_null(std::strstr(e.what(), "needs the batch's state slots"));
        }
    }
}

} // namespace

int main() {
    const CMUnitTest tests[] = {cmocka_unit_test(test_runs), cmocka_unit_test(test_refusals)};
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}
