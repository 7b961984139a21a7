#!/usr/bin/env python3
"""The `pytorch` profile's attention factors from measured attention parts: for each part that
scripts/peer_attention_parts.py timed (scores, softmax, P V of naive attention; SDPA), the
measured time over trainsim's own cost of that op at the same shape (`trainsim roofline`, the
committed H200 hardware profile): for the naive parts, measured / the op's memory time (its
`*_bytes_factor`: the unfused passes, casts and masking of the reference code, relative to one
pass over the op list's bytes); for SDPA in fp32 (PyTorch's memory-efficient kernel, not
FlashAttention), measured / the op's compute time (`attention_core` `*_compute_factor_fp32`).

Shapes used (declared with the measurement, docs/frameworks.md): forward factors are the mean
over the two shapes whose parts run long enough to hide the host (4x16x1024x64 = cs336-medium
micro-batch 4 at 1024 tokens, 1x16x4096x64 = cs336-medium micro-batch 1 at 4096); backward
factors come from the 1x16x4096x64 shape only, because a part's backward is timed as
forward + backward less forward, and at the smaller shape the host's autograd call is not
hidden. Prints the factors; the profile's values are these, rounded to 2 digits.

  python3 scripts/attention-factors.py build/cli/trainsim \
      validate/results/kernel-profiles-2026-12-02/attention-parts.jsonl
"""
import json
import subprocess
import sys

SHAPES = {(4, 16, 1024, 64): (4, 1024), (1, 16, 4096, 64): (1, 4096)}  # -> cs336-medium b, s
BWD_SHAPE = (1, 16, 4096, 64)
OPS = {"scores": "attn.scores", "softmax": "attn.softmax", "pv": "attn.pv", "sdpa": "attn.core"}


def roofline(binary, b, s, precision, attention):
    out = subprocess.run([binary, "roofline", "--gpu", "h200", "--model", "cs336-medium",
                          "--micro-batch", str(b), "--seq-len", str(s), "--precision", precision,
                          "--attention", attention, "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    return {o["name"]: o for o in json.loads(out)["ops"]}


def main(argv):
    binary, parts_file = argv[0], argv[1]
    prof = json.load(open("presets/profiles/h200.json"))
    hbm = 4.8e12
    launch = prof["launch_overhead_us"] * 1e-6
    frac = {"gemm": prof["copy_bw_fraction"], "reduction": prof["reduction_bw_fraction"],
            "reduction_bwd": prof["reduction_bwd_bw_fraction"]}
    rows = [json.loads(l) for l in open(parts_file) if l.strip()]
    factors = {}
    for r in rows:
        shape = (r["batch"], r["heads"], r["seq_len"], r["head_dim"])
        if shape not in SHAPES:
            continue
        b, s = SHAPES[shape]
        naive = roofline(binary, b, s, r["precision"], "naive")
        flash = roofline(binary, b, s, r["precision"], "flash")
        for part, m in r["parts"].items():
            for pas in ("fwd", "bwd"):
                if pas == "bwd" and shape != BWD_SHAPE:
                    continue
                op = (flash if part == "sdpa" else naive)[f"{OPS[part]}.{pas}"]
                measured = m[f"{pas}_s"]
                if part == "sdpa":
                    if r["precision"] != "fp32":
                        continue
                    launches = 2 if pas == "bwd" else 1
                    model_s = op["time_s"] - launches * launch  # compute-bound
                    key = ("attention_core", f"{pas}_compute_factor_fp32")
                else:
                    kind = "reduction" if part == "softmax" else "gemm"
                    if kind == "reduction" and pas == "bwd":
                        kind = "reduction_bwd"
                    model_s = op["bytes"] / (hbm * frac[kind])  # the op's memory time
                    role = {"scores": "attention_scores", "softmax": "attention_softmax",
                            "pv": "attention_pv"}[part]
                    suffix = "_fp32" if r["precision"] == "fp32" else ""
                    key = (role, f"{pas}_bytes_factor{suffix}")
                factors.setdefault(key, []).append(measured / model_s)
    for (role, field), v in sorted(factors.items()):
        print(f"{role}.{field} = {sum(v) / len(v):.2f}  (" +
              ", ".join(f"{x:.2f}" for x in v) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
