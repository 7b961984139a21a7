#!/usr/bin/env python3
"""GPU kernel time against wall time of an expert-parallel MoE block's local work on one GPU,
by micro-batch: where a small micro-batch leaves the GPU waiting on the host. PyTorch is the
measuring peer here; it is never a trainsim dependency.

The block is what one rank of an ep-way expert-parallel MoE layer runs besides its all-to-alls,
written the way Megatron-Core's alltoall token dispatcher and grouped experts work
(megatron/core/transformer/moe/token_dispatcher.py, experts.py): the router GEMM over all
experts and a top-k; the permutation of each token's k copies by expert; the token counts per
local expert copied to the host (the dispatcher needs them as all-to-all split sizes: a
device-to-host sync every layer, `--no-sync` leaves it out); the local experts' gated MLPs, one
after the other (`loop`) or as one grouped GEMM (`grouped`, torch._grouped_mm where this PyTorch
has it); the un-permutation weighted by the router's probabilities. Routing is force-balanced
(Megatron-Bridge's benchmarks force-balance): with E experts over ep ranks each rank's experts
receive b s k rows in all, as here. No all-to-all runs (one GPU); the tokens a rank sends and
the rows it receives are the same count when balanced.

Each configuration stacks `--layers` such blocks (x + block(x)), times forward + backward
(wall: host clock around the iteration, synchronized; median of `--iters`), and sums the CUDA
kernels' time of one profiled iteration (torch.profiler): per layer, wall - kernels is the time
the GPU waited.

  python3 scripts/peer_moe_layer.py --output moe-layer.json
"""
import argparse
import json
import statistics
import sys
import time


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", required=True)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--experts", type=int, default=128, help="experts in all (router width)")
    ap.add_argument("--ep", type=int, default=8, help="expert-parallel ranks (local = experts/ep)")
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=768, help="expert FFN hidden size")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--micro-batches", default="1,2,4,8")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--variants", default="loop,loop-nosync,grouped")
    a = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    dev = "cuda"
    dt = torch.bfloat16
    local = a.experts // a.ep
    have_grouped = hasattr(torch, "_grouped_mm")

    def make_layer(g):
        s = 0.02
        p = {
            "router": (torch.randn(a.experts, a.hidden, device=dev, dtype=dt, generator=g) * s)
            .requires_grad_(),
            # [expert, out, in], as nn.Linear keeps them; used transposed.
            "w1": (torch.randn(local, 2 * a.ffn, a.hidden, device=dev, dtype=dt, generator=g) * s)
            .requires_grad_(),
            "w2": (torch.randn(local, a.hidden, a.ffn, device=dev, dtype=dt, generator=g) * s)
            .requires_grad_(),
        }
        # The loop's experts hold their own weights (Megatron-Core's SequentialMLP: one module
        # per expert), the same values: indexing one stacked tensor would make its backward
        # write a whole-stack gradient per expert.
        for w in ("w1", "w2"):
            p[w + "_each"] = [t.detach().clone().requires_grad_() for t in p[w].unbind(0)]
        return p

    def block(x, p, variant):
        tokens = x.shape[0]
        logits = x @ p["router"].t()
        probs, _ = torch.topk(torch.softmax(logits.float(), dim=-1), a.topk, dim=-1)
        # Force-balanced routing: copy j of token t goes to local expert (t k + j) mod local.
        expert = (torch.arange(tokens * a.topk, device=dev) % local)
        order = torch.argsort(expert, stable=True)
        source = torch.div(order, a.topk, rounding_mode="floor")  # the token of each copy
        rows = x.index_select(0, source)
        counts = torch.bincount(expert, minlength=local)
        if variant.endswith("nosync"):
            sizes = [tokens * a.topk // local] * local  # known without asking the GPU
        else:
            sizes = counts.tolist()  # the dispatcher's device-to-host sync
        if variant.startswith("grouped"):
            offs = torch.cumsum(counts, 0).to(torch.int32)
            h = torch._grouped_mm(rows, p["w1"].transpose(-2, -1), offs=offs)
            gate, up = h.chunk(2, dim=-1)
            y = torch._grouped_mm(F.silu(gate) * up, p["w2"].transpose(-2, -1), offs=offs)
        else:
            outs = []
            for e, part in enumerate(torch.split(rows, sizes)):
                gate, up = (part @ p["w1_each"][e].t()).chunk(2, dim=-1)
                outs.append((F.silu(gate) * up) @ p["w2_each"][e].t())
            y = torch.cat(outs)
        y = y * probs.reshape(-1)[order].unsqueeze(-1).to(dt)
        out = torch.zeros_like(x)
        out.index_add_(0, source, y)
        return out

    # Correct first: the variants compute the same block (bf16: within 1e-2 of each other).
    g = torch.Generator(device=dev).manual_seed(1)
    p0 = make_layer(g)
    xc = torch.randn(a.seq, a.hidden, device=dev, dtype=dt, generator=g)
    ref = block(xc, p0, "loop").float()
    for variant in a.variants.split(","):
        if variant.startswith("grouped") and not have_grouped:
            continue
        out = block(xc, p0, variant).float()
        rel = ((out - ref).norm() / ref.norm()).item()
        assert rel < 1e-2, f"{variant}: relative difference {rel} from loop"
        print(f"check {variant}: relative difference from loop {rel:.2e}", flush=True)
    del p0, xc, ref

    results = []
    for variant in a.variants.split(","):
        if variant.startswith("grouped") and not have_grouped:
            print(f"{variant}: torch._grouped_mm not in this PyTorch, skipped", file=sys.stderr)
            continue
        for mb in [int(v) for v in a.micro_batches.split(",")]:
            g = torch.Generator(device=dev).manual_seed(0)
            layers = [make_layer(g) for _ in range(a.layers)]
            x0 = torch.randn(mb * a.seq, a.hidden, device=dev, dtype=dt, generator=g)

            def step():
                x = x0.clone().requires_grad_()
                h = x
                for p in layers:
                    h = h + block(h, p, variant)
                h.float().square().mean().backward()
                return x.grad

            for _ in range(3):
                grad = step()
            torch.cuda.synchronize()
            assert torch.isfinite(grad).all().item(), "non-finite gradient"
            walls = []
            for _ in range(a.iters):
                t0 = time.perf_counter()
                step()
                torch.cuda.synchronize()
                walls.append(time.perf_counter() - t0)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                step()
                torch.cuda.synchronize()
            kernel_us = 0.0
            kernels = 0
            for evt in prof.events():
                if evt.device_type == torch.autograd.DeviceType.CUDA:
                    kernel_us += evt.time_range.elapsed_us()
                    kernels += 1
            wall = statistics.median(walls)
            r = {
                "variant": variant, "micro_batch": mb, "tokens": mb * a.seq,
                "rows_per_layer": mb * a.seq * a.topk, "layers": a.layers,
                "wall_ms_per_layer": 1e3 * wall / a.layers,
                "wall_spread_ms_per_layer": 1e3 * (max(walls) - min(walls)) / a.layers,
                "kernel_ms_per_layer": kernel_us / 1e3 / a.layers,
                "kernels_per_layer": kernels / a.layers,
            }
            r["gpu_wait_ms_per_layer"] = r["wall_ms_per_layer"] - r["kernel_ms_per_layer"]
            results.append(r)
            print(json.dumps(r), flush=True)
            del layers, x0
            torch.cuda.empty_cache()

    meta = {"args": vars(a), "torch": torch.__version__, "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(0), "grouped_mm": have_grouped}
    with open(a.output, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    print(f"{'variant':12s} {'mb':>3s} {'wall ms/layer':>14s} {'kernels ms/layer':>17s} "
          f"{'GPU waits':>10s} {'kernels/layer':>14s}")
    for r in results:
        print(f"{r['variant']:12s} {r['micro_batch']:3d} {r['wall_ms_per_layer']:14.3f} "
              f"{r['kernel_ms_per_layer']:17.3f} {r['gpu_wait_ms_per_layer']:10.3f} "
              f"{r['kernels_per_layer']:14.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
