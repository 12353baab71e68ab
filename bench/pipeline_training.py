#!/usr/bin/env python3
"""Pipelined training figures (pipeline-execution issue): measured step time
of `mpirun -np 2 pf-train --pipeline` (one rank per stage, one thread each)
against single-process pf-train on the same batches, for GPipe and 1F1B with
N micro-batches (--schedules: also zb-h1, chimera), and the measured pipeline span and bubble share against the
simulation fed with the durations measured in the same run (pf-train's
`--svg` report).

    PYTHONPATH=python python3 bench/pipeline_training.py [--config mini] [--vocab 30522]
        [--batch 16] [--seq 64] [--steps 12] [--microbatches 4 8]
        [--schedules gpipe 1f1b [zb-h1] [chimera]]

Rows: (a) the pipeline with first-order AdamW; (b) the pipeline with K-FAC
in the bubbles (`--kfac --kfac-refresh-warmup 2 --pipeline "... kfac=bubbles"`:
two warm-up steps invert every step and measure the durations, then the
scheduler's K and placement; ms/step over the whole windows after the
warm-up); (c) the pipeline with all
K-FAC work every step inside the stage functions (`--kfac`: factors in the
forward/backward calls, inverses and preconditioning in each layer's
precondition call after the flush); for chimera also (b) and (c) with
`split-precondition=false` (both replicas precondition, and in (c) invert,
every layer, as before the split); (d) single-process pf-train with
`--micro-batches N` (AdamW, and with K-FAC); all on 1 thread per process.
ms/step is the mean of the per-step progress lines after the first step
(for (b): over the complete windows after the warm-up), median over --repeat
runs.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline_setup import add_model_arguments, mpirun_two_ranks, prepare, run, tool  # noqa: E402


def ms_per_step(stdout: str) -> float:
    """Mean ms/step of the steps after the first; with K-FAC in the bubbles,
    of the complete windows after the warm-up (from pf-train's plan line)."""
    steps = [(int(m.group(1)), float(m.group(2))) for m in
             re.finditer(r"^step\s+(\d+)\s.*ms/step\s+([0-9.]+)", stdout, re.M)]
    plan = re.search(r"windows of (\d+) step\(s\) from step (\d+)", stdout)
    if not plan:
        return statistics.mean(ms for step, ms in steps if step > 1)
    window, start = int(plan.group(1)), int(plan.group(2))
    after = [ms for step, ms in steps if step >= start]
    whole = len(after) // window * window
    return statistics.mean(after[len(after) - whole:] if whole else after)


def window_steps(stdout: str) -> str:
    plan = re.search(r"windows of (\d+) step", stdout)
    return plan.group(1) if plan else ""


def figure(stdout: str, name: str) -> tuple[float, float]:
    m = re.search(rf"{re.escape(name)}\s+([0-9.]+)%?\s+([0-9.]+)", stdout)
    return (float(m.group(1)), float(m.group(2))) if m else (float("nan"), float("nan"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.add_argument("--schedules", nargs="+", default=["gpipe", "1f1b"],
                        choices=["gpipe", "1f1b", "zb-h1", "zb-h2", "chimera"],
                        help="pipeline schedules of rows (a)-(c); chimera runs its two "
                             "replicas on the 2 ranks")
    args = parser.parse_args()
    mpirun = mpirun_two_ranks()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        common = prepare(tmp, args)
        print(f"BERT-{args.config} (vocab {args.vocab}), batch {args.batch} x {args.seq}, "
              f"{args.steps} steps, 1 thread per process, median of {args.repeat}")
        print("| N | run | ms/step | vs (d) AdamW | vs (a) | T_pipe measured / simulated (ms) | "
              "bubble measured / simulated | K-FAC bubble fill measured / simulated | K |")
        print("|---|---|---|---|---|---|---|---|---|")
        for n in args.microbatches:
            single = statistics.median(
                ms_per_step(run([str(tool("pf-train")), *common, "--micro-batches", str(n)]))
                for _ in range(args.repeat))
            kfac = statistics.median(
                ms_per_step(run([str(tool("pf-train")), *common, "--micro-batches", str(n),
                                 "--kfac"]))
                for _ in range(args.repeat))
            print(f"| {n} | (d) single-process AdamW | {single:.1f} | 1.00 | | | | | |")
            print(f"| {n} | (d) single-process K-FAC (every step) | {kfac:.1f} | "
                  f"{kfac / single:.2f} | | | | | |")
            bubbles_flags = ["--kfac", "--kfac-refresh-warmup", "2"]
            first_order = {}
            for schedule in args.schedules:
                runs = [("(a) pipeline " + schedule + " AdamW", [], ""),
                        ("(b) pipeline " + schedule + " K-FAC in the bubbles", bubbles_flags,
                         " kfac=bubbles"),
                        ("(c) pipeline " + schedule + " K-FAC every step", ["--kfac"], "")]
                if schedule == "chimera":
                    # The replicas' split preconditioning against both
                    # replicas preconditioning (and in (c) inverting) every
                    # layer.
                    runs.insert(2, ("(b) pipeline chimera K-FAC in the bubbles, every layer "
                                    "preconditioned on both replicas", bubbles_flags,
                                    " kfac=bubbles split-precondition=false"))
                    runs.append(("(c) pipeline chimera K-FAC every step, every layer "
                                 "inverted and preconditioned on both replicas", ["--kfac"],
                                 " split-precondition=false"))
                for label, flags, extra in runs:
                    rows = []
                    for _ in range(args.repeat):
                        out = run([*mpirun, str(tool("pf-train")), *common, *flags, "--pipeline",
                                   f"stages=2 schedule={schedule} microbatches={n}{extra}",
                                   "--svg", str(tmp / "m.svg")])
                        rows.append((ms_per_step(out), figure(out, "pipeline span T_pipe (ms)"),
                                     figure(out, "bubble fraction"),
                                     figure(out, "bubble fill (K-FAC)"), window_steps(out)))
                    rows.sort(key=lambda row: row[0])
                    t, span, bubble, fill, k = rows[len(rows) // 2]
                    first_order.setdefault(schedule, t)
                    fill_text = f"{fill[0]:.1f}% / {fill[1]:.1f}%" if flags else ""
                    print(f"| {n} | {label}, D=2 | {t:.1f} | {t / single:.2f} | "
                          f"{t / first_order[schedule]:.2f} | {span[0]:.1f} / {span[1]:.1f} | "
                          f"{bubble[0]:.1f}% / {bubble[1]:.1f}% | {fill_text} | {k} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
