#!/usr/bin/env python3
"""Allocator traces of PyTorch training steps: every block the CUDA caching allocator hands out
and takes back, in order, for the steps of one run of scripts/peer_framework_runs.py (same
model code, optimizer and precision policy), with the allocator's own allocated/reserved bytes
at each phase boundary. trainsim's caching-allocator model (simulate/allocator.hpp) replays
these traces (`trainsim_allocator_replay`, docs/frameworks.md "The caching allocator") and its
step-trace generator is compared with them phase by phase. PyTorch is the measuring peer here,
never a trainsim dependency.

Output, one file per run (`--out DIR/ID.trace`), text lines:
  # {...}            the run (as peer_framework_runs.py records it) and "phases": one object per
                     phase boundary {step, phase, allocated_bytes, reserved_bytes, max_*}
  a SIZE ID [S]      the allocator hands out a block of SIZE bytes (already rounded by it) on
                     stream S (0, 1, ...: streams numbered as they first allocate; the
                     allocator keeps each stream's free blocks apart; absent in older traces)
  f ID               block ID is back in the cache (free_completed)
  s SIZE / x SIZE    a segment of SIZE bytes is cudaMalloc'd / cudaFree'd
  m STEP PHASE       a phase boundary (start, forward, backward, optimizer, zero_grad)
The trace starts before the model is built, so it holds every allocation of the process.
With --memory-cap-gb the allocator is capped first; a step that runs out of memory ends the
trace there ("out_of_memory" in the header says where and the peaks then; a '# {"oom_request_bytes": N}'
line marks each failed request).
With --addresses, ID.addr gives each trace line's device address (the block's for a/f lines, the
segment's for s/x lines, "-" otherwise): where the driver placed each segment.
With --peak-frames, a second file ID.peak.txt lists the blocks alive at the peak of allocated
bytes (step >= 1), largest first, each with the model code's frames that made it.

  python3 scripts/peer_allocator_trace.py --out DIR --model cs336-small --batch 4 --seq-len 512
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_framework_runs as peer  # noqa: E402

# Phase markers: small-pool blocks of sizes no tensor of these models has (512 B x 1901..1905),
# allocated and freed at once; they are dropped from the trace and become "m" lines.
PHASES = ["start", "forward", "backward", "optimizer", "zero_grad"]
MARK = {512 * (1901 + i): p for i, p in enumerate(PHASES)}


def run(a):
    import torch
    if a.memory_cap_gb:
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(a.memory_cap_gb * 1e9 / total, 1.0))
    # context=None records no tracebacks at all (the peak files recorded that way say "?"):
    # --peak-frames needs each allocation's Python frames.
    torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python",
                                             context="alloc" if a.peak_frames else None)
    model, opt, _, cfg = peer.setup(a)
    dev = torch.device("cuda")
    g = torch.Generator(device="cpu").manual_seed(1)
    amp = a.precision == "bf16-mixed" and a.framework != "fsdp"
    fwd = model if a.framework != "pytorch-compile" else torch.compile(model)
    phases = []

    def mark(step, phase):
        size = [s for s, p in MARK.items() if p == phase][0]
        t = torch.empty(size, dtype=torch.uint8, device=dev)
        del t
        torch.cuda.synchronize()
        phases.append({"step": step, "phase": phase,
                       "allocated_bytes": torch.cuda.memory_allocated(),
                       "reserved_bytes": torch.cuda.memory_reserved(),
                       "max_allocated_bytes": torch.cuda.max_memory_allocated(),
                       "max_reserved_bytes": torch.cuda.max_memory_reserved()})

    a.oom = None
    for s in range(a.steps):
        try:
            tokens = torch.randint(0, cfg["vocab_size"], (a.batch, a.seq_len + 1),
                                   generator=g).to(dev)
            x, y = tokens[:, :-1], tokens[:, 1:]
            mark(s, "start")
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                loss = fwd(x, y)
            mark(s, "forward")
            loss.backward()
            mark(s, "backward")
            opt.step()
            mark(s, "optimizer")
            opt.zero_grad(set_to_none=True)
            del loss, tokens, x, y
            mark(s, "zero_grad")
        except torch.OutOfMemoryError as e:  # under --memory-cap-gb: the trace up to the failure
            a.oom = {"step": s, "after_phase": phases[-1]["phase"] if phases else None,
                     "message": str(e).splitlines()[0][:300],
                     "max_allocated_bytes": torch.cuda.max_memory_allocated(),
                     "max_reserved_bytes": torch.cuda.max_memory_reserved()}
            break
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    return snap, phases


def write(a, snap, phases, path):
    base = peer.record(a)
    base["id"] = a.id
    base["source"] = "scripts/peer_allocator_trace.py on the device"
    base["versions"] = peer.versions()
    base["phases"] = phases
    if a.memory_cap_gb:
        base["memory_cap_bytes"] = a.memory_cap_gb * 1e9
        base["out_of_memory"] = a.oom  # null: every step ran under the cap
    events = snap["device_traces"][0]
    ids, next_id, pending_mark = {}, 0, set()
    streams = {}
    lines = ["# " + json.dumps(base)]
    addrs = ["-"]  # --addresses: each line's device address (a: the block's, s/x: the segment's)
    marks_seen = 0
    for e in events:
        act, size, addr = e["action"], e.get("size", 0), e.get("addr")
        if act == "alloc":
            if size in MARK:
                pending_mark.add(addr)
                phase = phases[marks_seen]
                lines.append(f"m {phase['step']} {phase['phase']}")
                addrs.append("-")
                marks_seen += 1
                continue
            ids[addr] = next_id
            stream = streams.setdefault(e.get("stream", 0), len(streams))
            lines.append(f"a {size} {next_id} {stream}")
            addrs.append(str(addr))
            next_id += 1
        elif act == "free_completed":
            if addr in pending_mark:
                pending_mark.discard(addr)
                continue
            if addr in ids:
                lines.append(f"f {ids.pop(addr)}")
                addrs.append(str(addr))
        elif act == "segment_alloc":
            lines.append(f"s {size}")
            addrs.append(str(addr))
        elif act == "segment_free":
            lines.append(f"x {size}")
            addrs.append(str(addr))
        elif act == "oom":
            lines.append("# " + json.dumps({"oom_request_bytes": size}))
            addrs.append("-")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    if a.addresses:
        assert len(addrs) == len(lines)
        with open(path[:-len(".trace")] + ".addr", "w") as f:
            f.write("\n".join(addrs) + "\n")
    if a.peak_frames:
        write_peak(events, phases, path[:-len(".trace")] + ".peak.txt")
    dropped = len(events) >= 2_000_000
    print(f"{a.id}: {len(lines) - 1} events, {marks_seen} phase marks"
          + (" (history full: trace truncated)" if dropped else ""), file=sys.stderr)


def write_peak(events, phases, path):
    """The blocks alive at the largest allocated total after the first phase mark of step 1."""
    def where(e):
        fr = [f for f in e.get("frames", []) if "peer_" in f.get("filename", "")]
        return " < ".join(f"{f['name']}:{f['line']}" for f in fr[:4]) or "?"
    marks, allocated, best, best_i = 0, 0, -1, -1
    first = sum(1 for p in phases if p["step"] == 0)  # marks of step 0
    events = [e for e in events if "addr" in e and "size" in e]  # not the "oom" records
    live = {}
    for i, e in enumerate(events):
        if e["size"] in MARK and e["action"] == "alloc":
            marks += 1
            continue
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
            allocated += e["size"]
            if marks > first and allocated > best:
                best, best_i = allocated, i
        elif e["action"] == "free_completed" and e["addr"] in live:
            allocated -= live.pop(e["addr"])
    live = {}
    for e in events[:best_i + 1]:
        if e["size"] in MARK:
            continue
        if e["action"] == "alloc":
            live[e["addr"]] = e
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    with open(path, "w") as f:
        f.write(f"# peak allocated {best} B at event {best_i}: {len(live)} blocks, largest first\n")
        f.write(f"# made by: {where(events[best_i])}\n")
        for e in sorted(live.values(), key=lambda e: -e["size"]):
            f.write(f"{e['size']} {e.get('stream', 0)} {where(e)}\n")


def main(argv):
    def extra(ap):
        ap.add_argument("--peak-frames", action="store_true", help="also write ID.peak.txt (see above)")
        ap.add_argument("--addresses", action="store_true",
                        help="also write ID.addr: the device address of each trace line, in order")
        ap.add_argument("--memory-cap-gb", type=float, default=0,
                        help="cap the allocator (set_per_process_memory_fraction; GB = 1e9 B); "
                        "a step that runs out of memory ends the trace there")
    a = peer.parse_peer_args(argv, __doc__, extra=extra)
    if a.memory_cap_gb and "-cap" not in a.id:
        a.id += f"-cap{a.memory_cap_gb:g}"
    snap, phases = run(a)
    write(a, snap, phases, os.path.join(a.out, a.id + ".trace"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
