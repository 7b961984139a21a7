#!/usr/bin/env python3
"""Naive attention and SDPA, part by part, as scripts/peer_framework_runs.py runs them (the
Hugging Face-style eager attention: scores = q k^T / sqrt(d) + causal mask, softmax in fp32,
cast back, P V; or F.scaled_dot_product_attention): the GPU time of each part's forward and
backward, so the bytes factors of the `pytorch` profile's attention roles
(presets/frameworks/pytorch.json: attention_scores, attention_softmax, attention_pv,
attention_core) come from a measurement of the kernels themselves rather than from whole
training steps. PyTorch is the measuring peer here, never a trainsim dependency.

Each part is timed alone with CUDA events (median of --iters after --warmup), its backward as
torch.autograd.grad of the part's output with a fixed upstream gradient. Output: one JSON line
per (precision, shape): {"precision", "batch", "heads", "seq_len", "head_dim", "scores": N,
"parts": {PART: {"fwd_s", "bwd_s"}}}, N = batch x heads x seq_len^2.

  python3 scripts/peer_attention_parts.py --shapes 4x16x1024x64,1x16x4096x64 --out parts.jsonl
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def timed(fn, warmup, iters):
    from peer_sdpa import time_cuda  # noqa: E402 (CUDA-event median, as the SDPA peer times)
    return time_cuda(fn, warmup, iters)["median_s"]


def measure(precision, b, h, s, d, warmup, iters):
    import torch
    import torch.nn.functional as F
    dev = torch.device("cuda")
    dt = torch.bfloat16 if precision == "bf16-mixed" else torch.float32
    g = torch.Generator(device=dev).manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device=dev, dtype=dt, generator=g).requires_grad_()
               for _ in range(3))
    mask = torch.full((s, s), float("-inf"), device=dev).triu(1)

    def scores(q, k):
        x = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d)
        return x + torch.full((s, s), float("-inf"), device=dev).triu(1).to(x.dtype)

    def softmax(x):
        return F.softmax(x, dim=-1, dtype=torch.float32).to(dt)

    def pv(p, v):
        return torch.matmul(p, v)

    def sdpa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    with torch.no_grad():
        s0 = (torch.matmul(q, k.transpose(2, 3)) / math.sqrt(d) + mask.to(dt))
        p0 = F.softmax(s0, dim=-1, dtype=torch.float32).to(dt)
    s_in = s0.clone().requires_grad_()
    p_in = p0.clone().requires_grad_()
    parts = {}

    def part(name, fwd, inputs):
        out = fwd(*inputs)
        grad = torch.randn_like(out)
        f = timed(lambda: fwd(*inputs), warmup, iters)

        def bwd():
            o = fwd(*inputs)
            torch.autograd.grad(o, inputs, grad)
        # the backward alone: forward + backward, less the forward
        parts[name] = {"fwd_s": f, "bwd_s": max(timed(bwd, warmup, iters) - f, 0.0)}
        del out, grad

    part("scores", scores, (q, k))
    part("softmax", softmax, (s_in,))
    part("pv", pv, (p_in, v))
    del s0, p0, s_in, p_in
    torch.cuda.empty_cache()
    part("sdpa", sdpa, (q, k, v))
    return {"precision": precision, "batch": b, "heads": h, "seq_len": s, "head_dim": d,
            "scores": b * h * s * s, "parts": parts,
            "versions": {"torch": torch.__version__, "gpu_name": torch.cuda.get_device_name()}}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="4x16x1024x64",
                    help="comma-separated BATCHxHEADSxSEQxHEAD_DIM")
    ap.add_argument("--precisions", default="bf16-mixed,fp32")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", help="append JSON lines here (default: stdout)")
    a = ap.parse_args(argv)
    for prec in a.precisions.split(","):
        for shape in a.shapes.split(","):
            b, h, s, d = (int(x) for x in shape.split("x"))
            row = measure(prec, b, h, s, d, a.warmup, a.iters)
            line = json.dumps(row)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(line + "\n")
            else:
                print(line)
            n = row["scores"]
            print(f"{prec} {shape}: " + ", ".join(
                f"{k} {v['fwd_s'] / n * 1e12:.2f}/{v['bwd_s'] / n * 1e12:.2f} ps/score"
                for k, v in row["parts"].items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
