#!/usr/bin/env python3
"""Host and GPU time of each phase of a training step (forward, backward, optimizer), for the
run configurations of scripts/peer_framework_runs.py (same model code, optimizer and precision
policy). PyTorch is the measuring peer here, never a trainsim dependency.

It answers one question trainsim's queue host model (simulate/step.cpp) rests on: how far the
host runs ahead of the GPU, phase by phase, and where the GPU waits. Per step it records:

- host_s[phase]: wall time the Python thread spends issuing the phase (perf_counter around the
  forward call, loss.backward(), opt.step() + zero_grad);
- gpu_end_s[phase]: when the phase's last work on the compute stream ends, from CUDA events
  recorded after each phase, relative to an event recorded at the step's start;
- host_end_s[phase]: when the host finished issuing the phase, on the same clock (host time
  since the start event was recorded; the GPU is idle then, after a synchronize);
- then, in a separate pass under torch.profiler (CUDA activity): every kernel's start and end,
  split into phases by marker kernels (torch.cuda._sleep(1), "spin_kernel") launched at the
  step's start and after each phase, giving gpu_busy_s[phase] (union of kernel intervals over
  all streams), gpu_span_s[phase] (marker to marker: busy plus the GPU's idle gaps) and
  launches[phase].

A last measurement times how many tiny kernels the host can queue behind a long kernel before
the launch call blocks (the launch queue's depth): --queue-probe.

  python3 scripts/peer_phase_times.py --out DIR --framework fsdp --model cs336-large \
      --batch 4 --seq-len 1024
  python3 scripts/peer_phase_times.py --out DIR --queue-probe
"""
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_framework_runs as peer  # noqa: E402

PHASES = ("forward", "backward", "optimizer")


def phase_step(a, opt, step, cfg, markers=False):
    """One training step as setup()'s `step`, with events (and markers) between its phases."""
    import torch
    fwd, amp, g = step.fwd, step.amp, step.generator
    tokens = torch.randint(0, cfg["vocab_size"], (a.batch, a.seq_len + 1),
                           generator=g).to(torch.device("cuda"))
    x, y = tokens[:, :-1], tokens[:, 1:]
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    host = []
    ev[0].record()
    h0 = time.perf_counter()
    if markers:
        torch.cuda._sleep(1)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        loss = fwd(x, y)
    if markers:
        torch.cuda._sleep(1)
    ev[1].record()
    host.append(time.perf_counter())
    loss.backward()
    if markers:
        torch.cuda._sleep(1)
    ev[2].record()
    host.append(time.perf_counter())
    opt.step()
    opt.zero_grad(set_to_none=True)
    if markers:
        torch.cuda._sleep(1)
    ev[3].record()
    host.append(time.perf_counter())
    torch.cuda.synchronize()
    gpu_end = [ev[0].elapsed_time(e) / 1e3 for e in ev[1:]]
    host_end = [h - h0 for h in host]
    return gpu_end, host_end


def union(intervals):
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def run(a):
    import torch
    from torch.profiler import ProfilerActivity, profile
    _, opt, step, cfg = peer.setup(a)
    for _ in range(a.warmup):
        phase_step(a, opt, step, cfg)
    torch.cuda.synchronize()
    rows = [phase_step(a, opt, step, cfg) for _ in range(a.steps)]
    med = lambda xs: statistics.median(xs)  # noqa: E731
    out = {"gpu_end_s": {p: med([r[0][i] for r in rows]) for i, p in enumerate(PHASES)},
           "host_end_s": {p: med([r[1][i] for r in rows]) for i, p in enumerate(PHASES)}}
    # The GPU's busy time per phase, from kernel intervals between marker kernels.
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.prof_steps):
            phase_step(a, opt, step, cfg, markers=True)
    kernels = sorted((e.time_range.start, e.time_range.end, e.name)
                     for e in prof.events() if e.device_type.name == "CUDA")
    # Four markers per step (start, after forward, after backward, after the optimizer): the
    # kernels between two markers belong to that phase, whatever stream they ran on.
    marks = [i for i, k in enumerate(kernels) if "spin_kernel" in k[2]]
    busy = {p: [] for p in PHASES}
    span = {p: [] for p in PHASES}
    launches = {p: [] for p in PHASES}
    for s in range(0, len(marks) - 3, 4):
        for j, p in enumerate(PHASES):
            ks = [(k[0], k[1]) for k in kernels[marks[s + j] + 1:marks[s + j + 1]]]
            busy[p].append(union(ks) * 1e-6)
            span[p].append((kernels[marks[s + j + 1]][0] - kernels[marks[s + j]][1]) * 1e-6)
            launches[p].append(len(ks))
    out["gpu_busy_s"] = {p: med(busy[p]) for p in PHASES if busy[p]}
    out["gpu_span_s"] = {p: med(span[p]) for p in PHASES if span[p]}
    out["launches"] = {p: med(launches[p]) for p in PHASES if launches[p]}
    out["steps"] = a.steps
    out["profiled_steps"] = a.prof_steps
    return out


def queue_probe():
    """Host time to launch n tiny kernels behind a ~200 ms kernel, for growing n: while the
    launches fit the queue the host returns at once; past its depth each launch waits."""
    import torch
    x = torch.zeros(1, device="cuda")
    cycles = int(torch.cuda.get_device_properties(0).clock_rate * 1e3 * 0.2)  # ~200 ms
    rows = []
    for n in (64, 256, 512, 768, 1024, 1536, 2048, 4096):
        torch.cuda.synchronize()
        torch.cuda._sleep(cycles)
        t0 = time.perf_counter()
        for _ in range(n):
            x.add_(1)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        rows.append({"kernels": n, "host_s": t1 - t0})
    return {"queue_probe": rows, "sleep_cycles": cycles}


def main(argv):
    if "--queue-probe" in argv:
        argv = [x for x in argv if x != "--queue-probe"]
        out = argv[argv.index("--out") + 1]
        os.makedirs(out, exist_ok=True)
        r = queue_probe()
        r["versions"] = peer.versions()
        with open(os.path.join(out, "queue-probe.json"), "w") as f:
            json.dump(r, f, indent=1)
        print(json.dumps(r["queue_probe"]), file=sys.stderr)
        return 0

    def extra(ap):
        ap.add_argument("--warmup", type=int, default=3)
        ap.add_argument("--prof-steps", type=int, default=3)
    a = peer.parse_peer_args(argv, __doc__, extra)
    r = run(a)
    base = peer.record(a)
    base["id"] = a.id
    base["source"] = "scripts/peer_phase_times.py on the device"
    base["versions"] = peer.versions()
    base.update(r)
    with open(os.path.join(a.out, "phases-" + a.id + ".json"), "w") as f:
        json.dump(base, f, indent=1)
    print(a.id, json.dumps({k: r[k] for k in ("gpu_end_s", "host_end_s", "gpu_busy_s",
                                             "launches")}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
