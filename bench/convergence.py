#!/usr/bin/env python3
"""Convergence table (training issue): K-FAC against AdamW and LAMB.

BERT-tiny (1 block by default, vocabulary of the generated corpus) trained
for masked LM on the generated corpus with pf-train. For each optimizer the
learning rate is tuned over a small grid (best median over seeds), and each
run reports the first step at which the loss, averaged over a sliding window
of steps, reaches the target, plus the wall time to get there.

    PYTHONPATH=python python3 bench/convergence.py [--seeds 3] [--steps 300] [--target 2.6]

Prints a table and, with --json, writes the raw results. Not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pipefisher import make_bert_model, save_model  # noqa: E402
from pipefisher.corpus import make_corpus  # noqa: E402
from pipefisher.tools import tool  # noqa: E402

# name -> (pf-train flags, learning rates to try)
OPTIMIZERS = {
    "adamw": (["--optimizer", "adamw"], [1e-3, 3e-3, 1e-2]),
    "lamb": (["--optimizer", "lamb"], [3e-3, 1e-2, 3e-2]),
    "kfac+adamw": (["--optimizer", "adamw", "--kfac", "--kfac-refresh", "10"],
                   [1e-3, 3e-3, 1e-2]),
    # PipeFisher-like: K-FAC layers with SGD momentum, the rest with AdamW.
    "kfac-sgd+adamw": (["--optimizer", "adamw", "--kfac", "--kfac-refresh", "10",
                        "--kfac-optimizer", "sgd", "--kfac-lr-scale", "30"],
                       [1e-3, 3e-3, 1e-2]),
}


def run(model, corpus, flags, lr, seed, steps, batch):
    cmd = [str(tool("pf-train")), str(model), "--corpus", str(corpus), "--batch", str(batch),
           "--steps", str(steps), "--lr", str(lr), "--warmup", "10", "--seed", str(seed),
           "--log-every", "1", "--num-threads", "2", *flags]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    losses = [float(x) for x in re.findall(r"loss\s+([0-9.naninf]+)", proc.stdout)]
    if proc.returncode != 0:
        return {"lr": lr, "seed": seed, "diverged": True, "losses": losses, "wall_s": wall}
    return {"lr": lr, "seed": seed, "diverged": False, "losses": losses, "wall_s": wall}


def steps_to_target(losses, target, window):
    for i in range(window, len(losses) + 1):
        if np.mean(losses[i - window:i]) <= target:
            return i
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--target", type=float, default=2.6)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = make_corpus(sequences=4000, seq_len=32, seed=0)
        vocab = len(corpus.pop("vocab"))
        np.savez(tmp / "corpus.npz", **corpus)
        save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=args.layers,
                                   seed=0), tmp / "model.onnx")
        results = {}
        for name, (flags, lrs) in OPTIMIZERS.items():
            best = None
            for lr in lrs:
                runs = [run(tmp / "model.onnx", tmp / "corpus.npz", flags, lr, seed, args.steps,
                            args.batch) for seed in range(args.seeds)]
                for r in runs:
                    r["steps_to_target"] = None if r["diverged"] else steps_to_target(
                        r["losses"], args.target, args.window)
                    r["time_to_target_s"] = (r["wall_s"] * r["steps_to_target"] / args.steps
                                             if r["steps_to_target"] else None)
                reached = [r["steps_to_target"] or float("inf") for r in runs]
                median = statistics.median(reached)
                entry = {"lr": lr, "runs": runs, "median_steps": median}
                if best is None or median < best["median_steps"]:
                    best = entry
            results[name] = best

    base = min(r["median_steps"] for n, r in results.items() if not n.startswith("kfac"))
    print(f"target: mean loss over {args.window} steps <= {args.target}; "
          f"{args.seeds} seeds, batch {args.batch}, {args.layers} block(s)")
    print(f"{'optimizer':<12} {'best lr':>8} {'steps (per seed)':>22} {'median':>7} "
          f"{'vs best 1st-order':>18} {'time to target (s)':>19}")
    for name, r in results.items():
        per_seed = ",".join(str(x["steps_to_target"] or "-") for x in r["runs"])
        times = [x["time_to_target_s"] for x in r["runs"] if x["time_to_target_s"]]
        ratio = r["median_steps"] / base if base not in (0, float("inf")) else float("nan")
        print(f"{name:<12} {r['lr']:>8.0e} {per_seed:>22} {r['median_steps']:>7} "
              f"{ratio:>18.2f} {statistics.median(times) if times else float('nan'):>19.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
