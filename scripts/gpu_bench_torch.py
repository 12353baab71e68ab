#!/usr/bin/env python3
"""Times with PyTorch, on the same GPU, the kernels CudaBench.BertBaseKernels
timed on pf's CUDA backend (unittests/Runtime/CudaKernelTest.cpp; keep the
shapes in step), and prints pf's time, PyTorch's and their ratio.

fp32 with TF32 off on both sides. Run by scripts/gpu-check.sh on the GPU
machine: python3 gpu_bench_torch.py --pf pf-kernels.jsonl --out result.json
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F


def median_ms(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def torch_kernels():
    """(op, shape) -> a closure running PyTorch's version of pf's kernel."""
    dev = torch.device("cuda")
    rows, h, ff, heads, seq, vocab = 1024, 768, 3072, 12, 128, 30522
    r = lambda *s: torch.randn(*s, device=dev)
    x, w, b = r(rows, h), r(ff, h), r(ff)
    q, k = r(8, heads, seq, 64), r(8, heads, 64, seq)
    s = r(8, heads, seq, seq)
    g, bb = r(h), r(h)
    y = r(rows, ff)
    logits = r(rows, vocab).requires_grad_()
    labels = torch.randint(0, vocab, (rows,), device=dev)
    p = torch.nn.Parameter(r(ff, h))
    p.grad = r(ff, h)
    opt = torch.optim.AdamW([p], lr=1e-4, weight_decay=0.01, fused=True)
    ones = torch.ones(rows, 1, device=dev)

    def cross_entropy():
        loss = F.cross_entropy(logits, labels, ignore_index=-100)
        loss.backward()

    def factor():
        xa = torch.cat([x, ones], dim=1)
        return xa.t() @ xa / rows

    fa = factor()
    fb = y.t() @ y

    def inverse(f):
        eye = torch.eye(f.shape[0], device=dev)
        return lambda: torch.cholesky_inverse(torch.linalg.cholesky(f + 0.03 * eye))

    return {
        ("linear", "1024x768 -> 3072"): lambda: F.linear(x, w, b),
        ("matmul", "8x12x128x64 @ 8x12x64x128"): lambda: q @ k,
        ("softmax", "8x12x128x128"): lambda: torch.softmax(s, -1),
        ("layer_norm", "1024x768"): lambda: F.layer_norm(x, (h,), g, bb, 1e-12),
        ("gelu", "1024x3072"): lambda: F.gelu(y),
        ("cross_entropy", "1024x30522 (+grad)"): cross_entropy,
        ("adamw", "3072x768"): opt.step,
        ("kfac_factor", "1024x768 (+bias) -> 769^2"): factor,
        ("kfac_inverse", "769x769"): inverse(fa),
        ("kfac_inverse", "3072x3072"): inverse(fb),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pf", required=True, help="pf-kernels.jsonl from CudaBench")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    pf = []
    try:
        with open(args.pf) as f:
            pf = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        print(f"no pf timings ({args.pf}); timing PyTorch only")
    pf_ms = {(e["op"], e["shape"]): e["pf_ms"] for e in pf}
    rows = []
    print(f"{'op':<15} {'shape':<28} {'pf ms':>9} {'torch ms':>9} {'pf/torch':>9}")
    for key, fn in torch_kernels().items():
        reps = 5 if key[0] == "kfac_inverse" else 20
        t = median_ms(fn, reps=reps)
        p = pf_ms.get(key)
        ratio = p / t if p is not None and t > 0 else None
        rows.append({"op": key[0], "shape": key[1], "pf_ms": p, "torch_ms": t,
                     "pf_over_torch": ratio})
        ps = f"{p:9.4f}" if p is not None else f"{'-':>9}"
        rs = f"{ratio:9.2f}" if ratio is not None else f"{'-':>9}"
        print(f"{key[0]:<15} {key[1]:<28} {ps} {t:9.4f} {rs}")
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "kernels": rows}, f, indent=2)


if __name__ == "__main__":
    main()
