#!/usr/bin/env python3
"""Convergence table (training issue): K-FAC against AdamW and LAMB.

BERT-tiny (1 block by default, vocabulary of the generated corpus) trained
for masked LM on the generated corpus with pf-train, batch 64 x 32 tokens,
linear warm-up (10 steps) and decay. For each optimizer the learning rate is
tuned over a small grid (the best median over the seeds at the primary
target). Each run reports, per target, the first step at which the training
loss averaged over the last `--window` steps reaches it, and the first
evaluation (every `--eval-every` steps, on 256 held-out sequences with fixed
masks) at which the held-out loss does; wall times are steps x the median
time per training step.

    PYTHONPATH=python python3 bench/convergence.py [--seeds 3] [--steps 400] [--jobs 2]

Prints a table and, with --json, writes the raw results. Not a test. Runs
`--jobs` trainings at once with one runtime thread each (wall times are
comparable within one invocation only).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pipefisher import make_bert_model, save_model  # noqa: E402
from pipefisher.corpus import make_corpus  # noqa: E402
from pipefisher.tools import tool  # noqa: E402

eval_every = 5

KFAC = ["--kfac", "--kfac-damping", "1e-5", "--kfac-decay", "0.5"]
# name -> (pf-train flags, learning rates to try)
OPTIMIZERS = {
    "adamw": (["--optimizer", "adamw"], [2e-3, 3e-3, 5e-3]),
    "lamb": (["--optimizer", "lamb"], [1e-2, 2e-2, 4e-2]),
    # K-FAC-preconditioned gradients of the encoder linears, then AdamW for
    # every parameter; inverses refreshed every step.
    "kfac+adamw": (["--optimizer", "adamw", *KFAC, "--kfac-refresh", "1"], [2e-3, 3e-3, 5e-3]),
    # The same with inverses 3 steps stale, as the pf pipeline schedule
    # refreshes them for BERT-Large on Chimera (K = 3, docs/schedule.md) ...
    "kfac+adamw/3": (["--optimizer", "adamw", *KFAC, "--kfac-refresh", "3",
                      "--kfac-refresh-warmup", "0"], [3e-3]),
    # ... and after fresh inverses for the first 50 steps (pf-train's default).
    "kfac+adamw/3w": (["--optimizer", "adamw", *KFAC, "--kfac-refresh", "3",
                       "--kfac-refresh-warmup", "50"], [3e-3, 5e-3]),
}


def run(model, corpus, flags, lr, seed, steps, batch):
    cmd = [str(tool("pf-train")), str(model), "--corpus", str(corpus), "--batch", str(batch),
           "--steps", str(steps), "--lr", str(lr), "--warmup", "10", "--seed", str(seed),
           "--log-every", "1", "--num-threads", "1", "--eval-every", str(eval_every), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    steps_re = r"step\s+\d+\s+loss\s+([0-9.naninf]+).*ms/step\s+([0-9.]+)"
    logged = [(float(a), float(b)) for a, b in re.findall(steps_re, proc.stdout)]
    evals = [(int(a), float(b))
             for a, b in re.findall(r"eval\s+(\d+)\s+loss\s+([0-9.naninf]+)", proc.stdout)]
    return {"lr": lr, "seed": seed, "diverged": proc.returncode != 0,
            "losses": [loss for loss, _ in logged], "evals": evals,
            "ms_per_step": statistics.median(ms for _, ms in logged) if logged else float("nan")}


def steps_to_target(losses, target, window):
    for i in range(window, len(losses) + 1):
        if np.mean(losses[i - window:i]) <= target:
            return i
    return None


def evals_to_target(evals, target):
    return next((step for step, loss in evals if loss <= target), None)


def median_or_inf(values):
    return statistics.median(v if v is not None else float("inf") for v in values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--targets", default="2.0,1.6,1.4",
                        help="losses to reach; the first is used to pick the learning rate")
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", help="comma-separated optimizer names to run")
    parser.add_argument("--json")
    args = parser.parse_args()
    targets = [float(t) for t in args.targets.split(",")]
    primary = targets[-1]
    names = args.only.split(",") if args.only else list(OPTIMIZERS)
    global eval_every
    eval_every = args.eval_every

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = make_corpus(sequences=4000, seq_len=32, seed=0)
        vocab = len(corpus.pop("vocab"))
        np.savez(tmp / "corpus.npz", **corpus)
        save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=args.layers,
                                   seed=0), tmp / "model.onnx")
        jobs = [(name, lr, seed) for name in names for lr in OPTIMIZERS[name][1]
                for seed in range(args.seeds)]
        with ThreadPoolExecutor(args.jobs) as pool:
            done = list(pool.map(lambda j: (j, run(tmp / "model.onnx", tmp / "corpus.npz",
                                                   OPTIMIZERS[j[0]][0], j[1], j[2], args.steps,
                                                   args.batch)), jobs))

    results = {}
    for name in names:
        best = None
        for lr in OPTIMIZERS[name][1]:
            runs = [r for (n, l, _), r in done if n == name and l == lr]
            for r in runs:
                r["steps_to"] = {t: None if r["diverged"] else
                                 steps_to_target(r["losses"], t, args.window) for t in targets}
                r["evals_to"] = {t: None if r["diverged"] else evals_to_target(r["evals"], t)
                                 for t in targets}
            entry = {"lr": lr, "runs": runs,
                     "median": {t: median_or_inf([r["steps_to"][t] for r in runs])
                                for t in targets},
                     "eval_median": {t: median_or_inf([r["evals_to"][t] for r in runs])
                                     for t in targets}}
            if best is None or entry["median"][primary] < best["median"][primary]:
                best = entry
        results[name] = best

    first_order = [n for n in names if not n.startswith("kfac")]
    print(f"BERT-tiny {args.layers} block(s), batch {args.batch} x 32, {args.seeds} seeds; "
          f"learning rate chosen by the training loss at {primary}")
    for key, what in (("median", f"training loss (mean over {args.window} steps)"),
                      ("eval_median", f"held-out loss (every {args.eval_every} steps)")):
        print(f"\nsteps until the {what} reaches each target (median over seeds)")
        header = f"{'optimizer':<14} {'lr':>7}"
        for t in targets:
            header += f" {'to ' + str(t):>10} {'ratio':>6}"
        header += f" {'ms/step':>8} {'s to ' + str(primary):>9}"
        print(header)
        for name in names:
            r = results[name]
            line = f"{name:<14} {r['lr']:>7.0e}"
            for t in targets:
                base = min((results[n][key][t] for n in first_order), default=float("nan"))
                ratio = r[key][t] / base if base not in (0, float("inf")) else float("nan")
                line += f" {r[key][t]:>10} {ratio:>6.2f}"
            ms = statistics.median(x["ms_per_step"] for x in r["runs"])
            line += f" {ms:>8.1f} {r[key][primary] * ms / 1e3:>9.1f}"
            print(line)
            field = "steps_to" if key == "median" else "evals_to"
            print(f"{'':<14} per seed at {primary}: "
                  + ", ".join(str(x[field][primary] or "-") for x in r["runs"]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
