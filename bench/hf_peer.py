#!/usr/bin/env python3
"""bench/hf_peer.py — the peer figures for bench/gpu.sh: Hugging Face transformers + PyTorch on the same
synthetic shapes as ember's runs (random fp16 weights, SDPA attention, static KV cache), on CUDA.

Prints one JSON line: prefill tok/s at 512 and 4096 prompt tokens, greedy decode tok/s (128 tokens
after a 512-token prompt, static cache, the decode step under torch.compile when --compile is given).

usage: hf_peer.py --preset tinyllama|llama3-8b [--compile]
"""
import argparse
import json
import sys
import time

SHAPES = {
    "tinyllama": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                      num_key_value_heads=4, vocab_size=32000, rope_theta=10000.0),
    "llama3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", required=True, choices=sorted(SHAPES))
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    if not torch.cuda.is_available():
        print("hf_peer.py: no CUDA device", file=sys.stderr)
        return 77
    cfg = LlamaConfig(max_position_embeddings=8192, attn_implementation="sdpa", torch_dtype=torch.float16,
                      **SHAPES[args.preset])
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.float16).eval()
    out = {"model": args.preset, "peer": "transformers %s, torch %s" % (transformers.__version__, torch.__version__),
           "device": torch.cuda.get_device_name(0)}

    def sync():
        torch.cuda.synchronize()

    # Only the last position's logits, as ember computes (the keyword changed name in transformers 4.50).
    keep = {}
    for kw in ("logits_to_keep", "num_logits_to_keep"):
        try:
            with torch.inference_mode():
                model(torch.zeros((1, 8), dtype=torch.long, device="cuda"), use_cache=False, **{kw: 1})
            keep = {kw: 1}
            break
        except TypeError:
            pass

    with torch.inference_mode():
        for n in (512, 4096):
            ids = torch.randint(0, cfg.vocab_size, (1, n), device="cuda")
            model(ids, use_cache=False, **keep)  # warm-up
            sync()
            best = 1e30
            for _ in range(3):
                t = time.perf_counter()
                model(ids, use_cache=False, **keep)
                sync()
                best = min(best, time.perf_counter() - t)
            out["prefill_tok_s_%d" % n] = round(n / best, 1)
        ids = torch.randint(0, cfg.vocab_size, (1, 512), device="cuda")
        gen = dict(max_new_tokens=128, min_new_tokens=128, do_sample=False, cache_implementation="static")
        if args.compile:
            model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        model.generate(ids, **gen)  # warm-up (and compilation)
        sync()
        t = time.perf_counter()
        model.generate(ids, **gen)
        sync()
        total = time.perf_counter() - t
        # The generate call includes one 512-token prefill: take it out with the measured rate.
        decode_s = total - 512 / out["prefill_tok_s_512"]
        out["decode_tok_s"] = round(128 / decode_s, 1)
        out["compiled"] = args.compile
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
