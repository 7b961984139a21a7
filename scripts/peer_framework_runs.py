#!/usr/bin/env python3
"""Framework runs on a GPU: the training step as plain PyTorch users run it, timed and measured,
in the JSONL format `trainsim calibrate --framework-runs` and `trainsim compare --framework-runs`
read (docs/frameworks.md). PyTorch is the measuring peer here; it is never a trainsim dependency.

The model mirrors the Hugging Face transformers Llama code op by op (LlamaRMSNorm upcasting to
fp32, rotate_half RoPE, repeat_kv for grouped-query attention, SDPA or eager attention with an
fp32 softmax, separate gate/up/down projections with SiLU, logits upcast to fp32 before the
cross-entropy), trained with torch.optim.AdamW (PyTorch's default foreach implementation).
Frameworks:
  pytorch          eager; bf16-mixed = torch.autocast(bf16) over fp32 parameters
  pytorch-compile  torch.compile(model) (default mode), same precision policy
  fsdp             FSDP2 fully_shard per decoder layer and the root, on the ranks of this process
                   group (one GPU: world size 1); bf16-mixed = MixedPrecisionPolicy(param bf16,
                   reduce fp32)
Recompute: none; selective = torch.utils.checkpoint around the attention core (scores, softmax,
P V); full = checkpoint around each decoder layer; selective-op = each decoder layer checkpointed
with torchtitan's per-op policy (every other aten.mm's output and attention's kept).

One run per process (clean allocator statistics); `--plan FILE` runs a list of runs, each in a
subprocess with a time limit, appending one JSON line per run to --output. `--oom-search` finds,
for each allocator cap (torch.cuda.set_per_process_memory_fraction), the largest micro-batch that
trains three steps, and records peak allocated/reserved at that batch and the failing one; in
plan mode each answer is then run once more in a fresh process (scripts/peer_oom_leak_check.py)
and its peaks are recorded beside the search's (`fresh_peak_*`), since a probe that ran out of
memory can leave state behind for the next.

  python3 scripts/peer_framework_runs.py --plan scripts/framework-runs.json --output runs.jsonl
  python3 scripts/peer_framework_runs.py --framework pytorch --model cs336-small --batch 4 \
      --seq-len 512 --precision bf16-mixed --attention flash --recompute none
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")


def load_config(name):
    path = name if name.endswith(".json") else os.path.join(ROOT, "presets", "models", name + ".json")
    with open(path) as f:
        cfg = json.load(f)
    cfg.setdefault("num_kv_heads", cfg["num_heads"])
    cfg.setdefault("head_dim", cfg["hidden_size"] // cfg["num_heads"])
    cfg.setdefault("tied_embeddings", False)
    return cfg


def build(cfg, attention, recompute, recompute_layers=0):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint

    class RMSNorm(nn.Module):  # LlamaRMSNorm
        def __init__(self, d, eps=1e-5):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))
            self.eps = eps

        def forward(self, x):
            dtype = x.dtype
            x = x.to(torch.float32)
            var = x.pow(2).mean(-1, keepdim=True)
            x = x * torch.rsqrt(var + self.eps)
            return self.weight * x.to(dtype)

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def repeat_kv(x, n):
        if n == 1:
            return x
        b, h, t, d = x.shape
        return x[:, :, None, :, :].expand(b, h, n, t, d).reshape(b, h * n, t, d)

    def core(q, k, v):
        if attention == "flash":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        t = q.shape[-2]
        s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(q.shape[-1])
        mask = torch.full((t, t), float("-inf"), device=q.device).triu(1)
        s = s + mask.to(s.dtype)
        p = F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
        return torch.matmul(p, v)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            d, h, kv, hd = cfg["hidden_size"], cfg["num_heads"], cfg["num_kv_heads"], cfg["head_dim"]
            self.h, self.kv, self.hd = h, kv, hd
            self.q_proj = nn.Linear(d, h * hd, bias=False)
            self.k_proj = nn.Linear(d, kv * hd, bias=False)
            self.v_proj = nn.Linear(d, kv * hd, bias=False)
            self.o_proj = nn.Linear(h * hd, d, bias=False)

        def forward(self, x, cos, sin):
            b, t, _ = x.shape
            q = self.q_proj(x).view(b, t, self.h, self.hd).transpose(1, 2)
            k = self.k_proj(x).view(b, t, self.kv, self.hd).transpose(1, 2)
            v = self.v_proj(x).view(b, t, self.kv, self.hd).transpose(1, 2)
            cos_, sin_ = cos.to(q.dtype), sin.to(q.dtype)
            q = q * cos_ + rotate_half(q) * sin_
            k = k * cos_ + rotate_half(k) * sin_
            k, v = repeat_kv(k, self.h // self.kv), repeat_kv(v, self.h // self.kv)
            if recompute == "selective":
                o = checkpoint(core, q, k, v, use_reentrant=False)
            else:
                o = core(q, k, v)
            return self.o_proj(o.transpose(1, 2).reshape(b, t, -1))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            d, f = cfg["hidden_size"], cfg["ffn_hidden_size"]
            self.gate_proj = nn.Linear(d, f, bias=False)
            self.up_proj = nn.Linear(d, f, bias=False)
            self.down_proj = nn.Linear(f, d, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm(cfg["hidden_size"])
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm(cfg["hidden_size"])
            self.mlp = MLP()

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))

    def per_op_policy():
        # torchtitan's per-op selective checkpointing (selective_ac_option = "op"): inside a
        # checkpointed layer keep the outputs of aten.mm, except every second one counted in
        # execution order, and of scaled-dot-product attention; recompute everything else.
        from collections import defaultdict
        from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
        kept = {torch.ops.aten.mm.default}
        for name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                     "_scaled_dot_product_cudnn_attention"):
            if hasattr(torch.ops.aten, name):
                kept.add(getattr(torch.ops.aten, name).default)
        count = defaultdict(int)

        def policy(ctx, func, *args, **kwargs):
            mode = "recompute" if ctx.is_recompute else "forward"
            if func == torch.ops.aten.mm.default:
                count[mode] += 1
            keep = func in kept and not (func == torch.ops.aten.mm.default and count[mode] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
            self.layers = nn.ModuleList(Layer() for _ in range(cfg["num_layers"]))
            self.norm = RMSNorm(cfg["hidden_size"])
            self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
            if cfg["tied_embeddings"]:
                self.lm_head.weight = self.embed_tokens.weight
            hd = cfg["head_dim"]
            self.register_buffer(
                "inv_freq", 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)),
                persistent=False)

        def forward(self, tokens, labels):
            t = tokens.shape[1]
            pos = torch.arange(t, device=tokens.device, dtype=torch.float32)
            freqs = torch.outer(pos, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
            x = self.embed_tokens(tokens)
            for i, layer in enumerate(self.layers):
                # --recompute-layers N: only the first N layers checkpointed (Megatron-Core's
                # block method); the rest keep their activations.
                if (recompute == "full" and self.training and
                        (recompute_layers <= 0 or i < recompute_layers)):
                    x = checkpoint(layer, x, cos, sin, use_reentrant=False)
                elif recompute == "selective-op" and self.training:
                    x = checkpoint(layer, x, cos, sin, use_reentrant=False,
                                   context_fn=per_op_policy)
                else:
                    x = layer(x, cos, sin)
            logits = self.lm_head(self.norm(x)).float()
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1))

    return LM()


def versions():
    import torch
    return {"torch": torch.__version__, "cuda": torch.version.cuda,
            "gpu_name": torch.cuda.get_device_name(0)}


def setup(a):
    """Model, optimizer and step function for one run configuration."""
    import torch
    cfg = load_config(a.model)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(0)
    with torch.device(dev):
        model = build(cfg, a.attention, a.recompute, a.recompute_layers)
    for p in model.parameters():
        if p.dim() > 1:
            torch.nn.init.normal_(p, std=0.02)
    amp = a.precision == "bf16-mixed"
    if a.framework == "fsdp":
        import torch.distributed as dist
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        if not dist.is_initialized():
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
            dist.init_process_group("nccl", rank=0, world_size=1)
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) \
            if amp else MixedPrecisionPolicy()
        for layer in model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        amp = False  # the policy casts parameters; no autocast
    fwd = model
    if a.framework == "pytorch-compile":
        fwd = torch.compile(model, dynamic=a.dynamic)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    g = torch.Generator(device="cpu").manual_seed(1)

    def step(batch):
        tokens = torch.randint(0, cfg["vocab_size"], (batch, a.seq_len + 1), generator=g).to(dev)
        x, y = tokens[:, :-1], tokens[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = fwd(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    # The pieces of one step, for peers that time or mark its phases apart
    # (peer_phase_times.py): the forward callable, whether autocast is on, the token generator.
    step.fwd, step.amp, step.generator = fwd, amp, g
    return model, opt, step, cfg


def timed_run(a):
    import torch
    t0 = time.time()
    model, opt, step, cfg = setup(a)
    for _ in range(a.warmup):
        step(a.batch)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times, host = [], []
    for _ in range(a.steps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        h0 = time.perf_counter()
        e0.record()
        loss = step(a.batch)
        e1.record()
        h1 = time.perf_counter()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3)
        host.append(h1 - h0)
    med = statistics.median(times)
    return {
        "measured": {
            "step_time_s": med,
            "step_time_min_s": min(times),
            "step_time_stdev_s": statistics.stdev(times) if len(times) > 1 else 0.0,
            "host_issue_s": statistics.median(host),
            "tokens_per_s_per_gpu": a.batch * a.seq_len / med,
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
            "samples": len(times),
            "loss": float(loss.item()),
        },
        "wall_s": time.time() - t0,
    }


def probe_under_cap(opt, step, steps, batch, cap_bytes, total, empty_cache=True):
    """`steps` training steps at `batch` under an allocator cap (set_per_process_memory_fraction),
    after freeing what the previous probe left: whether they ran, the bytes allocated before,
    the peaks, and the bytes allocated after. empty_cache=False keeps PyTorch's cached segments
    (what the model's initialisation left) for the steps, as a training loop that never calls
    torch.cuda.empty_cache() does."""
    import gc
    import torch
    torch.cuda.set_per_process_memory_fraction(min(cap_bytes / total, 1.0))
    opt.zero_grad(set_to_none=True)
    gc.collect()
    if empty_cache:
        torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    ok = True
    try:
        for _ in range(steps):
            step(batch)
        torch.cuda.synchronize()
    except torch.OutOfMemoryError:
        ok = False
    opt.zero_grad(set_to_none=True)
    gc.collect()
    return {"batch": batch, "cap_bytes": cap_bytes, "ok": ok, "allocated_before_bytes": before,
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
            "allocated_after_bytes": torch.cuda.memory_allocated()}


def oom_search(a):
    """Largest micro-batch that trains `a.steps` steps under each cap (GB = 1e9 bytes).

    Two uncapped probes (batch b0 and 2 b0) give peak reserved bytes as a line in the batch; for
    each cap the search starts at that line's guess and walks up or down (doubling the stride)
    until it brackets the boundary, then bisects: every answer is a pair (runs at b, fails at
    b + 1) that was run, the guess only saves probes. Caps are visited in increasing order and a
    batch that ran under a lower cap is taken to run under a higher one."""
    import torch
    total = torch.cuda.get_device_properties(0).total_memory
    model, opt, step, cfg = setup(a)

    def runs(batch, cap_bytes):
        r = probe_under_cap(opt, step, a.steps, batch, cap_bytes, total)
        return r["ok"], r["peak_allocated_bytes"], r["peak_reserved_bytes"]

    b0 = max(a.batch, 1)
    free = {}
    for b in (b0, 2 * b0):
        free[b] = runs(b, total)
    slope = max(free[2 * b0][2] - free[b0][2], 1)
    base = free[b0][2] - slope * b0
    results, known_ok = [], 0
    for cap_gb in sorted(a.caps):
        cap = cap_gb * 1e9
        t0 = time.time()
        probes = {}

        def probe(b):
            if b not in probes:
                probes[b] = runs(b, cap)
            return probes[b][0]

        guess = min(max(int((cap - base) // slope), 1), a.max_batch)
        lo, hi = (known_ok, None)
        b = max(guess, known_ok + 1, 1)
        if probe(b):
            lo, stride = b, 1
            while hi is None and b < a.max_batch:
                b = min(b + stride, a.max_batch)
                stride *= 2
                if probe(b):
                    lo = b
                else:
                    hi = b
        else:
            hi, stride = b, 1
            while lo < hi - 1:
                b = max(hi - stride, lo + 1)
                stride *= 2
                if b <= known_ok or probe(b):
                    lo = b
                    break
                hi = b
        while hi is not None and hi - lo > 1:
            mid = (lo + hi) // 2
            if probe(mid):
                lo = mid
            else:
                hi = mid
        known_ok = max(known_ok, lo)
        if lo > 0:
            probe(lo)  # its peaks under this cap (it may have run only under a lower one)
        ok = probes.get(lo, (True, 0, 0))
        bad = probes.get(hi) if hi is not None else None
        results.append({
            "memory_cap_bytes": cap,
            "max_micro_batch": lo,
            "first_failing_micro_batch": hi,
            "peak_allocated_bytes": ok[1], "peak_reserved_bytes": ok[2],
            "failing_peak_allocated_bytes": bad[1] if bad else None,
            "failing_peak_reserved_bytes": bad[2] if bad else None,
            "probes": {str(k): v[0] for k, v in sorted(probes.items())},
            "uncapped": {str(k): {"peak_allocated_bytes": v[1], "peak_reserved_bytes": v[2]}
                         for k, v in free.items()},
            "search_s": time.time() - t0,
        })
    torch.cuda.set_per_process_memory_fraction(1.0)
    return results


def gpu_preset():
    """trainsim's GPU preset for the device this runs on (the lent machines are H200s or H100
    SXMs); the record says which GPU its time was measured on."""
    import torch
    name = torch.cuda.get_device_name(0)
    if "H200" in name:
        return "h200"
    if "H100" in name and "HBM3" in name:
        return "h100-sxm"
    raise SystemExit(f"no trainsim GPU preset is named for the device '{name}': add it to gpu_preset()")


def record(a):
    return {"framework": a.framework, "model": a.model, "gpu": gpu_preset(), "num_gpus": 1,
            "precision": a.precision, "seq_len": a.seq_len, "micro_batch": a.batch,
            "global_batch": a.batch, "tp": 1, "pp": 1, "cp": 1, "dp": 1, "zero_stage": 0,
            "recompute": a.recompute, "attention": a.attention,
            **({"recompute_layers": a.recompute_layers} if a.recompute_layers > 0 else {})}


def one(a):
    base = record(a)
    base["source"] = "scripts/peer_framework_runs.py on the device (" + \
        time.strftime("%Y-%m-%d", time.gmtime()) + ")"
    base["versions"] = versions()
    if a.oom_search:
        rows = []
        for r in oom_search(a):
            row = dict(base)
            row["id"] = a.id or ""
            row["micro_batch"] = row["global_batch"] = r["max_micro_batch"]
            row["memory_cap_bytes"] = r.pop("memory_cap_bytes")
            row["id"] = f"{row['id']}-cap{int(row['memory_cap_bytes'] / 1e9)}"
            row["measured"] = r
            rows.append(row)
        return rows
    r = timed_run(a)
    base["id"] = a.id or ""
    base.update(r)
    return [base]


def parse_peer_args(argv, doc, extra=None):
    """Options of a peer script that records one run into --out (allocator traces, kernel
    profiles): the run options, 3 steps, and an id from the configuration unless given."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", required=True)
    add_run_options(ap)
    if extra:
        extra(ap)
    ap.set_defaults(steps=3, dynamic=False)
    a = ap.parse_args(argv)
    if not a.id:
        # the first N layers only: "fullN" (so traces of two N do not share a file name)
        rl = a.recompute_layers if a.recompute == "full" and a.recompute_layers > 0 else ""
        a.id = (f"{a.framework}-{a.model}-{a.precision}-{a.attention}-{a.recompute}{rl}"
                f"-b{a.batch}-s{a.seq_len}")
    os.makedirs(a.out, exist_ok=True)
    return a


def add_run_options(ap):
    """The options that describe one run (shared with scripts/peer_allocator_trace.py)."""
    ap.add_argument("--id", default="")
    ap.add_argument("--framework", choices=["pytorch", "pytorch-compile", "fsdp"], default="pytorch")
    ap.add_argument("--model", default="cs336-small")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--precision", choices=["fp32", "bf16-mixed"], default="bf16-mixed")
    ap.add_argument("--attention", choices=["flash", "naive"], default="flash")
    ap.add_argument("--recompute", choices=["none", "selective", "full", "selective-op"],
                    default="none")
    ap.add_argument("--recompute-layers", type=int, default=0,
                    help="with --recompute full: checkpoint only the first N layers (0: all)")
    ap.add_argument("--steps", type=int, default=6)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", help="JSON list of runs (each an object of the options below)")
    ap.add_argument("--output", help="append JSON lines here (default: stdout)")
    ap.add_argument("--only", help="comma-separated run ids to take from --plan")
    ap.add_argument("--limit-s", type=float, default=240, help="per-run time limit (plan mode)")
    add_run_options(ap)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True)")
    ap.add_argument("--oom-search", action="store_true")
    ap.add_argument("--caps", type=lambda s: [float(x) for x in s.split(",")], default=[24, 40, 80],
                    help="allocator caps in GB (1e9 bytes) for --oom-search")
    ap.add_argument("--max-batch", type=int, default=512)
    return ap.parse_args(argv)


def fresh_peaks(line, item):
    """An OOM search probes in one process, and a probe that ran out of memory can leave state
    behind (FSDP2: a peak 4.7 GB above a fresh process's at the next cap, 2026-12-02,
    validate/results/runs-2026-12-02/oom-checks/). The largest micro-batch that ran is run once
    more in a fresh process under the same cap; its peaks are recorded beside the search's
    (`fresh_peak_allocated_bytes`, `fresh_peak_reserved_bytes`, and `fresh_ok`)."""
    d = json.loads(line)
    m = d.get("measured", {})
    if m.get("max_micro_batch", 0) <= 0 or not d.get("memory_cap_bytes"):
        return line
    cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                        "peer_oom_leak_check.py"),
           "--framework", item["framework"], "--model", item["model"],
           "--seq-len", str(item["seq_len"]), "--precision", item.get("precision", "bf16-mixed"),
           "--attention", item.get("attention", "flash"),
           "--recompute", item.get("recompute", "none"),
           "--ok-batch", str(m["max_micro_batch"]), "--cap-gb", str(d["memory_cap_bytes"] / 1e9)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=item.get("limit_s", 300))
        probe = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][0])["probes"][0]
        m["fresh_ok"] = probe["ok"]
        m["fresh_peak_allocated_bytes"] = probe["peak_allocated_bytes"]
        m["fresh_peak_reserved_bytes"] = probe["peak_reserved_bytes"]
    except (subprocess.TimeoutExpired, IndexError, KeyError, ValueError) as e:
        m["fresh_error"] = repr(e)
    return json.dumps(d)


def run_plan(a):
    with open(a.plan) as f:
        plan = json.load(f)
    only = set(a.only.split(",")) if a.only else None
    for item in plan:
        if only and item.get("id") not in only:
            continue
        args = []
        for k, v in item.items():
            flag = "--" + k.replace("_", "-")
            if isinstance(v, bool):
                if v:
                    args.append(flag)
            elif isinstance(v, list):
                args += [flag, ",".join(str(x) for x in v)]
            else:
                args += [flag, str(v)]
        t0 = time.time()
        # A failed run keeps its plan entry (framework, model, oom_search, ...): trainsim's
        # reader counts it on its fit/test side, so the runs after it keep theirs.
        failed = {k: item[k] for k in ("id", "framework", "model", "seq_len", "precision",
                                       "attention", "recompute", "recompute_layers",
                                       "oom_search") if k in item}
        try:
            p = subprocess.run([sys.executable, __file__] + args, capture_output=True, text=True,
                               timeout=item.get("limit_s", a.limit_s))
            lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
            if p.returncode != 0 or not lines:
                err = (p.stderr or "").strip().splitlines()[-3:]
                lines = [json.dumps({**failed, "error": " | ".join(err),
                                     "returncode": p.returncode})]
        except subprocess.TimeoutExpired:
            lines = [json.dumps({**failed, "error": "timeout"})]
        if item.get("oom_search") and item.get("fresh_peaks", True):
            lines = [fresh_peaks(l, item) for l in lines]
        with (open(a.output, "a") if a.output else sys.stdout) as out:
            for l in lines:
                out.write(l + "\n")
        d = json.loads(lines[0])
        m = d.get("measured", {})
        print(f"# {item.get('id')}: {time.time() - t0:.0f}s "
              + (f"step {m['step_time_s'] * 1e3:.2f} ms, peak alloc {m['peak_allocated_bytes'] / 1e9:.2f} GB, reserved {m['peak_reserved_bytes'] / 1e9:.2f} GB"
                 if "step_time_s" in m else
                 f"max batch {m.get('max_micro_batch')}" if "max_micro_batch" in m else d.get("error", "")),
              file=sys.stderr, flush=True)


def main(argv):
    a = parse(argv)
    if a.plan:
        run_plan(a)
        return 0
    for row in one(a):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
