#!/usr/bin/env python3
"""Derives presets/frameworks/deepspeed.json from the profiles of the eager model it wraps.

No DeepSpeed run is measured for trainsim (the lent GPUs have no DeepSpeed), so nothing of the
`deepspeed` profile is fitted. What DeepSpeed runs is measured, though: an eager PyTorch
decoder. DeepSpeed's bf16 mode casts the module to bf16 and runs no autocast
(deepspeed/runtime/engine.py, _configure_distributed_model: self.module.bfloat16(); the fp32
master weights live in the ZeRO optimizer), the dtype policy of the `fsdp` profile's eager
decoder (FSDP2's MixedPrecisionPolicy(param_dtype=bf16), no autocast). So the profile takes:

- from `fsdp`: the model's code, measured on the lent GPU (per-role kernels, bytes and saved
  bytes, PyTorch's SDPA factors, the activation factors, the eager model's transient bytes,
  keys and values at every query head's width); not FSDP2's own copies or its pipeline rule;
- from `pytorch`: the host model and its fitted per-kernel, per-checkpoint and per-op-checkpoint
  costs (eager dispatch and autograd without FSDP2's per-unit hooks).

DeepSpeed's own hooks (ZeRO-3's per-module fetch and release, ZeRO-1/2's per-parameter gradient
hooks) are not priced; the profile's caveat says so. Everything else (name, source, states,
ZeRO stages, caveats) is the profile's own, kept from BASE.

Usage: derive-deepspeed-profile.py BASE FSDP PYTORCH OUT
  (scripts/fit-frameworks.sh runs it after refitting fsdp and pytorch, so OUT follows them;
  ctest checks the committed file is exactly what this writes.)
"""
import json
import sys

FROM_FSDP = [
    "roles",
    "gpu_sdpa_time_factors",
    "activation_bytes_factor",
    "activation_bytes_factor_fp32",
    "expand_kv_heads",
    "ffn_bwd_transient_tensors",
    "logits_peak_bytes_per_elem",
    "logits_peak_bytes_per_elem_fp32",
    "score_bwd_transient_bytes",
    "score_bwd_transient_bytes_fp32",
]
FROM_PYTORCH = [
    "host_model",
    "host_us_per_kernel",
    "host_bwd_kernel_factor",
    "host_us_per_checkpoint",
    "host_us_per_sac_kernel",
]


def main() -> int:
    if len(sys.argv) != 5:
        print("usage: derive-deepspeed-profile.py BASE FSDP PYTORCH OUT", file=sys.stderr)
        return 2
    base_path, fsdp_path, pytorch_path, out_path = sys.argv[1:]
    with open(base_path) as f:
        profile = json.load(f)
    with open(fsdp_path) as f:
        fsdp = json.load(f)
    with open(pytorch_path) as f:
        pytorch = json.load(f)
    for source, keys, name in ((fsdp, FROM_FSDP, fsdp_path), (pytorch, FROM_PYTORCH, pytorch_path)):
        for k in keys:
            if k not in source:
                print(f"{name}: has no '{k}' to derive the deepspeed profile from", file=sys.stderr)
                return 1
            profile[k] = source[k]
    with open(out_path, "w") as f:
        json.dump(profile, f, indent=2, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
