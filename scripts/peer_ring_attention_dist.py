#!/usr/bin/env python3
"""Ring attention across GPUs, with its communication: PyTorch's own context_parallel (the
experimental API torchtitan's 2024-12 context-parallel runs used), timed per pass. PyTorch is the
measuring peer here; it is never a trainsim dependency.

scripts/peer_ring_attention.py times what one rank computes with the ring's transfers left out
(one GPU). This script runs the real thing on as many GPUs as torchrun starts (cp = the world
size): Q, K and V of one attention layer over the whole sequence are sharded in place by
`context_parallel` (load-balanced, as torchtitan ran it), and causal SDPA inside the context runs
PyTorch's ring (`--rotate allgather`, the 2024-12 default, or `alltoall`). It records, as the
slowest rank saw them, the forward and the backward of that layer (CUDA-event medians, every rank
starting together), and the same pass as plain causal SDPA over one rank's share of the tokens
without the ring (the work one GPU would do at cp 1 on its own sequence), so the ring's cost
at this cp is the difference. Shapes default to Llama 3.1 8B's attention as torchtitan runs it
(32 query heads, K and V repeated to 32 heads before SDPA, head dim 128, bf16, batch 1).

  torchrun --nproc-per-node 8 scripts/peer_ring_attention_dist.py --output ring-dist.jsonl \
      --local-seq 32768 --rotate allgather

On one GPU (cp 1) the ring is one causal call: a check that the script runs, not a measurement
of the ring.
"""
import argparse
import json
import os
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", required=True)
    ap.add_argument("--local-seq", type=int, default=32768, help="tokens per rank")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--rotate", choices=["allgather", "alltoall"], default="allgather")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (world,))
    try:  # the module that holds the option moved between PyTorch versions
        from torch.distributed.tensor.experimental._attention import set_rotate_method
        set_rotate_method(a.rotate)
        rotate = a.rotate
    except (ImportError, AttributeError, ValueError) as e:
        rotate = f"default ({type(e).__name__}: {e})"

    h, d, s = a.heads, a.head_dim, a.local_seq
    total = s * world
    torch.manual_seed(0)  # every rank makes the same whole-sequence tensors
    qf, kf, vf = [torch.randn(1, h, total, d, device="cuda", dtype=torch.bfloat16)
                  for _ in range(3)]

    def timed(fn):
        times = []
        for i in range(a.reps + 1):
            dist.barrier()
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            if i > 0:  # the first is a warm-up
                times.append(start.elapsed_time(stop) * 1e-3)
        t = torch.tensor([statistics.median(times)], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's median
        return t.item()

    def passes(q, k, v):
        dout = torch.randn_like(q)
        state = {}

        def fwd():
            state["out"] = F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def bwd():
            state["out"].backward(dout, retain_graph=True)

        fwd_s = timed(fwd)
        fwd()
        bwd_s = timed(bwd)
        return fwd_s, bwd_s

    # Plain causal SDPA over one rank's share of the tokens, no ring.
    plain = [t[:, :, :s].detach().clone().requires_grad_() for t in (qf, kf, vf)]
    plain_fwd, plain_bwd = passes(*plain)
    del plain
    # The ring: context_parallel shards the buffers in place (load-balanced) and patches SDPA.
    with context_parallel(mesh, buffers=[qf, kf, vf], buffer_seq_dims=[2, 2, 2],
                          no_restore_buffers={qf, kf, vf}):
        q, k, v = [t.detach().requires_grad_() for t in (qf, kf, vf)]
        assert q.shape[2] == s, f"rank holds {q.shape[2]} tokens, expected {s}"
        ring_fwd, ring_bwd = passes(q, k, v)

    fwd_flops = 4.0 * h * d * s * total / 2  # one rank's equal share of the causal work
    row = {"cp": world, "local_seq": s, "seq_len": total, "heads": h, "head_dim": d,
           "rotate": rotate, "ring_fwd_s": ring_fwd, "ring_bwd_s": ring_bwd,
           "plain_local_fwd_s": plain_fwd, "plain_local_bwd_s": plain_bwd,
           "fwd_flops": fwd_flops, "bwd_flops": 2.5 * fwd_flops,
           "ring_tflops_fwd": fwd_flops / ring_fwd / 1e12,
           "ring_tflops_bwd": 2.5 * fwd_flops / ring_bwd / 1e12,
           "versions": {"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                        "gpu_name": torch.cuda.get_device_name()}}
    if rank == 0:
        print(json.dumps(row), flush=True)
        with open(a.output, "a") as f:
            f.write(json.dumps(row) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
