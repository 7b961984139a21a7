#!/usr/bin/env python3
"""The PyTorch profiles' SDPA time factors on a GPU (`gpu_sdpa_time_factors`), from PyTorch's
scaled_dot_product_attention timed over causal training shapes (scripts/peer_sdpa.py --grid,
default backend: the one PyTorch picks, cuDNN on the H200 with torch 2.11): for each head dim
(64: cs336-medium's 16 heads; 128: Llama 3.1 8B's 32) and pass, the geometric mean over
sequences 1024 to 8192 (the range of the device runs) of the measured time over trainsim's own
attention time at the same shape (`trainsim roofline`, rows attn.core, the committed hardware
profile of that GPU). Prints the factors and the spread over the sequences; the profiles' values
are these, rounded to 2 digits. An optional fourth argument names the grid's backend to read
(default: `default`, the backend PyTorch picks; `cudnn`: cuDNN's alone, the fused attention
Transformer Engine runs on Hopper, tried for the megatron profile and not kept (validate/JOURNAL.md):
docs/frameworks.md, "Fit/test split").

  python3 scripts/sdpa-factors.py build/cli/trainsim validate/results/runs-2026-12-03/sdpa-grid.json h200
  python3 scripts/sdpa-factors.py build/cli/trainsim validate/results/runs-2026-12-03/sdpa-grid.json h200 cudnn
"""
import json
import math
import subprocess
import sys

MODELS = {(16, 64): "cs336-medium", (32, 128): "llama3.1-8b"}


def main(argv):
    binary, grid_file, gpu = argv[0], argv[1], argv[2]
    backend = argv[3] if len(argv) > 3 else "default"
    grid = json.load(open(grid_file))
    if not any(m["backend"] == backend for m in grid["measurements"]):
        sys.exit(f"{grid_file}: no measurements of backend '{backend}'")
    measured = {}
    for m in grid["measurements"]:
        if m["backend"] == backend and m["causal"]:
            measured[(m["num_heads"], m["head_dim"], m["batch_size"], m["seq_len"],
                      m["direction"])] = m["median_s"]
    ratios = {}
    for (h, d, b, s, direction), t in sorted(measured.items()):
        if not 1024 <= s <= 8192 or (h, d) not in MODELS:
            continue
        out = subprocess.run([binary, "roofline", "--gpu", gpu, "--model", MODELS[(h, d)],
                              "--micro-batch", str(b), "--seq-len", str(s), "--format", "json"],
                             capture_output=True, text=True, check=True).stdout
        ops = {o["name"]: o for o in json.loads(out)["ops"]}
        ratios.setdefault((d, direction), []).append(t / ops[f"attn.core.{direction}"]["time_s"])
    factors = {}
    for (d, direction), r in sorted(ratios.items()):
        g = math.exp(sum(math.log(x) for x in r) / len(r))
        factors[f"{direction}_{d}"] = round(g, 2)
        print(f"{direction}_{d} = {g:.3f}  (over {len(r)} sequences: "
              f"{', '.join(f'{x:.2f}' for x in r)})")
    print(json.dumps({gpu: factors}))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
