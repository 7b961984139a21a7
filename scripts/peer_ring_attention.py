#!/usr/bin/env python3
"""Ring attention's GPU work on one GPU: what one context-parallel rank computes, timed without
the ring's communication. PyTorch is the measuring peer here; it is never a trainsim dependency.

Context parallelism as PyTorch's experimental context_parallel did it for torchtitan's 2024-12
benchmarks (load-balanced round robin, K/V all-gathered, merges and gradient accumulators in
fp32): each rank holds two chunks of the sequence (S_local tokens in all) and runs cp attention
calls per pass. Step 0 is causal over its own chunks; at a step i with i <= rank the queries meet
the first chunk of the arriving keys, otherwise the second half of the queries meets all of
them, both without a mask, so every step after the first is half a block. Forward merges each
step's output with the running one through their log-sum-exps, in fp32; backward runs the flash
backward per step and adds dq, dk and dv into fp32 accumulators (the half steps by splitting,
adding and concatenating), and concatenates K and V (forward) and dK and dV (backward) into one
buffer per step, as the ring sends them. The buffers that would arrive from other ranks are
local tensors here, so the figures are the rank's GPU work alone: the attention kernels, and
the merges and copies the ring adds around them.

For each cp it records, for the middle rank: forward and backward time of the whole ring pass,
the same passes with only the attention kernels, and plain causal SDPA over one GPU's whole
sequence when cp = 1. Shapes default to Llama 3.1 8B's attention as torchtitan runs it (32 query
heads, K and V repeated to 32 heads before SDPA, head dim 128, bf16, batch 1).

  python3 scripts/peer_ring_attention.py --output ring.jsonl --local-seq 32768 --cps 1,2,4,8
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", required=True)
    ap.add_argument("--local-seq", type=int, default=32768, help="tokens per rank (S_local)")
    ap.add_argument("--cps", default="1,2,4,8")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F
    from peer_sdpa import time_cuda

    aten = torch.ops.aten
    dev = "cuda"
    torch.manual_seed(0)
    h, d, s = a.heads, a.head_dim, a.local_seq
    assert s % 2 == 0

    def qkv():
        # [B, S, H, D] made first and viewed as [B, H, S, D], as the model's transpose does.
        return [torch.randn(1, s, h, d, device=dev, dtype=torch.bfloat16).transpose(1, 2)
                for _ in range(3)]

    q, k, v = qkv()
    k, v = k.contiguous(), v.contiguous()
    # What the other ranks' K and V would be: other random tensors of the same shape.
    k_other, v_other = [t.contiguous() for t in qkv()[:2]]
    dout = torch.randn(1, h, s, d, device=dev, dtype=torch.bfloat16)

    def flash_fwd(q_, k_, v_, causal):
        r = aten._scaled_dot_product_flash_attention(q_, k_, v_, 0.0, causal, False)
        return r[0], r[1], r

    def flash_bwd(dout_, q_, k_, v_, out_, lse_, r, causal):
        return aten._scaled_dot_product_flash_attention_backward(
            dout_, q_, k_, v_, out_, lse_, r[2], r[3], r[4], r[5], 0.0, causal, r[6], r[7])

    def steps(cp, rank):
        """(kind, q slice, kv slice) per step: 'causal', 'kv_half' or 'q_half'."""
        out = []
        for i in range(cp):
            if i == 0:
                out.append("causal")
            elif i <= rank:
                out.append("kv_half")
            else:
                out.append("q_half")
        return out

    half = s // 2

    def ring_forward(cp, rank, kernels_only):
        out_acc = lse_acc = None
        saved = []
        for i, kind in enumerate(steps(cp, rank)):
            kk, vv = (k, v) if i == 0 else (k_other, v_other)
            if not kernels_only and i < cp - 1:
                torch.cat([kk.flatten(), vv.flatten()])  # the buffer the ring sends
            if kind == "causal":
                o, l, r = flash_fwd(q, kk, vv, True)
            elif kind == "kv_half":
                o, l, r = flash_fwd(q, kk[:, :, :half], vv[:, :, :half], False)
            else:
                o, l, r = flash_fwd(q[:, :, half:], kk, vv, False)
            saved.append((kind, r))
            if kernels_only:
                continue
            o = o.float()
            l = l.float().unsqueeze(-1)
            if out_acc is None:
                out_acc, lse_acc = o, l
                continue
            if kind == "q_half":
                oa, la = out_acc[:, :, half:], lse_acc[:, :, half:]
            else:
                oa, la = out_acc, lse_acc
            oa = oa - torch.sigmoid(l - la) * (oa - o)
            la = la - F.logsigmoid(la - l)
            if kind == "q_half":
                out_acc = torch.cat([out_acc[:, :, :half], oa], dim=2)
                lse_acc = torch.cat([lse_acc[:, :, :half], la], dim=2)
            else:
                out_acc, lse_acc = oa, la
        if not kernels_only:
            out_acc.to(torch.bfloat16)
        return saved

    def ring_backward(cp, rank, saved, kernels_only):
        out = torch.randn(1, h, s, d, device=dev, dtype=torch.bfloat16)
        lse = torch.randn(1, h, s, device=dev, dtype=torch.float32)
        if not kernels_only:
            gq = torch.zeros(1, h, s, d, device=dev, dtype=torch.float32)
            gk = torch.zeros_like(gq)
            gv = torch.zeros_like(gq)
        for i, (kind, r) in enumerate(saved):
            kk, vv = (k, v) if i == 0 else (k_other, v_other)
            if not kernels_only and i < cp - 1:
                torch.cat([kk.flatten(), vv.flatten()])
            if kind == "causal":
                dq, dk, dv = flash_bwd(dout, q, kk, vv, out, lse, r, True)
            elif kind == "kv_half":
                dq, dk, dv = flash_bwd(dout, q, kk[:, :, :half], vv[:, :, :half], out, lse, r, False)
            else:
                dq, dk, dv = flash_bwd(dout[:, :, half:], q[:, :, half:], kk, vv, out[:, :, half:],
                                       lse[:, :, half:].contiguous(), r, False)
            if kernels_only:
                continue
            if kind == "kv_half":
                gk = torch.cat([gk[:, :, :half] + dk, gk[:, :, half:]], dim=2)
                gv = torch.cat([gv[:, :, :half] + dv, gv[:, :, half:]], dim=2)
            else:
                gk += dk
                gv += dv
            torch.cat([gk.flatten(), gv.flatten()])  # the dK, dV buffer sent on
            if kind == "q_half":
                gq = torch.cat([gq[:, :, :half], gq[:, :, half:] + dq], dim=2)
            else:
                gq += dq
        if not kernels_only:
            gq.to(torch.bfloat16)
            gk.to(torch.bfloat16)
            gv.to(torch.bfloat16)

    def timed(fn, reps):  # CUDA-event median, as the SDPA peer times
        return time_cuda(fn, warmup=1, samples=reps)["median_s"]

    rows = []
    for cp in [int(x) for x in a.cps.split(",")]:
        rank = cp // 2
        total = s * cp
        # Causal FLOPs of one rank (load-balanced: an equal share of the causal work).
        fwd_flops = 4.0 * h * d * s * total / 2
        row = {"cp": cp, "rank": rank, "local_seq": s, "seq_len": total, "heads": h,
               "head_dim": d, "fwd_flops": fwd_flops, "bwd_flops": 2.5 * fwd_flops}
        for kernels_only in (False, True):
            key = "kernels" if kernels_only else "ring"
            saved_holder = {}

            def fwd():
                saved_holder["s"] = ring_forward(cp, rank, kernels_only)

            fwd()
            torch.cuda.synchronize()
            saved = saved_holder["s"]
            row[f"{key}_fwd_s"] = timed(fwd, a.reps)
            row[f"{key}_bwd_s"] = timed(lambda: ring_backward(cp, rank, saved, kernels_only),
                                           a.reps)
        if cp == 1:
            row["plain_note"] = "cp 1: the ring is one causal call; ring = plain SDPA"
        row["ring_tflops_fwd"] = fwd_flops / row["ring_fwd_s"] / 1e12
        row["ring_tflops_bwd"] = 2.5 * fwd_flops / row["ring_bwd_s"] / 1e12
        row["kernels_tflops_fwd"] = fwd_flops / row["kernels_fwd_s"] / 1e12
        row["kernels_tflops_bwd"] = 2.5 * fwd_flops / row["kernels_bwd_s"] / 1e12
        row["versions"] = {"torch": torch.__version__, "gpu_name": torch.cuda.get_device_name()}
        rows.append(row)
        print(f"cp {cp} seq {total}: ring fwd {row['ring_fwd_s']*1e3:.1f} ms "
              f"({row['ring_tflops_fwd']:.0f} TFLOP/s), bwd {row['ring_bwd_s']*1e3:.1f} ms "
              f"({row['ring_tflops_bwd']:.0f}); kernels alone fwd {row['kernels_fwd_s']*1e3:.1f} "
              f"bwd {row['kernels_bwd_s']*1e3:.1f} ms", flush=True)
        del saved
        torch.cuda.empty_cache()
    with open(a.output, "a") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
