// arch_gemma3.cpp — Gemma 3 (text): Gemma 2's decoder without the softcaps, with a per-head RMSNorm of q
// and k (as Qwen3's), and five sliding-window layers to every global one unless
// attention.sliding_window_pattern says otherwise (a period, or one flag per layer); a file without
// attention.sliding_window (the converter omits it when every layer is global) has no window layers. The
// window layers rope with base 10000 unscaled, the global ones with rope.freq_base and the file's scaling
// (linear 8 at 4B+).
#include "model/arch.hpp"

namespace ember {

DecoderOptions gemma_decoder_options(ArchBuilder &b, uint32_t layers_of_27b);  // arch_gemma2.cpp

// Found by arch.cpp through the list CMake writes from the arch_*.cpp files (arch_list.inc).
extern const ArchSpec arch_spec_gemma3 = {"gemma3", [](ArchBuilder &b) {
                                  DecoderOptions o = gemma_decoder_options(b, 62);
                                  o.after_qkv = qk_norm_per_head;
                                  o.final_softcap = b.f32("final_logit_softcapping", 0.0f);
                                  o.window = b.u32("attention.sliding_window", 0u);
                                  read_window_pattern(b, o, 6);
                                  o.window_theta = 10000.0f;
                                  build_decoder(b, o);
                              }};
} // namespace ember
