#!/usr/bin/env python3
"""Which op torchtitan's per-op checkpointing policy sees for an FP8 linear, and how many FP8
GEMMs a checkpointed layer re-runs in backward. PyTorch is the measuring peer here; it is never a
trainsim dependency, and torchao is not needed: the FP8 linear is rebuilt the way torchao's
Float8Linear (2024-12) runs it.

torchao's Float8Linear casts the input and the weight to float8 tensor subclasses and calls
torch.mm on them inside an autograd.Function (manual_float8_matmul_with_args_in_float8, marked
allow_in_graph); the subclass's __torch_dispatch__ turns aten.mm into torch._scaled_mm. The
per-op policy of torchtitan (selective_ac_option = "op") saves the outputs of aten.mm except
every second one and re-runs everything else. If the checkpoint's dispatch mode sees aten.mm
before the subclass turns it into _scaled_mm, FP8 linears are counted and kept like bf16 ones;
if it sees only _scaled_mm, none is kept and all re-run.

The layer is four linears in a row (x -> W1 -> relu -> W2 -> relu -> W3 -> relu -> W4), under
torch.utils.checkpoint with create_selective_checkpoint_contexts and torchtitan's policy, in
bf16 (plain mm) and in FP8 (the subclass), eager and under torch.compile. For each it records
the ops the policy was asked about and the GEMM kernels of one forward + backward, counted by
the profiler (aten::mm and aten::_scaled_mm events).

  python3 scripts/peer_sac_float8.py --output sac-float8.json
"""
import argparse
import json
import sys
from collections import Counter, defaultdict


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", required=True)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--width", type=int, default=4096)
    a = ap.parse_args(argv)

    import torch
    from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                        create_selective_checkpoint_contexts)

    aten = torch.ops.aten
    dev = "cuda"
    E4M3_MAX = 448.0

    class F8(torch.Tensor):
        """A float8 tensor with a tensorwise scale, standing for its high-precision value."""

        @staticmethod
        def __new__(cls, data, scale, orig_dtype):
            return torch.Tensor._make_wrapper_subclass(
                cls, data.shape, strides=data.stride(), dtype=orig_dtype, device=data.device)

        def __init__(self, data, scale, orig_dtype):
            self._data = data
            self._scale = scale  # multiply _data by it to get the value back

        def __repr__(self):
            return f"F8({tuple(self.shape)})"

        def __tensor_flatten__(self):
            return ["_data", "_scale"], {"orig_dtype": self.dtype}

        @staticmethod
        def __tensor_unflatten__(inner, ctx, outer_size, outer_stride):
            return F8(inner["_data"], inner["_scale"], ctx["orig_dtype"])

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is aten.mm.default:
                x, w = args
                return torch._scaled_mm(x._data, w._data, scale_a=x._scale, scale_b=w._scale,
                                        out_dtype=x.dtype)
            if func in (aten.t.default, aten.detach.default, aten.view.default,
                        aten._unsafe_view.default, aten.alias.default):
                x = args[0]
                return F8(func(x._data, *args[1:], **kwargs), x._scale, x.dtype)
            raise NotImplementedError(f"F8: {func}")

    @torch._dynamo.allow_in_graph
    class ToF8(torch.autograd.Function):
        """The cast into the subclass; its gradient passes through (torchao's
        _ToFloat8ConstrFunc)."""

        @staticmethod
        def forward(ctx, data, scale, like):
            return F8(data, scale, like.dtype)

        @staticmethod
        def backward(ctx, g):
            return None, None, g

    def to_f8(x):
        amax = x.detach().abs().max().float().clamp(min=1e-12)
        data = (x.detach().float() * (E4M3_MAX / amax)).clamp(-E4M3_MAX, E4M3_MAX)
        return ToF8.apply(data.to(torch.float8_e4m3fn), amax / E4M3_MAX, x)

    @torch._dynamo.allow_in_graph
    class MatmulF8(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x8, w8t):
            ctx.save_for_backward(x8, w8t)
            return torch.mm(x8, w8t)

        @staticmethod
        def backward(ctx, g):
            x8, w8t = ctx.saved_tensors
            # Gradients in high precision: enough to count the forward GEMMs and their re-runs.
            x = x8._data.to(g.dtype) * x8._scale.to(g.dtype)
            w_t = w8t._data.to(g.dtype) * w8t._scale.to(g.dtype)
            return g @ w_t.t(), x.t() @ g

    def linear(x, w, fp8):
        if not fp8:
            return torch.mm(x, w.t())
        return MatmulF8.apply(to_f8(x), to_f8(w).t())

    def layer(x, ws, fp8):
        for w in ws:
            x = torch.relu(linear(x, w, fp8))
        return x

    save_list = {aten.mm.default, aten._scaled_dot_product_flash_attention.default,
                 aten._scaled_dot_product_efficient_attention.default, aten.max.default}

    def run(fp8, compiled):
        asked = Counter()
        saved = Counter()

        def context_fn():
            meta = defaultdict(int)

            def policy(ctx, func, *args, **kwargs):  # torchtitan's per-op policy
                mode = "recompute" if ctx.is_recompute else "forward"
                if func == aten.mm.default:
                    meta[f"{mode}_mm_count"] += 1
                to_save = func in save_list and not (
                    func == aten.mm.default and meta[f"{mode}_mm_count"] % 2 == 0)
                asked[f"{mode}:{func}"] += 1
                if to_save:
                    saved[f"{mode}:{func}"] += 1
                return CheckpointPolicy.MUST_SAVE if to_save else CheckpointPolicy.PREFER_RECOMPUTE

            return create_selective_checkpoint_contexts(policy)

        torch.manual_seed(0)
        ws = [torch.randn(a.width, a.width, device=dev, dtype=torch.bfloat16,
                          requires_grad=True) * 0.02 for _ in range(4)]
        ws = [w.detach().requires_grad_() for w in ws]
        x = torch.randn(a.tokens, a.width, device=dev, dtype=torch.bfloat16, requires_grad=True)

        def step(x):
            return checkpoint(layer, x, ws, fp8, use_reentrant=False, context_fn=context_fn)

        fn = torch.compile(step) if compiled else step
        for _ in range(2):  # warm-up (and compilation)
            fn(x).float().sum().backward()
        torch.cuda.synchronize()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn(x).float().sum().backward()
            torch.cuda.synchronize()
        events = Counter(e.name for e in prof.events())
        return {
            "fp8": fp8, "compiled": compiled,
            "policy_asked": dict(asked), "policy_saved": dict(saved),
            "aten_mm_events": events.get("aten::mm", 0),
            "aten_scaled_mm_events": events.get("aten::_scaled_mm", 0),
        }

    out = {"torch": torch.__version__, "tokens": a.tokens, "width": a.width,
           "linears_per_layer": 4, "cases": []}
    for fp8 in (False, True):
        for compiled in (False, True):
            try:
                r = run(fp8, compiled)
            except Exception as e:  # recorded, not hidden
                r = {"fp8": fp8, "compiled": compiled, "error": f"{type(e).__name__}: {e}"[:600]}
            print(json.dumps(r), flush=True)
            out["cases"].append(r)
    with open(a.output, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
