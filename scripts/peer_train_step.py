#!/usr/bin/env python3
"""PyTorch eager peer of `trainsim train-step`: the same CS336 Transformer LM (token embedding,
RoPE, pre-norm RMSNorm, causal MHA, SwiGLU, final RMSNorm, untied LM head, cross-entropy) and
AdamW, timed with CUDA events per phase (forward, backward, optimizer, step; median over steps)
and peak memory from torch.cuda.max_memory_allocated. Runs on the device only; never a trainsim
dependency. Prints one JSON object (and writes it to --output when given).

  python3 scripts/peer_train_step.py --model cs336-small --batch 4 --seq-len 512 \
      --precision bf16-mixed --attention flash --recompute none --steps 10 --warmup 5
"""
import argparse
import json
import math
import os
import statistics
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

HERE = os.path.dirname(os.path.abspath(__file__))


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rope(x, cos, sin):  # x [b, h, t, d], pairs (2i, 2i+1); stays in x's dtype
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, d, h, f, attention):
        super().__init__()
        self.h, self.attention = h, attention
        self.ln1, self.ln2 = RMSNorm(d), RMSNorm(d)
        self.wqkv = nn.Linear(d, 3 * d, bias=False)
        self.wo = nn.Linear(d, d, bias=False)
        self.w13 = nn.Linear(d, 2 * f, bias=False)
        self.w2 = nn.Linear(f, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.wqkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        if self.attention == "flash":
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            o = torch.softmax(s.masked_fill(~mask, float("-inf")).float(), -1).to(q.dtype) @ v
        x = x + self.wo(o.transpose(1, 2).reshape(b, t, d))
        a, g = self.w13(self.ln2(x)).chunk(2, dim=-1)
        return x + self.w2(F.silu(a) * g)


class LM(nn.Module):
    def __init__(self, cfg, attention, recompute):
        super().__init__()
        d, h = cfg["hidden_size"], cfg["num_heads"]
        self.recompute = recompute
        self.emb = nn.Embedding(cfg["vocab_size"], d)
        self.blocks = nn.ModuleList(
            Block(d, h, cfg["ffn_hidden_size"], attention) for _ in range(cfg["num_layers"]))
        self.norm = RMSNorm(d)
        self.head = nn.Linear(d, cfg["vocab_size"], bias=False)
        self.head_dim = d // h
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.uniform_(p, -0.02 * math.sqrt(3), 0.02 * math.sqrt(3))

    def forward(self, tokens):
        t = tokens.shape[1]
        i = torch.arange(0, self.head_dim, 2, device=tokens.device, dtype=torch.float32)
        ang = torch.arange(t, device=tokens.device, dtype=torch.float32)[:, None] * \
            10000.0 ** (-i / self.head_dim)
        cos, sin = ang.cos(), ang.sin()
        x = self.emb(tokens)
        for blk in self.blocks:
            if self.recompute == "full":
                x = checkpoint(blk, x, cos, sin, use_reentrant=False)
            else:
                x = blk(x, cos, sin)
        return self.head(self.norm(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="cs336-small")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--precision", choices=["fp32", "bf16-mixed"], default="bf16-mixed")
    ap.add_argument("--attention", choices=["flash", "naive"], default="flash")
    ap.add_argument("--recompute", choices=["none", "full"], default="none")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--output")
    a = ap.parse_args()

    path = a.model if a.model.endswith(".json") else os.path.join(
        HERE, "..", "presets", "models", a.model + ".json")
    with open(path) as f:
        cfg = json.load(f)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    model = LM(cfg, a.attention, a.recompute).to(dev)  # fp32 master weights
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1, fused=True)
    period = 8
    g = torch.Generator(device="cpu").manual_seed(1)
    pattern = torch.randint(0, cfg["vocab_size"], (period,), generator=g)
    amp = a.precision == "bf16-mixed"

    times = {"forward": [], "backward": [], "optimizer": [], "step": []}
    losses = []
    torch.cuda.reset_peak_memory_stats()
    for step in range(a.warmup + a.steps):
        phase = torch.randint(0, period, (a.batch, 1), generator=g)
        idx = (phase + torch.arange(a.seq_len + 1)) % period
        seq = pattern[idx].to(dev)
        x, y = seq[:, :-1], seq[:, 1:]
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        ev[0].record()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))
        ev[1].record()
        loss.backward()
        ev[2].record()
        opt.step()
        opt.zero_grad(set_to_none=True)
        ev[3].record()
        torch.cuda.synchronize()
        losses.append(loss.item())
        if step >= a.warmup:
            times["forward"].append(ev[0].elapsed_time(ev[1]) / 1e3)
            times["backward"].append(ev[1].elapsed_time(ev[2]) / 1e3)
            times["optimizer"].append(ev[2].elapsed_time(ev[3]) / 1e3)
            times["step"].append(ev[0].elapsed_time(ev[3]) / 1e3)

    out = {
        "peer": "pytorch-eager",
        "torch_version": torch.__version__,
        "gpu_name": torch.cuda.get_device_name(0),
        "inputs": vars(a),
        "time": {k: {"median_s": statistics.median(v), "min_s": min(v),
                     "stdev_s": statistics.stdev(v) if len(v) > 1 else 0.0, "samples": len(v)}
                 for k, v in times.items()},
        "tokens_per_s": a.batch * a.seq_len / statistics.median(times["step"]),
        "peak_memory_bytes": torch.cuda.max_memory_allocated(),
        "losses": losses,
    }
    text = json.dumps(out, indent=1)
    print(text)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
