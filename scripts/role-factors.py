#!/usr/bin/env python3
"""The `pytorch` profile's elementwise bytes factors from the parts scripts/peer_role_parts.py
timed (norm, RoPE, SwiGLU, residual add under autocast, the kernels' own durations): for each
part and pass, the measured time over trainsim's memory time of that op at the same shape (the
op's bytes from `trainsim roofline` over the committed H200 profile's bandwidth for its kind:
norm_bw_fraction / norm_bwd_bw_fraction for the norm, elementwise_bw_fraction otherwise), as
scripts/attention-factors.py does for the attention parts. Prints the mean over the recorded
configurations and each one; the profiles' values are these, rounded to 2 digits.

  python3 scripts/role-factors.py build/cli/trainsim validate/results/runs-2026-12-03/role-parts.jsonl
"""
import json
import subprocess
import sys

OPS = {"norm": "attn.norm", "rope": "attn.rope", "ffn_act": "mlp.swiglu",
       "residual": "attn.residual"}  # part -> the op list's op (role of the same name)


def main(argv):
    binary, parts_file = argv[0], argv[1]
    prof = json.load(open("presets/profiles/h200.json"))
    hbm = 4.8e12
    factors = {}
    for line in open(parts_file):
        if not line.strip():
            continue
        r = json.loads(line)
        out = subprocess.run([binary, "roofline", "--gpu", "h200", "--model", r["model"],
                              "--micro-batch", str(r["batch"]), "--seq-len", str(r["seq_len"]),
                              "--format", "json"], capture_output=True, text=True,
                             check=True).stdout
        ops = {o["name"]: o for o in json.loads(out)["ops"]}
        for part, name in OPS.items():
            for pas in ("fwd", "bwd"):
                frac = prof["elementwise_bw_fraction"]
                if part == "norm":
                    frac = prof["norm_bw_fraction" if pas == "fwd" else "norm_bwd_bw_fraction"]
                memory_s = ops[f"{name}.{pas}"]["bytes"] / (hbm * frac)
                factors.setdefault((part, pas), []).append(r["parts"][part][f"{pas}_s"] / memory_s)
    for (part, pas), v in sorted(factors.items()):
        print(f"{part}.{pas}_bytes_factor = {sum(v) / len(v):.2f}  (" +
              ", ".join(f"{x:.2f}" for x in v) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
