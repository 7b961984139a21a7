#!/usr/bin/env python3
"""PyTorch measuring peer for attention (run on the device machine only; PyTorch is never a
trainsim dependency): times torch.nn.functional.scaled_dot_product_attention forward and backward
on the perf-suite shapes ([batch, heads, seq, head_dim], bf16), with CUDA events, warm-up and the
median of many samples, so docs/kernels.md can report our FlashAttention-2 as a ratio to it.
Writes JSON to --output (default stdout) and a short table to stderr."""
import argparse
import contextlib
import json
import statistics
import sys

import torch
import torch.nn.functional as F


def time_cuda(fn, warmup=5, samples=30):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    return {"median_s": statistics.median(times), "min_s": min(times),
            "mean_s": statistics.fmean(times), "stdev_s": statistics.stdev(times),
            "samples": len(times)}


def backends():
    from torch.nn.attention import SDPBackend
    return {"default": None, "flash": SDPBackend.FLASH_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", default="-")
    ap.add_argument("--grid", action="store_true",
                    help="causal shapes of training steps instead of the perf-suite shapes: head dim "
                         "64 (16 heads) and 128 (32 heads), seq 1024..32768, batch x seq = 16384 tokens")
    args = ap.parse_args()
    from torch.nn.attention import sdpa_kernel
    dev = torch.device("cuda")
    results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "cuda": torch.version.cuda, "measurements": []}
    shapes = [(2, 16, 4096, 128, False), (2, 16, 4096, 128, True), (2, 16, 4096, 64, False)]
    if args.grid:
        shapes = [(max(1, 16384 // s), h, s, d, True) for (h, d) in ((16, 64), (32, 128))
                  for s in (1024, 2048, 4096, 8192, 16384, 32768)]
    for (b, h, s, d, causal) in shapes:
        gen = torch.Generator(device=dev).manual_seed(1)
        q, k, v = (torch.empty(b, h, s, d, device=dev, dtype=torch.bfloat16).uniform_(
            -2 if i < 2 else -1, 2 if i < 2 else 1, generator=gen).requires_grad_() for i in range(3))
        dout = torch.empty_like(q).uniform_(-1, 1, generator=gen)
        fwd_flops = 4.0 * b * h * s * s * d * (0.5 if causal else 1.0)
        for name, backend in backends().items():
            try:
                ctx = sdpa_kernel(backend) if backend is not None else contextlib.nullcontext()
                with ctx:
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    fwd = time_cuda(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                    bwd = time_cuda(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
            except Exception as e:  # backend not available for this shape
                print(f"# {name} b{b} h{h} s{s} d{d} causal={causal}: unavailable ({e})".replace("\n", " "),
                      file=sys.stderr)
                continue
            for direction, t, flops in (("fwd", fwd, fwd_flops), ("bwd", bwd, 2.5 * fwd_flops)):
                m = {"name": f"sdpa.{name}.{direction}.bf16.b{b}.h{h}.s{s}.d{d}" + (".causal" if causal else ""),
                     "backend": name, "direction": direction, "batch_size": b, "num_heads": h,
                     "seq_len": s, "head_dim": d, "causal": causal, "flops": flops, **t}
                results["measurements"].append(m)
                print(f"{m['name']:<55} {t['median_s']*1e6:10.1f} us {flops / t['median_s'] / 1e12:8.1f} TFLOP/s",
                      file=sys.stderr)
    text = json.dumps(results, indent=2)
    if args.output == "-":
        print(text)
    else:
        with open(args.output, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
