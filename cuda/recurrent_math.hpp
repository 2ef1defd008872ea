// recurrent_math.hpp — where SSM_CONV's kernels (recurrent.cu) find each input of a window: a row of the
// pass or an entry of the window the sequence carried in. Plain arithmetic shared with
// tests/test_cuda_host.cpp, which runs the kernels' loops with it on the CPU (in place too) against the
// CPU backend's convolution.
#pragma once

#include "attn_math.hpp"  // EMBER_HD

#include <cstdint>

namespace ember::cu {

// An input of a run whose tokens are rows [t0, t1) of the pass: row `index` of the pass (row true), or entry
// `index` of the carried window of K - 1 inputs (oldest first) the run started from.
struct ConvInput {
    bool row;
    int64_t index;
};

// Input j (< K) of token t's window: the input of token t - (K - 1) + j of its sequence.
EMBER_HD ConvInput conv_input(int64_t t, int j, int64_t t0, int K) {
    const int64_t at = t - (K - 1) + j;
    return at >= t0 ? ConvInput{true, at} : ConvInput{false, at - t0 + (K - 1)};
}

// Entry j (< K - 1) of the window after the run's last token: the input of token t1 - (K - 1) + j. From the
// old window it is entry j + (t1 - t0), past j: written in ascending j, a window updated in place reads
// each old entry before it is overwritten.
EMBER_HD ConvInput conv_window_after(int64_t j, int64_t t0, int64_t t1, int K) {
    const int64_t at = t1 - (K - 1) + j;
    return at >= t0 ? ConvInput{true, at} : ConvInput{false, j + (t1 - t0)};
}

} // namespace ember::cu
