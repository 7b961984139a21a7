#!/usr/bin/env python3
"""Derives an allocation program from two allocator traces of the same training loop.

A PyTorch eager step makes and frees the same blocks, in the same order, for every transformer
layer: the forward of each layer (under the activation checkpoint, with full recompute), and the
backward of each layer (its re-made forward, then its backward). This script cuts step 2 of each
trace (scripts/peer_allocator_trace.py) into those per-layer windows and the four parts around
them (the embedding's forward, the head's and loss's forward, their backward, the embedding's
backward), reads the tensors made before the first step (the parameters as the model registers
them), the token batch made again after every step and the blocks only the first step makes
(cuBLAS's workspaces), checks that the two traces agree event for event, expresses every block
size as a formula of the configuration (batch B, sequence S, hidden D, FFN width F, heads H,
vocabulary V: bytes = coefficient x one product of them; library workspaces affine in D or in
B x S through both traces), and writes the program trainsim's generated step plays
(simulate/alloc_program.hpp; docs/frameworks.md, "The caching allocator").

FSDP2 traces (framework fsdp, one GPU) repeat their backward window for the middle layers
only: the top layer's backward is read into the head's backward part and layer 0's into the
embedding's ("backward_windows": "middle"), each forward window keeps its own output, the next
layer's checkpointed input ("forward_kept": "output"), blocks carry the stream they were made on
when it is not the default one, sizes may be multiples of one layer's parameters (P) or of the
root unit's (R), the sharded gradients' frees after the backward are kept as recorded
("zero_grad_order": {"sequence": ...}), and so is FSDP2's initialisation ("init_sequence": the
unsharded parameters made, each layer sharded and its unsharded parameters freed, the root's).

Usage: scripts/derive-alloc-program.py TRACE_A TRACE_B OUT.json
Each trace's header names its model (presets/models/<model>.json gives D, F, H, V, layers),
micro-batch and sequence length. Stdlib only; exits non-zero, naming what disagrees, when the two
traces do not give one program.
"""
import gzip
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# Products a block's size may be a multiple of, most specific first (a tie goes to the first).
MONOMIALS = ["BHSS", "BSV", "BSD", "BSF", "BHS", "BS", "SS", "VD", "R", "P", "DD", "DF", "V", "F", "D",
             "S", "H", "B", "1"]
UNRESOLVED = []
COEFFICIENTS = [0.5, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256]


def die(msg):
    sys.stderr.write("derive-alloc-program: " + msg + "\n")
    sys.exit(1)


def load(path):
    with open(path, "rb") as f:  # recorded traces are stored gzip-compressed
        data = f.read()
    lines = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode().split("\n")
    if not lines or not lines[0].startswith("# "):
        die(f"{path}: no '# {{json}}' header")
    head = json.loads(lines[0][2:])
    with open(os.path.join(ROOT, "presets", "models", head["model"] + ".json")) as f:
        model = json.load(f)
    dims = {"B": head["micro_batch"], "S": head["seq_len"], "D": model["hidden_size"],
            "F": model["ffn_hidden_size"], "H": model["num_heads"], "L": model["num_layers"],
            "V": model["vocab_size"]}
    # P: one layer's parameters (4 D x D attention projections, 3 D x F feed-forward matrices,
    # two norms), the size of FSDP2's per-layer flat buffers; the recorded layer's shape.
    dims["P"] = 4 * dims["D"] * dims["D"] + 3 * dims["D"] * dims["F"] + 2 * dims["D"]
    # R: the root unit's parameters (embedding, LM head, final norm), FSDP2's root buffers.
    dims["R"] = 2 * dims["V"] * dims["D"] + dims["D"]
    # FSDP2's backward repeats one window for the middle layers only: the top layer's (its
    # gradient from the head, no layer above to prefetch after) and layer 0's (the root's
    # reduce-scatter after it) differ, and are read as parts of the head's and the embedding's
    # backward.
    dims["NB"] = dims["L"] - 2 if head.get("framework") == "fsdp" else dims["L"]
    events, markers, sizes = [], {}, {}
    for n, line in enumerate(lines[1:], start=2):
        p = line.split()
        if not p:
            continue
        if p[0] == "a":
            sizes[p[2]] = int(p[1])
            # (kind, block, bytes, CUDA stream: the reduce-scatter's is not the default one)
            events.append(("a", p[2], int(p[1]), int(p[3]) if len(p) > 3 else 0))
        elif p[0] == "f":
            events.append(("f", p[1], sizes.get(p[1], 0), 0))
        elif p[0] == "m":
            markers[(int(p[1]), p[2])] = len(events)
    return head, dims, events, markers


def value(mono, d):
    v = 1
    for ch in mono:
        if ch != "1":
            v *= d[ch]
    return v


def region(events, markers, step, begin, end, path):
    if (step, begin) not in markers or (step, end) not in markers:
        die(f"{path}: no step {step} {begin}..{end} markers")
    return events[markers[(step, begin)]:markers[(step, end)]]


def windows(ev, layers, path, what):
    """The layer windows of a region: the longest period P with `layers` equal windows of P
    events, cut where the fewest blocks cross from one window to the next."""
    toks = [(k, s, st) for k, _, s, st in ev]
    n = len(toks)
    for period in range(n // layers, 9, -1):
        starts = [s for s in range(0, n - layers * period + 1)
                  if all(toks[s + i] == toks[s + i + w * period]
                         for w in range(1, layers) for i in range(period))]
        if starts:
            break
    else:
        die(f"{path}: the {what} does not repeat {layers} times")

    def crossing(s):  # blocks of window 1 made in window 0
        made = {ev[i][1] for i in range(s, s + period) if ev[i][0] == "a"}
        return sum(1 for i in range(s + period, s + 2 * period)
                   if ev[i][0] == "f" and ev[i][1] in made)
    start = min(starts, key=lambda s: (crossing(s), s))
    return start, period


def program(ev, start, period, layers):
    """Window 1's events (a middle layer) with each free named: a block of this window, of the
    window before (the layer above in backward order / below in forward order), or from before
    the layers."""
    w0, w1 = start + period, start + 2 * period
    local, prev = {}, {}
    for i in range(start, w0):
        if ev[i][0] == "a":
            prev[ev[i][1]] = len(prev)
    out = []
    for i in range(w0, w1):
        kind, bid, size, stream = ev[i]
        if kind == "a":
            local[bid] = len(local)
            out.append(["a", size, stream])
        elif bid in local:
            out.append(["f", local[bid]])
        elif bid in prev:
            out.append(["f_prev", prev[bid]])
        else:
            out.append(["f_before", size])
    inside = {ev[i][1] for i in range(w0, w1) if ev[i][0] == "f"}
    kept = {b: local[b] for b in local if b not in inside}
    return out, kept, (start, start + layers * period, len(ev))


def formula(sa, sb, da, db, where, affine=False, affine_d=False):
    for mono in MONOMIALS:
        for c in COEFFICIENTS:
            if c * value(mono, da) == sa and c * value(mono, db) == sb:
                return [c, mono]
    # A block whose size follows none of them (a library workspace) but is nearly the same in
    # both traces: affine in the hidden size through both traces (the two recorded models
    # differ in D; the cached blocks around it are sized to the byte, so the midpoint would not
    # do), within a quarter; else, within a tenth, the larger size as a constant. Both are
    # listed in the program's "fixed" entries.
    if affine_d and da["D"] != db["D"] and sa != sb and max(sa, sb) <= 1.25 * min(sa, sb):
        c = (sa - sb) / (da["D"] - db["D"])
        o = sa - c * da["D"]
        if c > 0 and o > 0:
            UNRESOLVED.append({"where": where, "sizes": [sa, sb], "affine_in": "D"})
            return [c, "D", o]
    if max(sa, sb) <= 1.1 * min(sa, sb):
        UNRESOLVED.append({"where": where, "sizes": [sa, sb]})
        return [max(sa, sb), "1"]
    # A small-pool block (at most 1 MiB; FSDP2's per-layer bookkeeping) that follows none:
    # affine in the layer's parameters through both traces.
    if max(sa, sb) <= 1 << 20 and da["P"] != db["P"]:
        c = (sa - sb) / (da["P"] - db["P"])
        o = sa - c * da["P"]
        if c > 0 and o >= -0.5 * sa:
            UNRESOLVED.append({"where": where, "sizes": [sa, sb], "affine_in": "P"})
            return [c, "P", o]
    # Around the layers, library workspaces (the embedding backward's sort) grow with the tokens
    # but are no multiple of them: affine in B x S through both traces, listed as "fixed" too.
    if affine:
        ta, tb = da["B"] * da["S"], db["B"] * db["S"]
        if ta != tb:
            c = (sa - sb) / (ta - tb)
            o = sa - c * ta
            if c >= 0 and o >= -0.5 * sa:
                UNRESOLVED.append({"where": where, "sizes": [sa, sb], "affine_in": "BS"})
                return [c, "BS", o]
    die(f"{where}: sizes {sa} and {sb} fit no coefficient x {'/'.join(MONOMIALS)}")


PARTS = ["embedding_forward", "head_forward", "head_backward", "embedding_backward"]


def with_stream(event, stream):
    """An allocation made on a stream other than the default one carries it after its offset:
    ["a", coefficient, product, offset, stream]."""
    if stream == 0:
        return event
    return event + [0] * (4 - len(event)) + [stream]


def step_origins(trace, cut):
    """Where each block step 2 makes comes from: (part or "forward"/"backward" window, window
    index, its number among that part's or window's blocks)."""
    head, dims, events, markers = trace
    layers, nb = dims["L"], dims["NB"]
    fs, fe, be = markers[(2, "start")], markers[(2, "forward")], markers[(2, "backward")]
    fstart, fp = cut["forward"]
    bstart, bp = cut["backward"]
    origin, counts = {}, {}
    for i in range(fs, be):
        kind, bid, _, _ = events[i]
        if kind != "a":
            continue
        if i < fs + fstart:
            where, inst = "embedding_forward", 0
        elif i < fs + fstart + layers * fp:
            where, inst = "forward", (i - fs - fstart) // fp
        elif i < fe:
            where, inst = "head_forward", 0
        elif i < fe + bstart:
            where, inst = "head_backward", 0
        elif i < fe + bstart + nb * bp:
            where, inst = "backward", (i - fe - bstart) // bp
        else:
            where, inst = "embedding_backward", 0
        origin[bid] = (where, inst, counts.get((where, inst), 0))
        counts[(where, inst)] = counts.get((where, inst), 0) + 1
    return origin


def around_parts(trace, cut, layer_parts):
    """The parts of step 2 around the layer windows: the forward's before and after the layers
    (the embedding; the head and the loss), the backward's before and after (the loss's and the
    head's backward; the embedding's). Each free names the block it frees: one of the part's
    own ("f"), of an earlier part ("f_part", part, block), the weight casts of every layer's
    forward window, freed together where the first is ("f_casts"), or a block of the last
    backward window played, layer 0's ("f_last", block). Frees of blocks made before the step
    are left out; blocks alive when the backward ends are freed by the step's end."""
    head, dims, events, markers = trace
    layers, nb = dims["L"], dims["NB"]
    fs, fe, be = markers[(2, "start")], markers[(2, "forward")], markers[(2, "backward")]
    fstart, fp = cut["forward"]
    bstart, bp = cut["backward"]
    spans = {"embedding_forward": (fs, fs + fstart),
             "head_forward": (fs + fstart + layers * fp, fe),
             "head_backward": (fe, fe + bstart),
             "embedding_backward": (fe + bstart + nb * bp, be)}
    origin = step_origins(trace, cut)
    casts = {k["block"] for k in layer_parts["forward"]["kept"] if k["until"] == "forward_end"}
    inputs = {k["block"] for k in layer_parts["forward"]["kept"] if k["until"] == "layer_input"}
    freed = {events[i][1] for i in range(fs, be) if events[i][0] == "f"}
    out, top = {}, {}
    for name in PARTS:
        lo, hi = spans[name]
        ev, cast_freed = [], False
        for i in range(lo, hi):
            kind, bid, size, stream = events[i]
            if kind == "a":
                ev.append(["a", size, stream])
                continue
            if bid not in origin:
                continue  # made before the step
            where, inst, k = origin[bid]
            if where == name:
                ev.append(["f", k])
            elif where in PARTS:
                ev.append(["f_part", where, k])
            elif where == "forward" and k in casts:
                if not cast_freed:
                    ev.append(["f_casts"])
                    cast_freed = True
            elif where == "backward" and inst == nb - 1:
                ev.append(["f_last", k])
            elif where == "forward" and k in inputs and name == "head_forward" and \
                    inst == layers - 1 and nb < layers:
                # FSDP2's forward windows each keep their own output (the next layer's
                # checkpointed input): the last one's is the head's input, freed by the head.
                ev.append(["f_input_head"])
            elif where == "forward" and k in inputs and name == "head_backward" and nb < layers:
                # The top layer's backward, read into the head's part, frees the top layer's
                # checkpointed input (its own forward window's kept block).
                ev.append(["f_input_top"])
            else:
                die(f"{name}: frees block {k} of {where} window {inst}, which no rule names")
        kept = sorted(k for bid, (where, inst, k) in origin.items()
                      if where == name and bid not in freed)
        out[name] = {"events": ev, "kept": [{"block": k, "until": "step_end"} for k in kept]}
    # The top layer's backward frees, where a lower layer frees the gradient handed down, the
    # head's: which of the head's backward blocks.
    for pos in range(bp):
        kind, bid, _, _ = events[fe + bstart + pos]
        if kind == "f" and bid in origin and origin[bid][0] == "head_backward":
            top[pos] = origin[bid][2]
    # map event positions to the window program's f_prev block numbers
    prog = layer_parts["backward"]["events"]
    top_prev = {}
    for pos, hk in top.items():
        if prog[pos][0] != "f_prev":
            die(f"the top layer's backward frees head block {hk} at event {pos}, where a lower "
                f"layer does not free the gradient from above")
        top_prev[prog[pos][1]] = hk
    return out, top_prev


def init_blocks(trace):
    """The blocks made before the first step and never freed, in order: the embedding's
    parameters, each layer's (one window per layer), the rest (final norm, LM head), and inputs
    whose size grows with the batch (the token batch). Parameters are fp32 under autocast."""
    head, dims, events, markers = trace
    layers = dims["L"]
    freed = {e[1] for e in events if e[0] == "f"}
    kept = [e[2] for e in events[:markers[(0, "start")]] if e[0] == "a" and e[1] not in freed]
    for first in range(0, len(kept)):
        for period in range(1, (len(kept) - first) // layers + 1):
            win = kept[first:first + period]
            if all(kept[first + w * period:first + (w + 1) * period] == win for w in range(layers)):
                return kept[:first], win, kept[first + layers * period:]
    die("the parameters made before the first step do not repeat once per layer")


INIT_SECTIONS = ["before", "create", "between", "shard", "after"]


def init_sequence(trace):
    """FSDP2's initialisation, event by event (the eager programs keep only what it leaves):
    the model's unsharded parameters made (the embedding, one window per layer, the rest), then
    fully_shard making each layer's shards and freeing its unsharded parameters (one window per
    layer), then the root unit's. Sections before, create (per layer), between, shard (per
    layer), after; a free names [section, block] (per-layer sections: the same layer's). The
    token batch, the last block made, is left to the batch block."""
    head, dims, events, markers = trace
    layers = dims["L"]
    ev = events[:markers[(0, "start")]]

    def repeats(region, min_period):
        toks = [(k, s, st) for k, _, s, st in region]
        n = len(toks)
        for period in range(n // layers, min_period - 1, -1):
            for st in range(0, n - layers * period + 1):
                if all(toks[st + i] == toks[st + i + w * period]
                       for w in range(1, layers) for i in range(period)):
                    return st, period
        return None
    shard = repeats(ev, 2)
    if shard is None:
        die("the initialisation does not repeat once per layer")
    s0, sp = shard
    create = repeats(ev[:s0], 1)
    if create is None:
        die("the parameters are not made once per layer before they are sharded")
    c0, cp = create
    spans = {"before": (0, c0), "create": (c0, c0 + layers * cp), "between": (c0 + layers * cp, s0),
             "shard": (s0, s0 + layers * sp), "after": (s0 + layers * sp, len(ev))}
    where = {}
    out = {}
    for name in INIT_SECTIONS:
        lo, hi = spans[name]
        per = cp if name == "create" else sp if name == "shard" else hi - lo
        events_out, counts = [], {}
        for i in range(lo, hi):
            kind, bid, size, stream = ev[i]
            layer = (i - lo) // per if name in ("create", "shard") else 0
            if kind == "a":
                k = counts.get(layer, 0)
                counts[layer] = k + 1
                where[bid] = (name, layer, k)
                if layer == 0:
                    events_out.append(["a", size])
                continue
            if bid not in where:
                die(f"init {name}: frees a block made before the trace")
            sec, lay, k = where[bid]
            if name in ("create", "shard") and sec in ("create", "shard") and lay != layer:
                die(f"init {name}: layer {layer} frees a block of layer {lay}")
            if layer == 0:
                events_out.append(["f", sec, k])
        out[name] = events_out
    # The token batch is the batch block: the last allocation, never freed.
    if out["after"] and out["after"][-1][0] == "a":
        out["after"].pop()
    return out


def free_order(trace, cut):
    """The order in which step 2 frees, after its backward, what its parts and layer windows
    kept (the gradients, by zero_grad in parameter order; the loss), and the token batch made
    for it before the step (freed last, then made again for the next step)."""
    head, dims, events, markers = trace
    nb = dims["NB"]
    fs, fe, be = markers[(2, "start")], markers[(2, "forward")], markers[(2, "backward")]
    end = markers.get((3, "start"), len(events))
    origin = step_origins(trace, cut)
    made_before = {events[i][1]: events[i][2] for i in range(0, fs) if events[i][0] == "a"}
    seq, batch = [], None
    for i in range(be, end):
        kind, bid, size, _ = events[i]
        if kind != "f":
            continue
        if bid in origin:
            seq.append(origin[bid])
        elif bid in made_before and batch is None and i > be:
            batch = made_before[bid]
    groups = ["embedding_backward"] + [("backward", nb - 1 - l) for l in range(nb)] + \
        ["head_backward", "head_forward"]
    order = {}
    pos = 0
    for g in groups:
        where, inst = (g, 0) if isinstance(g, str) else g
        ks = []
        while pos < len(seq) and seq[pos][:2] == (where, inst):
            ks.append(seq[pos][2])
            pos += 1
        key = "window" if where == "backward" else where
        if key in order and order[key] != ks:
            die(f"the layers free their gradients in different orders: {order[key]} vs {ks}")
        order[key] = ks
    if pos != len(seq):
        if dims["NB"] == dims["L"]:
            die(f"after the backward, step 2 frees {seq[pos:pos + 3]}... out of the order "
                f"embedding, layers 0 to L-1, head")
        # FSDP2 frees the sharded gradients in another order: kept as recorded, the windows'
        # runs as one entry each ("window": the middle layers' blocks, bottom layer first).
        order = {"sequence": []}
        i = 0
        while i < len(seq):
            where, inst, k = seq[i]
            if where == "backward":
                run = []
                while i < len(seq) and seq[i][0] == "backward":
                    run.append(seq[i])
                    i += 1
                want = [("backward", nb - 1 - j, run[0][2]) for j in range(nb)]
                if run != want:
                    die(f"after the backward, the middle layers free {run[:3]}... not one block "
                        f"each from layer 1 up")
                order["sequence"].append(["window", run[0][2]])
                continue
            order["sequence"].append([where, k])
            i += 1
    return order, batch


def first_step_blocks(trace, cut):
    """Blocks the first step makes that no later step does and that are never freed (cuBLAS
    takes a workspace from the caching allocator at the first GEMM of each thread: the forward's
    and the autograd engine's), with where they come in step 2's terms: the part or the first
    forward window, and the event before which they come. Step 0 less these must be step 2,
    the order of the weight casts' frees aside."""
    head, dims, events, markers = trace
    layers = dims["L"]
    freed = {e[1] for e in events if e[0] == "f"}
    lo0, lo2 = markers[(0, "start")], markers[(2, "start")]
    step0 = [(i, events[i]) for i in range(lo0, markers[(0, "backward")])]
    step2 = [events[i] for i in range(lo2, markers[(2, "backward")])]
    extra = [(i, e) for i, e in step0 if e[0] == "a" and e[1] not in freed]
    rest = [e for i, e in step0 if not (e[0] == "a" and e[1] not in freed)]
    key = lambda e: (e[0], e[2])
    if sorted(map(key, rest)) != sorted(map(key, step2)) or \
            [e[0] for e in rest] != [e[0] for e in step2]:
        die("step 0 less its never-freed blocks is not step 2")
    fstart, fp = cut["forward"]
    bstart, bp = cut["backward"]
    flen = markers[(2, "forward")] - lo2
    out = []
    for n, (i, e) in enumerate(extra):
        pos = i - lo0 - n  # in step 2's events
        if pos < fstart:
            out.append(["embedding_forward", pos, e[2]])
        elif pos < fstart + fp:
            out.append(["forward", pos - fstart, e[2]])
        elif flen <= pos < flen + bstart:
            out.append(["head_backward", pos - flen, e[2]])
        else:
            die(f"a first-step block at step event {pos} falls where no rule places it")
    return out


def main():
    if len(sys.argv) != 4:
        die("usage: derive-alloc-program.py TRACE_A TRACE_B OUT.json")
    pa, pb, out_path = sys.argv[1:]
    traces = [load(pa), load(pb)]
    for (head, _, _, _), path in zip(traces, (pa, pb)):
        if head.get("framework") not in ("pytorch", "fsdp"):
            die(f"{path}: header framework is {head.get('framework')!r}, not pytorch or fsdp")
        for key, want in (("precision", "bf16-mixed"), ("recompute", "full")):
            if head.get(key) != want:
                die(f"{path}: header {key} is {head.get(key)!r}, the program is for {want!r}")
        if head.get("attention") not in ("naive", "flash"):
            die(f"{path}: header attention is {head.get('attention')!r}, not naive or flash")
    attention, framework = traces[0][0]["attention"], traces[0][0]["framework"]
    if traces[1][0]["attention"] != attention or traces[1][0]["framework"] != framework:
        die("the two traces ran different attention or frameworks")
    # A size's power of B, S or D is read from how it changes between the two traces: where
    # both share one, a block of B x S x D and one of B x D (times the shared S) fit both alike
    # and the program is wrong elsewhere (an eager flash program derived from two
    # s1024 traces missed PyTorch's peak by up to 20% at s2048 and s4096). V is the recorded
    # vocabulary's, F and H follow D (the program applies only there).
    for dim, what in (("B", "micro-batch"), ("S", "sequence length"), ("D", "hidden size")):
        if traces[0][1][dim] == traces[1][1][dim]:
            die(f"both traces have {what} {dim} = {traces[0][1][dim]}: the two must differ in "
                "B, S and D, or a size's power of it cannot be told from a constant")
    parts, layer_input, cuts = {}, {}, {}
    for name, begin, end in (("forward", "start", "forward"), ("backward", "forward", "backward")):
        progs = []
        for (head, dims, events, markers), path in zip(traces, (pa, pb)):
            ev = region(events, markers, 2, begin, end, path)
            reps = dims["L"] if name == "forward" else dims["NB"]
            start, period = windows(ev, reps, path, name)
            cuts.setdefault(path, {})[name] = (start, period)
            out, kept, (first, last, n) = program(ev, start, period, reps)
            # Where each block that outlives its layer is freed: in the forward after the
            # layers (autocast's cached weight casts), by a later layer's backward (a layer's
            # output, the next layer's saved input; the gradient handed down), or after the
            # backward (weight gradients, freed by zero_grad).
            freed_at = {}
            for i, (kind, bid, _, _) in enumerate(events):
                if kind == "f" and bid in kept:
                    freed_at[bid] = i
            fwd_end, bwd_end = markers[(2, "forward")], markers[(2, "backward")]
            classes = {}
            for bid, k in kept.items():
                i = freed_at.get(bid)
                if i is None or i >= bwd_end:
                    classes[k] = "step_end"
                elif i < fwd_end:
                    classes[k] = "forward_end"
                elif name == "forward":
                    classes[k] = "layer_input"
                else:
                    classes[k] = "next_layer"
            if name == "forward":
                layer_input[path] = [b for b, k in kept.items() if classes[k] == "layer_input"]
            else:
                # The block forward window 1 keeps must be what backward window L - 2 (the same
                # layer, backward runs top down) frees as its input: the binding the generated
                # step uses (allocator.cpp).
                # The backward windows run from the top layer (FSDP2: the one below it) down,
                # so layer 1's is window NB - 2 (eager: L - 2; FSDP2: L - 4).
                base = markers[(2, "forward")] + start
                want = dims["NB"] - 2
                for bid in layer_input[path]:
                    i = next((i for i, e in enumerate(events) if e[0] == "f" and e[1] == bid), -1)
                    w = (i - base) // period if i >= base else -1
                    if w != want:
                        die(f"{path}: forward window 1's kept input is freed in backward window "
                            f"{w}, not {want}")
            progs.append((out, classes, period, (start, n - last)))
        (ea, ka, pa_, ra), (eb, kb, pb_, rb) = progs
        if pa_ != pb_ or ka != kb or [e[0] for e in ea] != [e[0] for e in eb]:
            die(f"the {name} windows differ: {pa_} and {pb_} events")
        da, db = traces[0][1], traces[1][1]
        events = []
        for i, (x, y) in enumerate(zip(ea, eb)):
            if x[0] == "a":
                events.append(with_stream(["a"] + formula(x[1], y[1], da, db, f"{name} event {i}",
                                                          affine_d=True), x[2]))
            elif x[0] == "f_before":
                events.append(["f_input"])
            else:
                if x != y:
                    die(f"{name} event {i}: {x} vs {y}")
                events.append(x)
        inputs = sum(1 for e in events if e[0] == "f_input")
        want = 1 if name == "backward" else 0
        if inputs != want or sum(1 for c in ka.values() if c == "layer_input") != 1 - want:
            die(f"the {name} window frees {inputs} blocks made before the layers; the program "
                f"expects the backward to free the layer's input and the forward none")
        parts[name] = {"events": events,
                       "kept": [{"block": k, "until": c} for k, c in sorted(ka.items())]}
        allocs = sum(1 for e in events if e[0] == "a")
        print(f"{name}: {len(events)} events per layer, {allocs} blocks, {len(ka)} outlive the "
              f"layer; around the layers {ra[0]} + {ra[1]} events ({pa}), {rb[0]} + {rb[1]}")
    around = [around_parts(t, cuts[path], parts)
              for t, path in zip(traces, (pa, pb))]
    (aa, ta), (ab, tb) = around
    if ta != tb:
        die(f"the top layer's backward frees different blocks of the head's: {ta} vs {tb}")
    da, db = traces[0][1], traces[1][1]
    for name in PARTS:
        xa, xb = aa[name], ab[name]
        if [e[0] for e in xa["events"]] != [e[0] for e in xb["events"]] or xa["kept"] != xb["kept"]:
            die(f"the {name} part differs between the traces: {len(xa['events'])} and "
                f"{len(xb['events'])} events")
        events = []
        for i, (x, y) in enumerate(zip(xa["events"], xb["events"])):
            if x[0] == "a":
                events.append(with_stream(["a"] + formula(x[1], y[1], da, db, f"{name} event {i}",
                                                          True, True), x[2]))
            else:
                if x != y:
                    die(f"{name} event {i}: {x} vs {y}")
                events.append(x)
        parts[name] = {"events": events, "kept": xa["kept"]}
        print(f"{name}: {len(events)} events, "
              f"{sum(1 for e in events if e[0] == 'a')} blocks")
    parts["backward"]["top_prev"] = [[k, j] for k, j in sorted(ta.items())]
    (oa, ba), (ob, bb) = (free_order(t, cuts[path]) for t, path in zip(traces, (pa, pb)))
    if oa != ob or (ba is None) != (bb is None):
        die(f"the gradients are freed in different orders: {oa} vs {ob}")
    # The token batch holds B sequences of S + 1 token ids (inputs and the shifted targets):
    # c x B x (S + 1) bytes, written [c, "BS", c x B] as coefficient, product and a B term.
    batch = None
    if ba is not None:
        c = ba / (da["B"] * (da["S"] + 1))
        if c != int(c) or bb != c * db["B"] * (db["S"] + 1):
            die(f"the token batch: {ba} and {bb} bytes are no multiple of B x (S + 1)")
        batch = [int(c), "BS", int(c), "B"]
    # The generated step frees what the step kept in the reverse order of its making, which is
    # this order only if each group's list is its blocks in descending order and the groups
    # come embedding, layers 0..L-1, head backward, head forward.
    for key, ks in oa.items():
        if key == "sequence":
            continue
        if ks != sorted(ks, reverse=True):
            die(f"{key} frees its kept blocks in an order other than the reverse of making: {ks}")
    print(f"after the backward: gradients freed in parameter order; batch {batch}")
    init_seq = None
    if da["NB"] < da["L"]:
        sa, sb = init_sequence(traces[0]), init_sequence(traces[1])
        init_seq = {}
        for name in INIT_SECTIONS:
            xa, xb = sa[name], sb[name]
            if [x[0] for x in xa] != [x[0] for x in xb] or \
                    [x for x in xa if x[0] == "f"] != [x for x in xb if x[0] == "f"]:
                die(f"the initialisation's {name} section differs between the traces")
            init_seq[name] = [["a"] + formula(x[1], y[1], da, db, f"init {name} event {i}",
                                              affine_d=True) if x[0] == "a" else x
                              for i, (x, y) in enumerate(zip(xa, xb))]
        print("initialisation: " + ", ".join(f"{n} {len(init_seq[n])}" for n in INIT_SECTIONS))
    ia, ib = init_blocks(traces[0]), init_blocks(traces[1])
    if [len(x) for x in ia] != [len(x) for x in ib]:
        die(f"the parameters made before the first step differ: {ia} vs {ib}")
    init = {}
    for name, xa, xb in zip(("embedding", "layer", "rest"), ia, ib):
        init[name] = [formula(x, y, da, db, f"init {name} block {i}")
                      for i, (x, y) in enumerate(zip(xa, xb))]
    print(f"before the first step: {len(ia[0])} + {len(ia[1])} x layers + {len(ia[2])} blocks")
    fa, fb = (first_step_blocks(t, cuts[path]) for t, path in zip(traces, (pa, pb)))
    if [x[:2] for x in fa] != [x[:2] for x in fb]:
        die(f"the first step's own blocks differ: {fa} vs {fb}")
    first = []
    for x, y in zip(fa, fb):
        first.append([x[0], x[1]] + formula(x[2], y[2], da, db, f"first step block {x[:2]}"))
    print(f"first step: {len(first)} blocks of its own ({', '.join(str(x[:2]) for x in first)})")
    ha, hb = traces[0][0], traces[1][0]
    d = dims_a = traces[0][1]
    doc = {
        "name": f"{framework}-bf16-{attention}-full",
        "source": "scripts/derive-alloc-program.py from step 2 of " + os.path.relpath(pa, ROOT)
                  + " and " + os.path.relpath(pb, ROOT) + f" (torch {ha['versions']['torch']})",
        "applies_to": {"framework": framework, "precision": "bf16-mixed", "attention": attention,
                       "vocab_size": d["V"],
                       "recompute": "full", "layer_like_model": ha["model"],
                       "ffn_over_hidden": d["F"] / d["D"],
                       "head_dim": d["D"] // d["H"], "models_recorded": [ha["model"], hb["model"]]},
        "fixed": UNRESOLVED,
        "forward": parts["forward"],
        "backward": parts["backward"],
        **{name: parts[name] for name in PARTS},
        **({"backward_windows": "middle", "forward_kept": "output",
            "init_sequence": init_seq} if dims_a["NB"] < dims_a["L"] else {}),
        "first_step_blocks": first,
        "init_blocks": init,
        "zero_grad_order": oa,
        "batch_block": batch,
    }
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("wrote", out_path)


if __name__ == "__main__":
    main()
