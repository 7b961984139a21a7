#!/usr/bin/env python3
"""Writes fresh-process OOM boundaries into the recorded pairs they re-measured.

Reads the JSON lines of scripts/peer_oom_fresh_boundary.py and, for each pair with a fresh
boundary, adds to that row's `measured` (in place, other fields untouched):
`fresh_max_micro_batch`, `fresh_boundary_probes` (batch -> ran, peaks) and the peaks at the
fresh boundary (`fresh_boundary_peak_allocated_bytes`, `fresh_boundary_peak_reserved_bytes`).
The search's own answer and peaks stay in the row; trainsim's reader takes the fresh boundary
over them (docs/frameworks.md). Lines measured by a user's training loop (the script's
--steps 4 --keep-cache: "empty_cache": false) go to `loop_max_micro_batch` and
`loop_boundary_probes` instead, beside the probes' fields, and the reader scores that boundary.

  python3 scripts/merge-oom-fresh.py FRESH.jsonl OOM.jsonl [OOM.jsonl ...]
"""
import json
import sys


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    fresh = {}
    with open(argv[0]) as f:
        for line in f:
            r = json.loads(line)
            if r.get("fresh_max_micro_batch") is not None:
                fresh[r["id"]] = r
    merged = 0
    for path in argv[1:]:
        with open(path) as f:
            lines = f.read().splitlines()
        out = []
        for line in lines:
            row = json.loads(line)
            r = fresh.get(row.get("id"))
            if r is not None and "measured" in row:
                m = row["measured"]
                b = r["fresh_max_micro_batch"]
                if r.get("empty_cache") is False:  # a user's training loop
                    m["loop_max_micro_batch"] = b
                    m["loop_boundary_probes"] = r["fresh_probes"]
                    m["loop_steps"] = r.get("steps")
                    out.append(json.dumps(row))
                    merged += 1
                    continue
                m["fresh_max_micro_batch"] = b
                m["fresh_boundary_probes"] = r["fresh_probes"]
                at = r["fresh_probes"].get(str(b))
                if b > 0 and at and at.get("peak_allocated_bytes") is not None:
                    m["fresh_boundary_peak_allocated_bytes"] = at["peak_allocated_bytes"]
                    m["fresh_boundary_peak_reserved_bytes"] = at["peak_reserved_bytes"]
                line = json.dumps(row)
                merged += 1
            out.append(line)
        with open(path, "w") as f:
            f.write("\n".join(out) + "\n")
    print(f"merged {merged} of {len(fresh)} fresh boundaries", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
