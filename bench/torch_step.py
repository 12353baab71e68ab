#!/usr/bin/env python3
"""pf against PyTorch eager on the BERT-mini training step (issue 16, item 6).

One run, the same thread count for both, the same model, batch and labels:

* AdamW: `pf-run MODEL --training-step` against PyTorch eager
  (forward + masked-LM loss + backward + clip to norm 1 + AdamW);
* K-FAC, refreshed every step: `pf-run --training-step --kfac` against
  PyTorch + ASDL (`pip install asdfghjkl`, imported as `asdl`):
  `KfacGradientMaker` with the empirical Fisher over the encoder blocks'
  linear layers only, factors and inverses every step, then clip and AdamW.

The model is transformers' `BertForMaskedLM` (BERT-mini: 4 layers, hidden
256, 4 heads, intermediate 1024, vocabulary 30522; pf's "mini" config),
random with a fixed seed, dropout off, exported with the TorchScript exporter
(opset 14, constant folding) at the benchmark's batch x sequence, as
python/tests/test_torch_parity.py does. Both sides run the full decoder
(every position's 30522 logits), so the work is the same; the first step's
losses are compared to show it.

torch, transformers and ASDL are not project dependencies: run this with a
Python that has them (docs/importing.md, "Checking against PyTorch"); without
torch it says so and exits 0.

    PF_BUILD_DIR=$PWD/build PYTHONPATH=python \\
        /work/scratch-torch/bin/python bench/torch_step.py [--threads 2] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pipefisher.configs import get_config  # noqa: E402
from pipefisher.tools import tool  # noqa: E402

# Issue 16's goals: pf's time over PyTorch's.
GOAL_ADAMW = 0.5
GOAL_KFAC = 0.4

# pf-run --kfac's defaults (docs/training.md), given to ASDL too.
KFAC_DAMPING = 1e-5
KFAC_DECAY = 0.5
LR = 1e-4
WEIGHT_DECAY = 0.01
CLIP = 1.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="mini", help="pf config name (python/pipefisher/configs.py)")
    p.add_argument("--vocab", type=int, default=None, help="override the vocabulary (debugging)")
    p.add_argument("--layers", type=int, default=None, help="override the layer count (debugging)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20, help="timed steps per case (>= 2)")
    p.add_argument("--warmup", type=int, default=2, help="untimed torch steps before timing")
    p.add_argument("--no-asdl", action="store_true", help="skip PyTorch + ASDL")
    p.add_argument("--keep", help="keep the model and inputs in this directory")
    args = p.parse_args()
    if args.repeat < 2:
        p.error("--repeat must be at least 2 (pf-run prints a median from 2 runs on)")
    return args


def main() -> int:
    args = parse_args()
    try:
        import torch
        import transformers
    except ImportError as err:
        print(f"bench/torch_step.py: skipped: PyTorch/transformers not importable ({err}); "
              "run it with a Python that has them (docs/importing.md)")
        return 0
    torch.set_num_threads(args.threads)

    cfg = get_config(args.config, vocab_size=args.vocab, num_hidden_layers=args.layers)
    bert_config = transformers.BertConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_position_embeddings,
        type_vocab_size=cfg.type_vocab_size, layer_norm_eps=cfg.layer_norm_eps,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)

    def fresh_model():
        torch.manual_seed(0)
        model = transformers.BertForMaskedLM(bert_config)
        # 1-D parameters shifted as in a trained model: an untrained model's
        # equal initializers (zero biases, unit LayerNorm weights) would be
        # merged by exporters (docs/importing.md).
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 1:
                    p.add_(torch.randn(p.shape, generator=g) * 0.05)
        return model.train()  # dropout is 0: train() and eval() compute the same

    B, S, V = args.batch, args.seq, cfg.vocab_size
    rng = np.random.default_rng(0)
    ids = rng.integers(5, V, (B, S)).astype(np.int64)
    types = np.zeros((B, S), np.int64)
    types[:, S // 2:] = 1
    mask = np.ones((B, S), np.int64)
    labels = np.where(rng.random((B, S)) < 0.15, ids, -100).astype(np.int64)
    labels[0, 0] = ids[0, 0]  # at least one label
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}

    tmp_obj = None
    if args.keep:
        work = Path(args.keep)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp_obj = tempfile.TemporaryDirectory()
        work = Path(tmp_obj.name)

    # --- export --------------------------------------------------------------
    model = fresh_model()
    onnx_path = work / "bert.onnx"
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.eval()
        torch.onnx.export(model, tuple(torch.from_numpy(feed[n]) for n in names), str(onnx_path),
                          dynamo=False, opset_version=14, do_constant_folding=True,
                          input_names=names, output_names=["logits"])
    np.savez(work / "in.npz", **feed, labels=labels, lr=np.float64(LR), step=np.int64(1))

    # --- pf --------------------------------------------------------------------
    def pf_run(*extra: str) -> str:
        cmd = [str(tool("pf-run")), str(onnx_path), "--training-step",
               "--inputs", str(work / "in.npz"), "--num-threads", str(args.threads),
               "--clip-norm", str(CLIP), *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc.stdout

    def pf_case(kfac: bool) -> tuple[float, float, float]:
        flags = ["--kfac"] if kfac else []
        # The first step's loss (the outputs of a one-step run)...
        out = work / f"pf{'-kfac' if kfac else ''}.npz"
        pf_run(*flags, "--outputs", str(out))
        loss = float(np.load(out)["loss"])
        # ...then the timed runs: the step alone, as torch's, returning no
        # gradients or factors (pf-run times model.run, not the compile).
        text = pf_run(*flags, "--keep-gradients=false", "--export-factors=false",
                      "--repeat", str(args.repeat))
        m = re.search(r"median ([0-9.]+) ms over \d+ runs \(min ([0-9.]+) ms\)", text)
        if not m:
            raise RuntimeError(f"no median in pf-run's output:\n{text}")
        return loss, float(m.group(1)), float(m.group(2))

    # --- torch -------------------------------------------------------------------
    t_in = {k: torch.from_numpy(v) for k, v in feed.items()}
    t_labels = torch.from_numpy(labels)

    def adamw(model):
        decay = [p for n, p in model.named_parameters() if p.dim() > 1]
        no_decay = [p for n, p in model.named_parameters() if p.dim() <= 1]
        return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                  {"params": no_decay, "weight_decay": 0.0}], lr=LR)

    def timed(step, n_warm: int, n: int) -> tuple[float, list[float]]:
        first = step()
        for _ in range(n_warm - 1):
            step()
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
        return first, times

    first_grads = {}

    def torch_adamw() -> tuple[float, list[float]]:
        model = fresh_model()
        opt = adamw(model)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = model(**t_in, labels=t_labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            if not first_grads:  # the first step's clipped gradients, for the check
                # the exporter folds linear weights to [in, out]: compare those transposed
                folded = {f"{n}.weight" for n, m in model.named_modules()
                          if isinstance(m, torch.nn.Linear)}
                first_grads.update({n: p.grad.numpy().T.copy() if n in folded
                                    else p.grad.numpy().copy()
                                    for n, p in model.named_parameters()})
            opt.step()
            return loss.item()
        return timed(step, max(args.warmup, 1), args.repeat)

    def grad_difference(pf_npz: Path) -> tuple[float, float, int]:
        """Max abs difference of pf's first-step clipped gradients from
        torch's (linear weights as the exporter folded them, [in, out]; the
        tied word embedding with the decoder's share in both), the largest
        gradient entry, and how many parameters were compared."""
        data = np.load(pf_npz)
        worst, largest, n = 0.0, 0.0, 0
        for name, want in first_grads.items():
            key = f"grad/{name}"
            if key not in data.files:
                raise RuntimeError(f"pf has no {key}; it has {sorted(data.files)[:5]} ...")
            got = data[key]
            worst = max(worst, float(np.abs(got - want).max()))
            largest = max(largest, float(np.abs(want).max()))
            n += 1
        return worst, largest, n

    def torch_asdl() -> tuple[float, list[float]]:
        import asdl
        model = fresh_model()
        opt = adamw(model)
        # ASDL's Fisher maker calls the loss function with reduction="sum"
        # and divides the loss and the gradients by data_size: with the
        # labelled tokens as data_size they are the mean loss's, as torch's.
        count = int((labels != -100).sum())
        config = asdl.PreconditioningConfig(
            data_size=count, damping=KFAC_DAMPING, ema_decay=1 - KFAC_DECAY,
            preconditioner_upd_interval=1, curvature_upd_interval=1,
            # encoder linears only: not the embeddings, LayerNorms or the MLM head
            ignore_modules=[torch.nn.Embedding, torch.nn.LayerNorm, "cls."])
        maker = asdl.KfacGradientMaker(model, config, fisher_type=asdl.FISHER_EMP)
        kfac_layers = [n for n, _ in maker.named_modules_for(asdl.SHAPE_KRON)]

        def step():
            opt.zero_grad(set_to_none=True)
            dummy = maker.setup_model_call(model, **t_in)
            maker.setup_loss_call(torch.nn.functional.cross_entropy, dummy.logits.view(-1, V),
                                  t_labels.view(-1), ignore_index=-100)
            _, loss = maker.forward_and_backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
            return loss.item()
        first, times = timed(step, max(args.warmup, 1), args.repeat)
        return first, times, kfac_layers

    # --- run: pf, torch, pf + K-FAC, torch + ASDL ----------------------------------
    rows = []
    pf_loss, pf_ms, pf_min = pf_case(kfac=False)
    t_loss, t_times = torch_adamw()
    grad_diff = grad_difference(work / "pf.npz")
    rows.append(("training step, AdamW", pf_ms, pf_min, "PyTorch eager",
                 statistics.median(t_times), min(t_times), pf_loss, t_loss, GOAL_ADAMW))
    asdl_error = None
    if not args.no_asdl:
        try:
            import asdl  # noqa: F401
        except ImportError as err:
            asdl_error = f"ASDL not importable ({err}); pip install asdfghjkl"
    kpf_loss, kpf_ms, kpf_min = pf_case(kfac=True)
    kfac_layers = []
    if args.no_asdl:
        asdl_error = "skipped (--no-asdl)"
    if asdl_error is None:
        try:
            a_loss, a_times, kfac_layers = torch_asdl()
            rows.append(("K-FAC step (every step)", kpf_ms, kpf_min, "PyTorch + ASDL",
                         statistics.median(a_times), min(a_times), kpf_loss, a_loss, GOAL_KFAC))
        except Exception as err:  # report, keep the AdamW figures
            asdl_error = f"{type(err).__name__}: {err}"
    if asdl_error is not None:
        rows.append(("K-FAC step (every step)", kpf_ms, kpf_min, f"(ASDL: {asdl_error})",
                     float("nan"), float("nan"), kpf_loss, float("nan"), GOAL_KFAC))

    # --- report ----------------------------------------------------------------
    try:
        from importlib.metadata import version
        asdl_version = version("asdfghjkl")
    except Exception:
        asdl_version = "absent"
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    print(f"BERT-{cfg.name} BertForMaskedLM (layers {cfg.num_hidden_layers}, hidden "
          f"{cfg.hidden_size}, vocab {V}), batch {B} x {S}, {int((labels != -100).sum())} "
          f"labelled tokens, full decoder; {args.threads} threads each; "
          f"median of {args.repeat} steps")
    print(f"machine: {cpu}, {os.cpu_count()} CPUs; OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"torch {torch.__version__} (threads {torch.get_num_threads()}, attention "
          f"{model.config._attn_implementation}), transformers {transformers.__version__}, "
          f"asdfghjkl {asdl_version}, numpy {np.__version__}")
    if kfac_layers:
        print(f"ASDL K-FAC layers ({len(kfac_layers)}): {kfac_layers[0]} ... {kfac_layers[-1]}")
    print()
    print("| step | pf median (min) ms | reference | reference median (min) ms | pf / ref | goal "
          "| first-step loss pf / ref | difference |")
    print("|---|---|---|---|---|---|---|---|")
    for name, pms, pmin, ref, rms, rmin, pl, rl, goal in rows:
        ratio = pms / rms
        met = "met" if ratio <= goal else "not met"
        print(f"| {name} | {pms:.1f} ({pmin:.1f}) | {ref} | {rms:.1f} ({rmin:.1f}) | "
              f"{ratio:.2f} | <= {goal} ({met if ratio == ratio else 'n/a'}) | "
              f"{pl:.7f} / {rl:.7f} | {abs(pl - rl):.1e} |")
    print()
    print(f"AdamW first step, gradients after clipping to norm {CLIP}: pf - torch max abs "
          f"{grad_diff[0]:.1e} over {grad_diff[2]} parameters (largest entry {grad_diff[1]:.2e})")
    if tmp_obj is not None:
        tmp_obj.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
