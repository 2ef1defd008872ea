// state_runs.glsl — the sequence runs of a pass with recurrent state (graph.h's SSM_CONV, GATED_DELTA,
// SSM_SCAN): the host writes 5 ints per run to io (vk_model.cpp's fill_io): its first token and one past its
// last (a run's tokens are consecutive, in position order), the state slot it writes, the slot its first
// token reads (-1: zeros, the slot itself: in place, another: a copy of that one's state, unchanged by the
// pass), and where its tokens' kept-state slots are (module_api.h's state_keep: an int per token of the
// run, -1 for none, at that many ints after runs_off; -1: the run keeps none).
struct StateRun { uint t0, t1; uint dst; int src; int keep; };
StateRun state_run(uint runs_off, uint r) {
    uint at = runs_off + 5u * r;
    return StateRun(uint(io_i[at]), uint(io_i[at + 1u]), uint(io_i[at + 2u]), io_i[at + 3u], io_i[at + 4u]);
}
// The slot that keeps the state after token t of run r (-1: none).
int kept_slot(uint runs_off, StateRun r, uint t) { return r.keep < 0 ? -1 : io_i[runs_off + uint(r.keep) + t - r.t0]; }
