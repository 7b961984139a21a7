#!/usr/bin/env python3
"""Where the CUDA driver placed each segment PyTorch's caching allocator cudaMalloc'd, from an
allocator trace recorded with addresses (scripts/peer_allocator_trace.py --addresses: ID.trace
and ID.addr, one address per trace line). Prints how many new segments lay below every
segment made before them (at lower addresses), how many above every one, and how many in
between (in a gap left by a freed or partly used range). PyTorch's best fit takes the lowest
address among equal free blocks, so this order decides which of two equal blocks serves a
request (simulate/allocator.hpp, SegmentPlacement; docs/frameworks.md).

  python3 scripts/segment-placement.py validate/results/fixtures/allocator-traces-addresses/*.trace.gz
(recorded traces and address files are stored gzip-compressed; plain ones are read too)
"""
import gzip
import sys


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    return (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode()


def placement(trace_path):
    stem = trace_path[:-len(".gz")] if trace_path.endswith(".gz") else trace_path
    addr_path = stem[:-len(".trace")] + ".addr" + (".gz" if trace_path.endswith(".gz") else "")
    lines, addrs = read_text(trace_path).splitlines(), read_text(addr_path).splitlines()
    if len(lines) != len(addrs):
        raise SystemExit(f"{addr_path}: {len(addrs)} lines, the trace has {len(lines)}")
    below = above = between = 0
    lo = hi = None
    for line, addr in zip(lines, addrs):
        if not line.startswith("s "):
            continue
        x = int(addr)
        if lo is None:
            lo = hi = x
            continue
        if x < lo:
            below += 1
        elif x > hi:
            above += 1
        else:
            between += 1
        lo, hi = min(lo, x), max(hi, x)
    return below, above, between


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    for path in argv:
        below, above, between = placement(path)
        n = below + above + between
        print(f"{path.rsplit('/', 1)[-1]}: {n} segments after the first: {below} below every "
              f"earlier one ({100 * below / max(n, 1):.0f}%), {above} above, {between} between")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
