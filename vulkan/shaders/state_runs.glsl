// state_runs.glsl — the sequence runs of a pass with recurrent state (graph.h's SSM_CONV, GATED_DELTA): the
// host writes 4 ints per run to io (vk_model.cpp's fill_io): its first token and one past its last (a run's
// tokens are consecutive, in position order), the state slot it writes, and the slot its first token
// reads (-1: zeros, the slot itself: in place, another: a copy of that one's state, unchanged by the pass).
struct StateRun { uint t0, t1; uint dst; int src; };
StateRun state_run(uint runs_off, uint r) {
    uint at = runs_off + 4u * r;
    return StateRun(uint(io_i[at]), uint(io_i[at + 1u]), uint(io_i[at + 2u]), io_i[at + 3u]);
}
