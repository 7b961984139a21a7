"""The memory a GPU offers a training process, as the driver and PyTorch see it (a measuring
peer, not part of trainsim): NVML's total (nvidia-smi memory.total), the device's total
(cudaGetDeviceProperties via torch), what is free once the CUDA context exists
(cudaMemGetInfo), and how much one process can hold in allocations of decreasing size until
the next fails. trainsim's GPU presets give the capacity in bytes; this says which figure of
a datasheet ("80GB", "141GB") that is. Usage: peer_gpu_memory.py --output FILE.json"""
import argparse
import json
import subprocess

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--output", required=True)
args = ap.parse_args()

smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,memory.reserved,memory.used",
                      "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
name, total_mib, reserved_mib, used_mib = [x.strip() for x in smi.splitlines()[0].split(",")]
torch.cuda.init()
props = torch.cuda.get_device_properties(0)
free_b, total_b = torch.cuda.mem_get_info()
held, blocks = [], 0
for size in (1 << 30, 1 << 26, 1 << 21):  # 1 GiB, then 64 MiB, then 2 MiB pieces
    while True:
        try:
            held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
            blocks += size
        except torch.OutOfMemoryError:
            break
after_free, _ = torch.cuda.mem_get_info()
rec = {
    "gpu": name,
    "nvml_total_mib": int(total_mib),
    "nvml_reserved_mib": int(reserved_mib),
    "nvml_used_mib_before": int(used_mib),
    "device_total_bytes": props.total_memory,
    "mem_get_info_total_bytes": total_b,
    "free_after_context_bytes": free_b,
    "allocatable_bytes": blocks,
    "free_after_filling_bytes": after_free,
    "torch": torch.__version__,
}
print(json.dumps(rec, indent=1))
json.dump(rec, open(args.output, "w"), indent=1)
