#!/usr/bin/env python3
"""Executed stage balance of `mpirun -np D pf-train --pipeline`: the stage
imbalance (largest rank's time over the mean of the ranks) measured from the
run's `--trace`, against the imbalance the cost model of pf-split-stages
predicts for the same cut (`print-costs=true`).

    python3 bench/stage_balance.py [--models mini small] [--grains block half]
        [--predictions 0 10] [--ranks 2] [--steps 6] [--batch 16] [--seq-len 64]

For every (model, predictions, grain) it

1. writes the model (`python -m pipefisher.bert_onnx --config M`) and a corpus
   (`python -m pipefisher.corpus --seq-len S`) once;
2. runs `pf-translate` + `pf-opt --pf-graph-opt --pf-add-masked-lm-loss
   --pf-build-gradients=tag-origin=true --pf-split-stages="stages=D grain=G
   microbatches=N print-costs=true"` on the micro-batch's shapes, as pf-train
   builds it: the units, their stages and the modelled stage times (analytic
   a100 roofline plus the per-parameter accumulation and update, the pass's
   default);
3. runs `mpirun -np D pf-train M.onnx --corpus C --batch B --num-threads 1
   --pipeline "stages=D schedule=1f1b microbatches=4 grain=G" [--predictions P]
   --steps N --trace T` and sums, per rank and step (step 0, the warm-up, left
   out), the durations of its forward and backward passes ("passes") and of
   everything on its compute lane ("busy": passes, the per-micro-batch
   accumulation of the tied embedding's gradient, the update).

Imbalance = max over ranks / mean over ranks, per step, averaged. Ratios of
ranks within one run are what to compare: on a shared machine the absolute
times move with the load, the ratios much less.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(os.environ.get("PF_BUILD_DIR", ROOT / "build")) / "bin"
PASS_KINDS = {"forward", "backward", "backward-input", "backward-weight"}


def run(cmd, **kwargs):
    return subprocess.run([str(c) for c in cmd], check=True, text=True, capture_output=True,
                          **kwargs)


def measured(trace_path, first_step=1):
    """Per rank: mean ms per step of its passes and of all its compute."""
    trace = json.loads(Path(trace_path).read_text())
    passes, busy, steps = defaultdict(float), defaultdict(float), set()
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e["tid"] % 2 or e["args"]["step"] < first_step:
            continue
        rank, ms = e["tid"] // 2, e["dur"] / 1e3
        steps.add(e["args"]["step"])
        busy[rank] += ms
        if e["cat"] in PASS_KINDS:
            passes[rank] += ms
    n = len(steps)
    ranks = sorted(busy)
    return [passes[r] / n for r in ranks], [busy[r] / n for r in ranks], n


def imbalance(values):
    return max(values) / (sum(values) / len(values))


def predicted(work, model, ranks, grain, predictions, microbatches, micro_batch, seq_len):
    ir = work / f"{model}-mb{micro_batch}.mlirbc"
    if not ir.exists():
        run([BIN / "pf-translate", "--import-onnx", work / f"{model}.onnx", "--dim",
             f"batch={micro_batch}", "--dim", f"sequence={seq_len}", "--emit-bytecode", "-o", ir])
    proc = run([BIN / "pf-opt", ir, "--pf-graph-opt",
                f"--pf-add-masked-lm-loss=predictions={predictions}",
                "--pf-build-gradients=tag-origin=true",
                f"--pf-split-stages=stages={ranks} grain={grain} microbatches={microbatches} "
                "print-costs=true",
                "-o", os.devnull])
    line = next(l for l in proc.stderr.splitlines() if l.startswith("pf-split-stages costs"))
    units = re.findall(r"([\w.]+) ([\d.e+-]+) -> (\d+)", line.split("): ", 1)[1])
    stages = [float(x) for x in line.split("; stages ")[1].split(" (")[0].split()]
    return units, stages


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["mini", "small"])
    parser.add_argument("--grains", nargs="+", default=["block", "half"])
    parser.add_argument("--predictions", nargs="+", type=int, default=[0, 10])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/pf-stage-balance"))
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args()
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    corpus = work / f"corpus-{args.seq_len}.npz"
    if not corpus.exists():
        run([sys.executable, "-m", "pipefisher.corpus", "--out", corpus, "--sequences", "2000",
             "--seq-len", args.seq_len], env=env)
    mpirun = shutil.which("mpirun")
    rows = []
    for model in args.models:
        if not (work / f"{model}.onnx").exists():
            run([sys.executable, "-m", "pipefisher.bert_onnx", "--config", model, "--out",
                 work / f"{model}.onnx"], env=env)
        for p in args.predictions:
            for grain in args.grains:
                units, stages = predicted(work, model, args.ranks, grain, p, args.microbatches,
                                          args.batch // args.microbatches, args.seq_len)
                trace = work / f"{model}-p{p}-{grain}.trace.json"
                cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", args.ranks,
                       BIN / "pf-train", work / f"{model}.onnx", "--corpus", corpus, "--batch",
                       args.batch, "--num-threads", "1", "--steps", args.steps, "--pipeline",
                       f"stages={args.ranks} schedule=1f1b microbatches={args.microbatches} "
                       f"grain={grain}", "--trace", trace]
                if p:
                    cmd += ["--predictions", p]
                run(cmd)
                passes, busy, n = measured(trace)
                share_model = [s / sum(stages) for s in stages]
                share_measured = [x / sum(busy) for x in busy]
                row = {
                    "model": model, "predictions": p, "grain": grain,
                    "stages": [[u for u, _, s in units if int(s) == r]
                               for r in range(args.ranks)],
                    "modelled_imbalance": imbalance(stages),
                    "passes_ms": passes, "busy_ms": busy, "steps": n,
                    "passes_imbalance": imbalance(passes), "busy_imbalance": imbalance(busy),
                    "model_share": share_model, "measured_share": share_measured,
                    "command": " ".join(str(c) for c in cmd),
                }
                rows.append(row)
                last = row["stages"][-1]
                print(f"{model:5} P={p:<2} grain={grain:5} last stage {','.join(last):40.40} "
                      f"modelled {row['modelled_imbalance']:.3f}  measured passes "
                      f"{'/'.join(f'{x:.0f}' for x in passes)} ms -> "
                      f"{row['passes_imbalance']:.3f}  busy "
                      f"{'/'.join(f'{x:.0f}' for x in busy)} ms -> {row['busy_imbalance']:.3f}  "
                      f"last rank's share modelled/busy {share_model[-1]:.3f}/{share_measured[-1]:.3f}",
                      flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
