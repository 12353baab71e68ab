#!/usr/bin/env python3
"""The tied word embedding's gradient in a pipelined step (pipeline-execution
issue): summed per micro-batch on the last stage's rank (pf.reduce_microbatch,
the default) against every micro-batch's piece kept on both ranks to one
step-end all-reduce (`tied-per-microbatch=false`), measured in the same run:
ms/step and the most gradient bytes each rank held before the step's
combination (pf-train's `gradients held at most` line).

    PYTHONPATH=python python3 bench/tied_gradient.py [--config mini] [--vocab 30522]
        [--batch 16] [--seq 64] [--steps 12] [--microbatches 4 8]
        [--schedules gpipe 1f1b] [--repeat 3]

`mpirun -np 2 pf-train --pipeline "stages=2 schedule=S microbatches=N"`, AdamW,
one thread per rank; ms/step is the mean of the progress lines after the
first step, median over --repeat runs (the bytes are the same in every run).
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

GRADIENTS_HELD = re.compile(r"^rank (\d+): gradients held at most: (\d+) bytes", re.M)


def ms_per_step(stdout: str) -> float:
    steps = [float(m.group(1)) for m in
             re.finditer(r"^step\s+\d+\s.*ms/step\s+([0-9.]+)", stdout, re.M)]
    if len(steps) < 2:
        raise SystemExit("fewer than two progress lines:\n" + stdout)
    return statistics.mean(steps[1:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--schedules", nargs="+", default=["gpipe", "1f1b"])
    args = parser.parse_args()
    mpirun = mpirun_two_ranks()
    with tempfile.TemporaryDirectory() as tmp:
        common = prepare(Path(tmp), args)
        print(f"BERT-{args.config} (vocab {args.vocab}), batch {args.batch} x {args.seq}, "
              f"{args.steps} steps, D = 2, AdamW, 1 thread per rank, median of {args.repeat}")
        print("| schedule | N | tied gradient | ms/step | vs kept | rank 0 gradients held (MB) "
              "| rank 1 gradients held (MB) |")
        print("|---|---|---|---|---|---|---|")
        for schedule in args.schedules:
            for n in args.microbatches:
                results = {}
                # Alternated, so drift in the machine's speed hits both alike.
                for _ in range(args.repeat):
                    for per_microbatch in ("false", "true"):
                        out = run([*mpirun, str(tool("pf-train")), *common, "--pipeline",
                                   f"stages=2 schedule={schedule} microbatches={n} "
                                   f"tied-per-microbatch={per_microbatch}"])
                        held = {int(r): int(b) for r, b in GRADIENTS_HELD.findall(out)}
                        times, _ = results.setdefault(per_microbatch, ([], held))
                        times.append(ms_per_step(out))
                kept = statistics.median(results["false"][0])
                for per_microbatch, label in (("false", "kept to the step end"),
                                              ("true", "reduced per micro-batch")):
                    times, held = results[per_microbatch]
                    t = statistics.median(times)
                    print(f"| {schedule} | {n} | {label} | {t:.1f} | {t / kept:.2f} | "
                          f"{held[0] / 1e6:.1f} | {held[1] / 1e6:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
