#!/usr/bin/env python3
"""Does an out-of-memory step leave memory behind for the next probe of an OOM search?

scripts/peer_framework_runs.py --oom-search probes batch sizes in one process, caps in
increasing order, so most probes under the 40 and 80 GB caps follow a step that failed. This
check runs, in one process, the same `runs()` sequence the search uses: batch B uncapped, then
batch F under the cap (expected to fail), then batch B under the cap again, and prints the
allocated bytes before each probe and each probe's peak. Equal peaks for the two B probes mean
the failure left nothing behind. PyTorch is the measuring peer, never a trainsim dependency.

  python3 scripts/peer_oom_leak_check.py --framework fsdp --model llama3.2-1b --seq-len 2048 \
      --ok-batch 8 --fail-batch 11 --cap-gb 80
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_framework_runs as peer  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    peer.add_run_options(ap)
    ap.add_argument("--ok-batch", type=int, required=True)
    ap.add_argument("--fail-batch", type=int, default=0,
                    help="0: only one probe of --ok-batch under the cap, in this fresh process")
    ap.add_argument("--cap-gb", type=float, default=80)
    ap.add_argument("--keep-cache", action="store_true",
                    help="do not call torch.cuda.empty_cache() before a probe (the search's "
                         "probes do): the steps start from what the initialisation left cached")
    ap.set_defaults(steps=2, dynamic=False)
    a = ap.parse_args(argv)
    import torch
    total = torch.cuda.get_device_properties(0).total_memory
    model, opt, step, cfg = peer.setup(a)

    def probe(batch, cap_bytes):
        return peer.probe_under_cap(opt, step, a.steps, batch, cap_bytes, total,
                                    empty_cache=not a.keep_cache)

    cap = a.cap_gb * 1e9
    rows = [probe(a.ok_batch, cap)] if a.fail_batch == 0 else [
        probe(a.ok_batch, total), probe(a.fail_batch, cap), probe(a.ok_batch, cap),
        probe(a.fail_batch, cap), probe(a.ok_batch, cap)]
    print(json.dumps({"framework": a.framework, "model": a.model, "seq_len": a.seq_len,
                      "precision": a.precision, "empty_cache": not a.keep_cache, "probes": rows}))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
