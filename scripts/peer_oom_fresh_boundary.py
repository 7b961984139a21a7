#!/usr/bin/env python3
"""The OOM boundary of recorded pairs, re-measured one fresh process per probe.

scripts/peer_framework_runs.py --oom-search probes batch sizes in one process, and a probe that
ran out of memory can leave memory behind for the next (docs/frameworks.md, "Under a cap: the OOM boundary"); its
fresh check re-ran only the answer. This script takes the recorded pairs (JSON lines with
`measured.max_micro_batch` and `memory_cap_bytes`) and, for each, runs
scripts/peer_oom_leak_check.py once per probe, each in its own process under the pair's cap:
the recorded answer b first (unless its fresh check already ran it), then upward while
batches run (b + 1, b + 2, b + 4, ...: the stride doubles) or downward while they fail, and
between the last batch that ran and the first that failed by bisection. The fresh boundary is
the largest batch that ran with the next one failing, both in fresh processes.
--steps 4 --keep-cache measures what a user's training loop finds (the protocol `trainsim memory`
predicts: the model and optimizer built, no torch.cuda.empty_cache(), four steps under the cap);
the walk then starts from the pair's earlier fresh boundary where it has one. --jobs N runs pairs
side by side on the one GPU while their caps add up to at most --gpu-gb. --known FILE
(this script's output of an earlier call) seeds the probes already made. Pairs are visited in file order,
those where something fit first; a pair is skipped once the time budget is spent. Output: one
JSON line per pair (id, cap, fresh probes with their peaks, fresh_max_micro_batch).
PyTorch is the measuring peer, never a trainsim dependency.

  python3 scripts/peer_oom_fresh_boundary.py --runs oom.jsonl oom-b.jsonl --out fresh.jsonl
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def probe(row, batch, steps, timeout_s, keep_cache=False):
    """One probe of `batch` under the row's cap in a fresh process: (ran, peaks) or None."""
    return fresh_probe(["--framework", row["framework"], "--model", row["model"],
                        "--seq-len", str(row["seq_len"]), "--precision", row["precision"],
                        "--attention", row.get("attention", "flash"),
                        "--recompute", row.get("recompute", "none"),
                        "--ok-batch", str(batch), "--cap-gb", str(row["memory_cap_bytes"] / 1e9),
                        "--steps", str(steps)] + (["--keep-cache"] if keep_cache else []),
                       timeout_s)


def fresh_probe(args, timeout_s):
    """scripts/peer_oom_leak_check.py ARGS in a fresh process (one probe under --cap-gb):
    {ok, peak_allocated_bytes, peak_reserved_bytes}, or None on a timeout or a crash."""
    cmd = [sys.executable, os.path.join(HERE, "peer_oom_leak_check.py"), *args]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            p = json.loads(line)["probes"][0]
            return {"ok": bool(p["ok"]), "peak_allocated_bytes": p["peak_allocated_bytes"],
                    "peak_reserved_bytes": p["peak_reserved_bytes"]}
    sys.stderr.write(out.stderr[-2000:])
    return None


def boundary(row, steps, timeout_s, deadline, known, keep_cache=False):
    m = row["measured"]
    b = int(m["max_micro_batch"])
    loop = keep_cache or steps != 2  # another protocol than the search's probes
    if loop and m.get("fresh_max_micro_batch") is not None:
        b = int(m["fresh_max_micro_batch"])
    probes = dict(known)
    if not loop and b > 0 and m.get("fresh_ok") is True and b not in probes:
        probes[b] = {"ok": True, "peak_allocated_bytes": m.get("fresh_peak_allocated_bytes"),
                     "peak_reserved_bytes": m.get("fresh_peak_reserved_bytes"),
                     "from": "the search's fresh check"}

    def run(k):
        if k not in probes:
            if time.time() >= deadline:
                return None
            p = probe(row, k, steps, timeout_s, keep_cache)
            if p is None:
                return None
            probes[k] = p
        return probes[k]["ok"]

    def bracket():
        oks = [k for k, p in probes.items() if p["ok"]]
        fails = [k for k, p in probes.items() if not p["ok"]]
        return (max(oks) if oks else 0), (min(f for f in fails if f > max(oks, default=0))
                                          if any(f > max(oks, default=0) for f in fails) else None)

    start = max(b, 1)
    if run(start) is None:
        return probes, None
    lo, hi = bracket()
    stride = 1
    while hi is None:  # upward: the stride doubles while batches run
        r = run(lo + stride)
        if r is None:
            return probes, None
        stride *= 2
        lo, hi = bracket()
    if lo == 0 and probes.get(1, {}).get("ok") is False:
        return probes, 0
    if lo == 0:  # downward from a failing start: walk down, doubling the stride
        k, stride = start, 1
        while True:
            k = max(k - stride, 1)
            r = run(k)
            if r is None:
                return probes, None
            if r or k == 1:
                break
            stride *= 2
        lo, hi = bracket()
        if lo == 0:
            return probes, 0
    while hi - lo > 1:  # bisect between the last that ran and the first that failed
        if run((lo + hi) // 2) is None:
            return probes, None
        lo, hi = bracket()
    return probes, lo


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", required=True, help="recorded OOM pairs (JSON lines)")
    ap.add_argument("--frameworks", default="pytorch,fsdp")
    ap.add_argument("--steps", type=int, default=2, help="training steps per probe (the search's)")
    ap.add_argument("--keep-cache", action="store_true",
                    help="no torch.cuda.empty_cache() before the steps (a user's training loop)")
    ap.add_argument("--jobs", type=int, default=1, help="pairs measured side by side")
    ap.add_argument("--gpu-gb", type=float, default=80,
                    help="with --jobs: the caps of the pairs running together add up to at most this")
    ap.add_argument("--probe-timeout-s", type=float, default=150)
    ap.add_argument("--budget-s", type=float, default=540)
    ap.add_argument("--only", default="", help="comma-separated pair ids")
    ap.add_argument("--known", default="", help="an earlier call's output: probes already made")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    frameworks = set(a.frameworks.split(","))
    only = set(filter(None, a.only.split(",")))
    rows = []
    for path in a.runs:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if "measured" not in r or r.get("framework") not in frameworks:
                    continue
                if only and r["id"] not in only:
                    continue
                rows.append(r)
    rows.sort(key=lambda r: r["measured"]["max_micro_batch"] == 0)  # stable: file order kept
    known = {}
    if a.known:
        with open(a.known) as f:
            for line in f:
                r = json.loads(line)
                known[r["id"]] = {int(k): v for k, v in r["fresh_probes"].items()}
    deadline = time.time() + a.budget_s
    lock = threading.Condition()
    in_use = [0.0]  # GB of caps of the pairs running now

    def measure(r, out):
        cap_gb = r["memory_cap_bytes"] / 1e9
        with lock:
            lock.wait_for(lambda: in_use[0] == 0 or in_use[0] + cap_gb <= a.gpu_gb)
            in_use[0] += cap_gb
        try:
            if time.time() >= deadline:
                print(f"{r['id']}: skipped (budget spent)", file=sys.stderr)
                return
            t0 = time.time()
            probes, fresh = boundary(r, a.steps, a.probe_timeout_s, deadline,
                                     known.get(r["id"], {}), a.keep_cache)
            rec = {"id": r["id"], "memory_cap_bytes": r["memory_cap_bytes"],
                   "searched_max_micro_batch": r["measured"]["max_micro_batch"],
                   "fresh_max_micro_batch": fresh, "steps": a.steps,
                   "empty_cache": not a.keep_cache,
                   "fresh_probes": {str(k): v for k, v in sorted(probes.items())},
                   "seconds": round(time.time() - t0, 1)}
            with lock:
                out.write(json.dumps(rec) + "\n")
                out.flush()
            print(f"{r['id']}: searched {r['measured']['max_micro_batch']}, fresh {fresh} "
                  f"({rec['seconds']} s)", file=sys.stderr)
        finally:
            with lock:
                in_use[0] -= cap_gb
                lock.notify_all()

    with open(a.out, "a") as out:
        # the largest caps first, so the small ones fill in beside each other at the end
        rows.sort(key=lambda r: -r["memory_cap_bytes"])
        pending = list(rows)
        workers = []

        def worker():
            while True:
                with lock:
                    if not pending:
                        return
                    r = pending.pop(0)
                measure(r, out)

        for _ in range(max(a.jobs, 1)):
            t = threading.Thread(target=worker)
            t.start()
            workers.append(t)
        for t in workers:
            t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
