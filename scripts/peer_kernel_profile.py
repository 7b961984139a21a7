#!/usr/bin/env python3
"""Kernel-level profile of PyTorch training steps: every CUDA kernel (and memcpy/memset) the
step of one run of scripts/peer_framework_runs.py launches (same model code, optimizer and
precision policy), with its GPU time summed over the profiled steps, so trainsim's per-role
kernel counts and bytes factors (presets/frameworks/*.json, docs/frameworks.md) can be checked
against what the framework really runs. PyTorch is the measuring peer here, never a trainsim
dependency.

Output, one JSON file per run (`--out DIR/ID.json`): the run (as peer_framework_runs.py records
it), "steps" (profiled steps), "step_wall_s" (median wall time of those steps under the
profiler), "gpu_busy_s" (summed kernel time per step) and "kernels": [{name, count, total_s}]
per step, sorted by time. Names are CUDA kernel names as the profiler reports them.

  python3 scripts/peer_kernel_profile.py --out DIR --model cs336-large --attention naive \
      --batch 2 --seq-len 2048
"""
import collections
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_framework_runs as peer  # noqa: E402


def run(a):
    import torch
    from torch.profiler import ProfilerActivity, profile
    _, _, train_step, _ = peer.setup(a)

    def step():
        train_step(a.batch)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    walls = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.steps):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            walls.append(time.perf_counter() - t0)
    totals = collections.defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type.name != "CUDA":
            continue
        t = totals[e.name]
        t[0] += 1
        t[1] += e.device_time_total * 1e-6 if hasattr(e, "device_time_total") else e.cuda_time_total * 1e-6
    kernels = [{"name": n, "count": c / a.steps, "total_s": s / a.steps}
               for n, (c, s) in totals.items()]
    kernels.sort(key=lambda k: -k["total_s"])
    return walls, kernels


def main(argv):
    a = peer.parse_peer_args(
        argv, __doc__, lambda ap: ap.add_argument("--warmup", type=int, default=3))
    walls, kernels = run(a)
    base = peer.record(a)
    base["id"] = a.id
    base["source"] = "scripts/peer_kernel_profile.py on the device"
    base["versions"] = peer.versions()
    base["steps"] = a.steps
    base["step_wall_s"] = statistics.median(walls)
    base["gpu_busy_s"] = sum(k["total_s"] for k in kernels)
    base["kernels"] = kernels
    with open(os.path.join(a.out, a.id + ".json"), "w") as f:
        json.dump(base, f, indent=1)
    print(f"{a.id}: step {base['step_wall_s'] * 1e3:.1f} ms under the profiler, kernels "
          f"{base['gpu_busy_s'] * 1e3:.1f} ms, {sum(k['count'] for k in kernels):.0f} launches",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
