#!/usr/bin/env python3
"""Times PyTorch on whole BERT masked-LM models: the peer for pf's own CUDA timings.

The model is written by hand with torch.nn (no `transformers`) to match Hugging Face's
BertForMaskedLM in eval mode (no dropout): word + position + token-type embeddings and
LayerNorm(eps=1e-12); L post-LN encoder blocks (q/k/v/output Linear(H, H), additive mask
(1 - attention_mask) * -10000, softmax, FFN with exact erf GELU); MLM head Linear(H, H)
-> GELU -> LayerNorm -> decoder tied to the word embedding, plus a vocab bias; weights
initialised as Hugging Face does (normal(0, 0.02), LayerNorm 1/0, biases 0).

Cases, per config in --configs, at --batch B x --sequence S:
  forward      logits under torch.no_grad()
  train_adamw  zero_grad, forward, MLM cross-entropy (15% of positions labelled,
               ignore_index=-100), backward, clip_grad_norm_(1.0), AdamW step
               (lr 1e-4, betas (0.9, 0.999), eps 1e-6, weight decay 0.01; fused on CUDA)
fp32 with TF32 off unless --tf32; --bf16 runs forward and loss under autocast(bfloat16).
Median of --repeat runs after 3 warm-ups, timed with CUDA events on the GPU and
time.perf_counter on the CPU. Cases left when --time-budget seconds are used up are
skipped; an error in one case (e.g. out of memory) is recorded and the others still run.
Exits 0 unless no case ran.

Run by scripts/gpu-check.sh on the GPU machine:
  python3 scripts/gpu_bench_torch_bert.py --configs tiny,mini,base --out torch-bert.json
CPU smoke test:
  python3 scripts/gpu_bench_torch_bert.py --device cpu --configs tiny --repeat 2 \\
      --batch 2 --sequence 16 --out /tmp/torch-bert.json
"""
import argparse
import gc
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

# pf's model sizes (python/pipefisher/configs.py, plain Python: the working
# tree travels with the GPU check).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pipefisher.configs import CONFIGS  # noqa: E402

MAX_POSITIONS, TYPE_VOCAB, LN_EPS, WARMUP = 512, 2, 1e-12, 3


class Layer(nn.Module):
    def __init__(self, h, heads, inter, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
        self.ln1 = nn.LayerNorm(h, eps=LN_EPS)
        self.ff1, self.ff2 = nn.Linear(h, inter), nn.Linear(inter, h)
        self.ln2 = nn.LayerNorm(h, eps=LN_EPS)

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.heads

        def split(t):  # [B, S, H] -> [B, NH, S, d]
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        if self.sdpa:
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype))
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask
            ctx = torch.softmax(scores, dim=-1) @ v
        ctx = ctx.transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class BertMLM(nn.Module):
    def __init__(self, vocab, layers, h, heads, inter, sdpa=False):
        super().__init__()
        self.word = nn.Embedding(vocab, h, padding_idx=0)
        self.pos = nn.Embedding(MAX_POSITIONS, h)
        self.type_emb = nn.Embedding(TYPE_VOCAB, h)
        self.emb_ln = nn.LayerNorm(h, eps=LN_EPS)
        self.layers = nn.ModuleList(Layer(h, heads, inter, sdpa) for _ in range(layers))
        self.head = nn.Linear(h, h)
        self.head_ln = nn.LayerNorm(h, eps=LN_EPS)
        self.decoder_bias = nn.Parameter(torch.zeros(vocab))
        for m in self.modules():  # Hugging Face's BertPreTrainedModel._init_weights
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.data.normal_(0.0, 0.02)
            if isinstance(m, nn.Linear):
                m.bias.data.zero_()
            if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                m.weight.data[m.padding_idx].zero_()

    def forward(self, ids, types, attention_mask):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.emb_ln(self.word(ids) + self.pos(pos)[None] + self.type_emb(types))
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        x = self.head_ln(F.gelu(self.head(x)))
        return x @ self.word.weight.t() + self.decoder_bias


def time_ms(fn, dev, repeat, deadline):
    """(median, min, runs) in ms of fn after WARMUP runs; stops early past the deadline."""
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(repeat):
        if dev.type == "cuda":
            torch.cuda.synchronize()
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        if time.monotonic() > deadline:
            break
    return statistics.median(times), min(times), len(times)


def make_inputs(vocab, b, s, dev):
    g = torch.Generator().manual_seed(0)  # on the CPU, so every device sees the same data
    ids = torch.randint(0, vocab, (b, s), generator=g)
    labelled = torch.rand(b, s, generator=g) < 0.15
    labelled[0, 0] = True  # at least one label, or the loss would be NaN
    labels = torch.where(labelled, torch.randint(0, vocab, (b, s), generator=g), -100)
    types = torch.zeros(b, s, dtype=torch.long)
    mask = torch.ones(b, s, dtype=torch.long)
    return [t.to(dev) for t in (ids, types, mask, labels)]


def free_memory(dev):
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def run_config(name, args, dev, deadline, record):
    c = CONFIGS[name]
    layers, h, heads, inter = (c.num_hidden_layers, c.hidden_size, c.num_attention_heads,
                               c.intermediate_size)
    base = {"config": name, "vocab": args.vocab}
    cases = ["forward", "train_adamw"]
    if time.monotonic() > deadline:
        for case in cases:
            record(dict(base, case=case, skipped="time budget"))
        return
    try:
        torch.manual_seed(0)
        model = BertMLM(args.vocab, layers, h, heads, inter, args.sdpa).to(dev)
        params = list(model.parameters())
        base["params"] = sum(p.numel() for p in params)
        ids, types, mask, labels = make_inputs(args.vocab, args.batch, args.sequence, dev)
        opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-6,
                                weight_decay=0.01, fused=True if dev.type == "cuda" else None)
    except Exception as e:  # noqa: BLE001 - e.g. out of memory; report and go on
        for case in cases:
            record(dict(base, case=case, error=f"{type(e).__name__}: {e}"))
        return
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.bf16)
    first_loss = []

    def forward():
        with torch.no_grad(), amp:
            return model(ids, types, mask)

    def train_step():
        opt.zero_grad(set_to_none=True)
        with amp:
            logits = model(ids, types, mask)
            loss = F.cross_entropy(logits.view(-1, args.vocab).float(), labels.view(-1),
                                   ignore_index=-100)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if not first_loss:
            first_loss.append(loss.item())

    for case, fn in (("forward", forward), ("train_adamw", train_step)):
        res = dict(base, case=case)
        if time.monotonic() > deadline:
            res["skipped"] = "time budget"
        else:
            try:
                model.train(case != "forward")  # no dropout: only a flag here
                med, lo, n = time_ms(fn, dev, args.repeat, deadline)
                res.update(median_ms=med, min_ms=lo, repeat=n)
                if case == "train_adamw":
                    res["loss"] = first_loss[0]
            except Exception as e:  # noqa: BLE001 - e.g. out of memory; report and go on
                res["error"] = f"{type(e).__name__}: {e}"
        record(res)
        free_memory(dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default="tiny,mini,base",
                    help="comma list of " + ",".join(CONFIGS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--sequence", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 matmuls")
    ap.add_argument("--bf16", action="store_true", help="autocast forward/loss to bfloat16")
    ap.add_argument("--sdpa", action="store_true",
                    help="attention by F.scaled_dot_product_attention (as HF's 'sdpa')")
    ap.add_argument("--time-budget", type=float, default=150.0, help="seconds")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args()
    names = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in names if c not in CONFIGS]
    if bad or args.sequence > MAX_POSITIONS:
        ap.error(f"unknown configs {bad}" if bad else f"--sequence above {MAX_POSITIONS}")
    deadline = time.monotonic() + args.time_budget
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    dev = torch.device(args.device)
    try:
        dev_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    except Exception as e:  # noqa: BLE001 - no usable GPU; every case will say why
        dev_name = f"{args.device} ({type(e).__name__}: {e})"
    out = {"device": dev_name, "torch": torch.__version__, "tf32": args.tf32,
           "bf16": args.bf16, "sdpa": args.sdpa, "batch": args.batch,
           "sequence": args.sequence, "results": []}

    def record(res):
        out["results"].append(res)
        if "median_ms" in res:
            extra = f"  loss {res['loss']:.4f}" if "loss" in res else ""
            what = (f"median {res['median_ms']:9.3f} ms  min {res['min_ms']:9.3f} ms"
                    f"  (n={res['repeat']}){extra}")
        else:
            what = res.get("skipped") or res.get("error")
        params = f"{res['params']:,}" if "params" in res else "-"
        print(f"{res['config']:<6} {res['case']:<12} params {params:>11}  {what}", flush=True)
        with open(args.out, "w") as f:  # rewritten each time: partial results survive a kill
            json.dump(out, f, indent=2)

    print(f"{dev_name}, torch {torch.__version__}, B={args.batch} S={args.sequence}, "
          f"tf32={args.tf32} bf16={args.bf16} sdpa={args.sdpa}", flush=True)
    for name in names:
        run_config(name, args, dev, deadline, record)
        free_memory(dev)  # the model and optimizer state of the last config
    return 0 if any("median_ms" in r for r in out["results"]) else 1


if __name__ == "__main__":
    sys.exit(main())
