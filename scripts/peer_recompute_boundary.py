#!/usr/bin/env python3
"""The least full recompute that lets a step fit under a cap, measured one fresh process per probe.

`trainsim memory` says how many layers must be fully recomputed for a step to fit
(`min_recompute_layers`). This script measures that answer on the local GPU for each
configuration of a plan (scripts/framework-recompute-boundary.json), as declared in
docs/frameworks.md ("The least full recompute that fits, measured at a cap"):

1. the step uncapped, in fresh processes, with no recompute and with every layer recomputed;
   the cap is the mean of the two peaks reserved, rounded down to 0.25 GB (no trainsim figure
   enters it);
2. under that cap (torch.cuda.set_per_process_memory_fraction), each probe a fresh process of
   scripts/peer_oom_leak_check.py running two steps: no recompute (answer 0 if it runs), then
   every layer (answer -1 if it fails), then bisection on N, the first N layers checkpointed;
   the answer is the least N that ran with N - 1 failing, both probed.

Output: one JSON line per configuration in the framework-run format (docs/frameworks.md), with
`memory_cap_bytes`, `measured.min_recompute_layers`, the answer's own probe as `recompute`
(and `recompute_layers` where it is some layers only) with its peaks under the cap, every probe
and the two uncapped peaks. --cap-at places the cap elsewhere between the two uncapped peaks,
and --uncapped-from takes them from an earlier call's output. A configuration is skipped once
the time budget is spent. PyTorch is the measuring peer, never a trainsim dependency.

  python3 scripts/peer_recompute_boundary.py --plan scripts/framework-recompute-boundary.json \\
      --out recompute-boundary.jsonl --budget-s 540
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from peer_oom_fresh_boundary import fresh_probe  # noqa: E402
UNCAPPED_GB = 1e6  # set_per_process_memory_fraction(1.0)


def probe(cfg, layers, cap_gb, timeout_s):
    """Two steps in a fresh process: layers -1 = no recompute, 0 = every layer, N = the first N.
    Returns {ok, peak_allocated_bytes, peak_reserved_bytes} or None (timeout, crash)."""
    rc = ["--recompute", "none"] if layers < 0 else ["--recompute", "full",
                                                      "--recompute-layers", str(layers)]
    return fresh_probe(["--framework", cfg["framework"], "--model", cfg["model"],
                        "--seq-len", str(cfg["seq_len"]),
                        "--precision", cfg.get("precision", "bf16-mixed"),
                        "--attention", cfg.get("attention", "flash"), *rc,
                        "--ok-batch", str(cfg["batch"]), "--cap-gb", str(cap_gb), "--steps", "2"],
                       timeout_s)


def boundary(cfg, num_layers, timeout_s, deadline, cap_at=0.5, uncapped=None):
    """(cap_bytes, uncapped peaks, probes by N, answer) or None where a probe did not finish.
    The cap lies cap_at of the way from the uncapped peak reserved with every layer recomputed
    to the one without recompute (0.5: their mean), rounded down to 0.25 GB; `uncapped` (the
    two probes of an earlier call) spares measuring them again."""
    def run(layers, cap_gb):
        if time.time() >= deadline:
            return None
        return probe(cfg, layers, cap_gb, timeout_s)

    if uncapped is None:
        uncapped = {"none": run(-1, UNCAPPED_GB), "all": run(0, UNCAPPED_GB)}
    none, every = uncapped["none"], uncapped["all"]
    if none is None or every is None or not none["ok"] or not every["ok"]:
        return None
    lo_b, hi_b = every["peak_reserved_bytes"], none["peak_reserved_bytes"]
    cap = math.floor((lo_b + cap_at * (hi_b - lo_b)) / 0.25e9) * 0.25e9
    probes = {}

    def at(n):  # n = 0: no recompute; num_layers: every layer
        if n not in probes:
            p = run(-1 if n == 0 else (0 if n == num_layers else n), cap / 1e9)
            if p is None:
                return None
            probes[n] = p
        return probes[n]["ok"]

    ok0 = at(0)
    if ok0 is None:
        return None
    if ok0:
        return cap, uncapped, probes, 0
    okall = at(num_layers)
    if okall is None:
        return None
    if not okall:
        return cap, uncapped, probes, -1
    lo, hi = 0, num_layers  # fails at lo, runs at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok = at(mid)
        if ok is None:
            return None
        lo, hi = (lo, mid) if ok else (mid, hi)
    return cap, uncapped, probes, hi


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=540)
    ap.add_argument("--probe-timeout-s", type=float, default=120)
    ap.add_argument("--only", help="comma-separated 1-based positions in the plan")
    ap.add_argument("--cap-at", type=float, default=0.5,
                    help="the cap's place between the uncapped peaks reserved with every layer "
                         "recomputed (0) and without recompute (1)")
    ap.add_argument("--uncapped-from", help="this script's output of an earlier call: take the "
                                            "uncapped probes from it (by id) instead of measuring")
    a = ap.parse_args(argv)
    if not 0 < a.cap_at < 1:
        ap.error("--cap-at must lie strictly between 0 and 1")
    known = {}
    if a.uncapped_from:
        with open(a.uncapped_from) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    known[r["id"]] = r["measured"]["uncapped"]
    deadline = time.time() + a.budget_s
    with open(a.plan) as f:
        plan = json.load(f)
    only = {int(x) for x in a.only.split(",")} if a.only else None
    import torch
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda,
                "gpu_name": torch.cuda.get_device_name(0)}
    for i, cfg in enumerate(plan, 1):
        if only and i not in only:
            continue
        with open(os.path.join(ROOT, "presets", "models", cfg["model"] + ".json")) as f:
            num_layers = int(json.load(f)["num_layers"])
        prec, attn = cfg.get("precision", "bf16-mixed"), cfg.get("attention", "flash")
        b = cfg["batch"]
        base_id = f"rcb-{cfg['framework']}-{cfg['model']}-{prec}-{attn}-b{b}-s{cfg['seq_len']}"
        t0 = time.time()
        res = boundary(cfg, num_layers, a.probe_timeout_s, deadline, a.cap_at, known.get(base_id))
        if res is None:
            print(f"[{i}] {cfg['framework']} {cfg['model']}: not finished (budget or a probe failed)",
                  file=sys.stderr)
            continue
        cap, uncapped, probes, answer = res
        at = probes.get(answer if answer >= 0 else num_layers, {})
        row = {"framework": cfg["framework"], "model": cfg["model"], "gpu": "h200", "num_gpus": 1,
               "precision": prec, "seq_len": cfg["seq_len"], "micro_batch": b, "global_batch": b,
               "tp": 1, "pp": 1, "cp": 1, "dp": 1, "zero_stage": 0,
               # the answer's own probe: none (0), the first N layers, or every layer (-1, all)
               "recompute": "none" if answer == 0 else "full",
               **({"recompute_layers": answer} if 0 < answer < num_layers else {}),
               "attention": attn,
               "source": f"scripts/peer_recompute_boundary.py on the device ({time.strftime('%Y-%m-%d')})",
               "versions": versions,
               "id": base_id + ("" if a.cap_at == 0.5 else f"-at{round(100 * a.cap_at)}"),
               "memory_cap_bytes": cap,
               "measured": {"min_recompute_layers": answer, "num_layers": num_layers,
                            "cap_rule": "mean of the uncapped peaks reserved (none, all), "
                                        "rounded down to 0.25 GB" if a.cap_at == 0.5 else
                                        f"all + {a.cap_at:g} (none - all) of the uncapped peaks "
                                        "reserved, rounded down to 0.25 GB",
                            **({"uncapped_from": a.uncapped_from} if base_id in known else {}),
                            "probes": {str(k): v for k, v in sorted(probes.items())},
                            "uncapped": uncapped, "search_s": round(time.time() - t0, 1)}}
        if answer >= 0 and at.get("ok"):
            row["measured"]["peak_allocated_bytes"] = at["peak_allocated_bytes"]
            row["measured"]["peak_reserved_bytes"] = at["peak_reserved_bytes"]
        with open(a.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"[{i}] {row['id']}: cap {cap / 1e9:.2f} GB, min recompute layers {answer} "
              f"of {num_layers} ({len(probes) + 2} probes, {time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
