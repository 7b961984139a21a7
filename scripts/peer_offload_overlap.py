#!/usr/bin/env python3
"""Host-link copies beside compute on one GPU: the two things activation offload leans on. PyTorch
is the measuring peer here; it is never a trainsim dependency.

Megatron-Core's activation CPU offload (Transformer Engine's offload handler) copies saved
activations to pinned host memory on a side stream while the forward runs, and back while the
backward runs. trainsim prices each way at the GPU preset's host-link bandwidth
(pcie_bandwidth_gb_per_s) and adds only what exceeds the pass beside it, with no slowdown of the
compute (docs/model.md). This measures, on the lent GPU:

  - device-to-host and host-to-device copies of pinned memory alone, and both at once;
  - a chain of bf16 GEMMs alone;
  - the same chain with copies running the whole time on a side stream (each direction): the
    GEMMs' slowdown and the copies' bandwidth beside them.

Times are CUDA events, medians of --reps; every copy and GEMM is checked once against its
source (copies bit-exact, the GEMM against a float64 reference on a slice).

  python3 scripts/peer_offload_overlap.py --output offload-overlap.json
"""
import argparse
import json
import statistics
import sys


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", required=True)
    ap.add_argument("--copy-mb", type=int, default=1024, help="bytes per copy (MiB)")
    ap.add_argument("--gemm", type=int, default=8192, help="m = n = k of each bf16 GEMM")
    ap.add_argument("--gemms", type=int, default=200, help="GEMMs per timed chain")
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args(argv)

    import torch

    dev = torch.device("cuda")
    nbytes = a.copy_mb << 20
    host_out = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    host_in = torch.randint(0, 255, (nbytes,), dtype=torch.uint8).pin_memory()
    dev_src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=dev)
    dev_dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    n = a.gemm
    x = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, n, device=dev, dtype=torch.bfloat16) / n**0.5
    y = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    side_d2h = torch.cuda.Stream()
    side_h2d = torch.cuda.Stream()
    main_s = torch.cuda.current_stream()

    # Correctness once: copies bit-exact, the GEMM against float64 on a slice.
    host_out.copy_(dev_src, non_blocking=True)
    dev_dst.copy_(host_in, non_blocking=True)
    torch.mm(x, w, out=y)
    torch.cuda.synchronize()
    assert torch.equal(host_out, dev_src.cpu()), "device-to-host copy differs"
    assert torch.equal(dev_dst.cpu(), host_in), "host-to-device copy differs"
    ref = x[:64].double() @ w.double()
    err = ((y[:64].double() - ref).norm() / ref.norm()).item()
    assert err < 1e-2, f"GEMM relative error {err}"

    def ev():
        return torch.cuda.Event(enable_timing=True)

    def copies(stream, direction, count):
        with torch.cuda.stream(stream):
            for _ in range(count):
                if direction == "d2h":
                    host_out.copy_(dev_src, non_blocking=True)
                else:
                    dev_dst.copy_(host_in, non_blocking=True)

    def timed_copies(direction, count=4):
        stream = side_d2h if direction == "d2h" else side_h2d
        s, e = ev(), ev()
        stream.wait_stream(main_s)
        s.record(stream)
        copies(stream, direction, count)
        e.record(stream)
        torch.cuda.synchronize()
        return count * nbytes / (s.elapsed_time(e) / 1e3)

    def both_directions(count=4):
        s1, e1, s2, e2 = ev(), ev(), ev(), ev()
        side_d2h.wait_stream(main_s)
        side_h2d.wait_stream(main_s)
        s1.record(side_d2h)
        s2.record(side_h2d)
        copies(side_d2h, "d2h", count)
        copies(side_h2d, "h2d", count)
        e1.record(side_d2h)
        e2.record(side_h2d)
        torch.cuda.synchronize()
        return (count * nbytes / (s1.elapsed_time(e1) / 1e3),
                count * nbytes / (s2.elapsed_time(e2) / 1e3))

    def gemm_chain(beside=None, gemms=None, n_copies=0):
        # GEMMs on the main stream; with `beside`, n_copies copies of that direction queued on a
        # side stream at the same moment (the side stream is timed apart).
        gemms = gemms or a.gemms
        s, e = ev(), ev()
        cs, ce = ev(), ev()
        torch.cuda.synchronize()
        if beside:
            stream = side_d2h if beside == "d2h" else side_h2d
            cs.record(stream)
            copies(stream, beside, n_copies)
            ce.record(stream)
        s.record(main_s)
        for _ in range(gemms):
            torch.mm(x, w, out=y)
        e.record(main_s)
        torch.cuda.synchronize()
        gemm_s = s.elapsed_time(e) / 1e3
        out = {"gemm_s": gemm_s, "tflops": gemms * 2 * n**3 / gemm_s / 1e12}
        if beside:
            copy_s = cs.elapsed_time(ce) / 1e3
            out["copy_gb_per_s"] = n_copies * nbytes / copy_s / 1e9
            out["copy_s"] = copy_s
        return out

    for _ in range(2):  # warm-up
        timed_copies("d2h")
        timed_copies("h2d")
        gemm_chain()

    def median(fn, key=None):
        vals = [fn() for _ in range(a.reps)]
        if key is None:
            return statistics.median(vals), vals
        return statistics.median(v[key] for v in vals), vals

    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "copy_bytes": nbytes, "gemm_mnk": n, "gemms_per_chain": a.gemms, "reps": a.reps}
    d2h, _ = median(lambda: timed_copies("d2h"))
    h2d, _ = median(lambda: timed_copies("h2d"))
    pairs = [both_directions() for _ in range(a.reps)]
    res["d2h_alone_gb_per_s"] = d2h / 1e9
    res["h2d_alone_gb_per_s"] = h2d / 1e9
    res["both_d2h_gb_per_s"] = statistics.median(p[0] for p in pairs) / 1e9
    res["both_h2d_gb_per_s"] = statistics.median(p[1] for p in pairs) / 1e9
    # The chain alone and beside each direction's copies, interleaved rep by rep so clock and
    # temperature drift fall on all three alike.
    chain_s = statistics.median(gemm_chain()["gemm_s"] for _ in range(3))
    plan = {}
    for direction in ("d2h", "h2d"):
        bw = res[f"{direction}_alone_gb_per_s"] * 1e9
        # (1) The GEMMs' slowdown: copies queued for twice the chain's time, so every GEMM runs
        # beside them. (2) The copies' bandwidth beside GEMMs: a chain four times as long as
        # the copies, so every copy runs beside GEMMs.
        covering = max(2, int(2 * chain_s * bw / nbytes) + 1)
        few = 4
        long_chain = max(a.gemms, int(4 * a.gemms * (few * nbytes / bw) / chain_s) + 1)
        plan[direction] = (covering, few, long_chain)
    runs = {"alone": [], "d2h": [], "h2d": [], "d2h_bw": [], "h2d_bw": []}
    for _ in range(a.reps):
        runs["alone"].append(gemm_chain())
        for direction in ("d2h", "h2d"):
            covering, few, long_chain = plan[direction]
            runs[direction].append(gemm_chain(direction, n_copies=covering))
            runs[direction + "_bw"].append(gemm_chain(direction, gemms=long_chain, n_copies=few))
    res["gemm_chain_s"] = chain_s
    res["gemm_alone_tflops"] = statistics.median(r["tflops"] for r in runs["alone"])
    for direction in ("d2h", "h2d"):
        res[f"gemm_beside_{direction}_tflops"] = statistics.median(
            r["tflops"] for r in runs[direction])
        res[f"gemm_slowdown_beside_{direction}_pct"] = 100 * (
            res["gemm_alone_tflops"] / res[f"gemm_beside_{direction}_tflops"] - 1)
        res[f"{direction}_beside_gemm_gb_per_s"] = statistics.median(
            r["copy_gb_per_s"] for r in runs[direction + "_bw"])
        res[f"{direction}_beside_gemm_long_chain_gemms"] = plan[direction][2]
    with open(a.output, "w") as f:
        json.dump(res, f, indent=1)
    print(f"{'measure':<36} {'value':>10}")
    for k, v in res.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            print(f"{k:<36} {v:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
