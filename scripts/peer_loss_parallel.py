#!/usr/bin/env python3
"""Peak memory of the cross-entropy at the loss, per logit: eager F.cross_entropy on fp32 logits
against PyTorch's loss_parallel (the vocabulary-sharded cross-entropy torchtitan runs whenever
tensor parallelism is on). PyTorch is the measuring peer here; it is never a trainsim
dependency.

torchtitan (2024-12) computes the loss as F.cross_entropy(pred.flatten(0, 1).float(), labels)
on the output layer's logits; with tensor parallelism the logits are a DTensor sharded over the
vocabulary and the call runs inside torch.distributed.tensor.parallel.loss_parallel(), whose
log-softmax and NLL are decomposed into DTensor ops. Here both run on one GPU: loss_parallel on a
one-rank mesh runs the same decomposed ops on the whole vocabulary shard (the collectives are
trivial). For each shape the script records the bytes allocated at the peak of forward +
backward beyond the 16-bit logits, divided by the logits' element count, for both.

  python3 scripts/peer_loss_parallel.py --output loss-parallel.json
"""
import argparse
import json
import os
import sys


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", required=True)
    ap.add_argument("--shapes", default="16384x16032,8192x16032,32768x8016",
                    help="tokens x local vocabulary, comma-separated")
    a = ap.parse_args(argv)

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard
    from torch.distributed.tensor.parallel import loss_parallel

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    mesh = init_device_mesh("cuda", (1,))

    def peak(tokens, vocab, parallel):
        torch.manual_seed(0)
        x = torch.randn(tokens, vocab, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        labels = torch.randint(0, vocab, (tokens,), device="cuda")
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        if parallel:
            xd = DTensor.from_local(x, mesh, [Shard(-1)], run_check=False)
            ld = DTensor.from_local(labels, mesh, [Replicate()], run_check=False)
            with loss_parallel():
                loss = F.cross_entropy(xd.float(), ld)
                loss.backward()
        else:
            loss = F.cross_entropy(x.float(), labels)
            loss.backward()
        torch.cuda.synchronize()
        top = torch.cuda.max_memory_allocated() - base
        grad_bytes = x.grad.numel() * x.grad.element_size() if x.grad is not None else 0
        del x, labels, loss
        return top, grad_bytes

    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "cases": []}
    for shape in a.shapes.split(","):
        t, v = (int(s) for s in shape.split("x"))
        for parallel in (False, True):
            top, grad = peak(t, v, parallel)
            r = {"tokens": t, "vocab": v, "loss_parallel": parallel,
                 "peak_beyond_logits_bytes": top, "logits_grad_bytes": grad,
                 "peak_bytes_per_logit": top / (t * v)}
            print(json.dumps(r), flush=True)
            out["cases"].append(r)
    with open(a.output, "w") as f:
        json.dump(out, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
