#!/usr/bin/env python3
"""The eager elementwise parts of a decoder layer, one by one, as scripts/peer_framework_runs.py
runs them under autocast (bf16 over fp32 parameters, the fp32 residual stream): the GPU time of
each part's forward and backward, so the bytes factors of the `pytorch` profile's elementwise
roles (presets/frameworks/pytorch.json: norm, rope, ffn_act, residual, and the copy of the
attention output before the output projection) can be set from the kernels themselves rather
than counted from the code. PyTorch is the measuring peer here, never a trainsim dependency.

Parts (the reference code's ops, at a model's shapes, micro-batch x seq tokens):
  norm      LlamaRMSNorm on the fp32 residual (upcast, pow, mean, rsqrt, mul, weight mul)
  rope      q and k (bf16 projections viewed [b, h, t, d]): x cos + rotate_half(x) sin
  out_copy  the attention output [b, h, t, d] transposed and made contiguous [b, t, h d]
  ffn_act   silu(gate) * up, bf16 [b, t, ffn]
  residual  fp32 residual + bf16 branch output
Each part is timed alone (its kernels' durations from torch.profiler, per call), its backward as torch.autograd.grad of
the part's output with a fixed upstream gradient (fwd + bwd less fwd). One JSON line per
(model, batch, seq): {"model", "batch", "seq_len", "parts": {PART: {"fwd_s", "bwd_s"}}}.

  python3 scripts/peer_role_parts.py --configs cs336-large:2:2048,llama3.2-1b:2:2048 --out parts.jsonl
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def timed(fn, warmup, iters):
    """GPU time of fn's kernels, per call: the kernels' own durations summed by torch.profiler
    (not an event span: these parts are short kernels behind a host that issues them slower
    than the GPU runs them, so a span would time the host)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    total_us = 0.0
    for e in prof.events():  # as scripts/peer_kernel_profile.py sums a step's kernels
        if e.device_type.name != "CUDA":
            continue
        total_us += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
    return total_us * 1e-6 / iters


def measure(model, b, t, warmup, iters):
    import torch
    import torch.nn.functional as F
    from peer_framework_runs import load_config
    cfg = load_config(model)
    d, h, kv, hd, f = (cfg["hidden_size"], cfg["num_heads"], cfg["num_kv_heads"], cfg["head_dim"],
                       cfg["ffn_hidden_size"])
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)

    def rnd(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape, device=dev, dtype=dtype, generator=g)

    weight = torch.ones(d, device=dev, requires_grad=True)

    def norm(x):  # LlamaRMSNorm as the peer writes it
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + 1e-5)
        return weight * x.to(dtype)

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    pos = torch.arange(t, device=dev, dtype=torch.float32)
    inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
    emb = torch.cat((torch.outer(pos, inv),) * 2, dim=-1)
    cos, sin = emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)

    def rope(qp, kp):  # the projections' outputs [b, t, h*hd] viewed and transposed
        q = qp.view(b, t, h, hd).transpose(1, 2)
        k = kp.view(b, t, kv, hd).transpose(1, 2)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def out_copy(o):
        return o.transpose(1, 2).reshape(b, t, -1)

    def ffn_act(gate, up):
        return F.silu(gate) * up

    def residual(x, y):
        return x + y

    parts = {
        "norm": (norm, [rnd(b, t, d, dtype=torch.float32)]),
        "rope": (rope, [rnd(b, t, h * hd), rnd(b, t, kv * hd)]),
        "out_copy": (out_copy, [rnd(b, h, t, hd)]),
        "ffn_act": (ffn_act, [rnd(b, t, f), rnd(b, t, f)]),
        "residual": (residual, [rnd(b, t, d, dtype=torch.float32), rnd(b, t, d)]),
    }
    out = {}
    for name, (fn, inputs) in parts.items():
        inputs = [x.requires_grad_() for x in inputs]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            fwd = timed(lambda: fn(*inputs), warmup, iters)
            res = fn(*inputs)
        res = res if isinstance(res, tuple) else (res,)
        grads = [torch.randn_like(r) for r in res]
        leaves = inputs + ([weight] if name == "norm" else [])

        def fwd_bwd():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                r = fn(*inputs)
            r = r if isinstance(r, tuple) else (r,)
            torch.autograd.grad(r, leaves, grads)

        both = timed(fwd_bwd, warmup, iters)
        out[name] = {"fwd_s": fwd, "bwd_s": max(both - fwd, 0.0)}
    return {"model": model, "batch": b, "seq_len": t, "parts": out,
            "versions": {"torch": torch.__version__, "gpu_name": torch.cuda.get_device_name()}}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="cs336-large:2:2048,llama3.2-1b:2:2048,cs336-xl:4:512")
    ap.add_argument("--out", required=True)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=30)
    a = ap.parse_args(argv)
    with open(a.out, "a") as f:
        for c in a.configs.split(","):
            model, b, t = c.split(":")
            row = measure(model, int(b), int(t), a.warmup, a.iters)
            f.write(json.dumps(row) + "\n")
            print(model, b, t, {k: {p: round(v * 1e6, 1) for p, v in x.items()}
                                for k, x in row["parts"].items()}, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
