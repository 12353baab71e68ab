#!/usr/bin/env python3
"""Training from an artifact against training with the JIT (issue 37,
docs/artifacts.md): BERT-mini (4 blocks, hidden 256, vocabulary 30522) at
batch 8 x 128, AdamW and SGD + K-FAC, trained STEPS steps by pf-train (JIT:
compile, then train, in one process) and by pf-trainer from the artifact
pf-train --compile-only wrote, alternately, ROUNDS times each. Reported:
the median ms/step after the first five steps (the progress lines'), the
time to the first step (pf-train: import, build and JIT compilation;
pf-trainer: the artifact's check and load) and whether the two runs'
checkpoints are equal byte for byte. With --pipeline SPEC (its stages=D),
both run as D MPI ranks (`mpirun -np D pf-train --pipeline SPEC` against
`mpirun -np D pf-trainer` of the pipelined artifact; K-FAC with kfac=step),
each rank with --threads threads.

    PYTHONPATH=python python3 bench/artifact_training.py [--steps 20] [--rounds 2]
        [--pipeline "stages=2 schedule=1f1b microbatches=4" --threads 1]
"""

from __future__ import annotations

import argparse
import re
import shutil
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

KINDS = {"adamw": ["--optimizer", "adamw", "--lr", "1e-4"],
         "kfac": ["--optimizer", "sgd", "--lr", "0.05", "--kfac"]}
LINE = re.compile(r"^step\s+(\d+)\s+loss\s+[0-9.]+.*ms/step\s+([0-9.]+)", re.M)


def timed(cmd):
    start = time.perf_counter()
    proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return proc.stdout, time.perf_counter() - start


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="mini")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pipeline", default="",
                    help="a --pipeline spec with stages=D: run both tools as D MPI ranks")
    args = ap.parse_args()
    launcher = []
    if args.pipeline:
        stages = re.search(r"stages=(\d+)", args.pipeline)
        if not stages or not shutil.which("mpirun"):
            ap.error("--pipeline needs stages=D and mpirun")
        launcher = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", stages.group(1)]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        corpus = make_corpus(sequences=8 * (args.steps + 4), seq_len=128, seed=3)
        corpus.pop("vocab")
        np.savez(tmp / "c.npz", **corpus)
        save_model(make_bert_model(args.config, vocab_size=30522), tmp / "m.onnx")
        common = [str(tmp / "m.onnx"), "--corpus", str(tmp / "c.npz"), "--batch", "8",
                  "--num-threads", str(args.threads)]
        run = ["--steps", str(args.steps), "--log-every", "1"]
        print("| step | pf-train (JIT) ms/step | pf-trainer (artifact) ms/step | ratio | "
              "JIT: to the first step | artifact: compile-only, then to the first step | "
              "checkpoints equal |")
        print("|---|---|---|---|---|---|---|")
        for kind, flags in KINDS.items():
            if args.pipeline:
                spec = args.pipeline + (" kfac=step" if kind == "kfac" else "")
                flags = [*flags, "--pipeline", spec]
            artifact = tmp / kind
            _, compile_s = timed([str(tool("pf-train")), *common, *flags, "--compile-only",
                                  "--artifact", str(artifact)])
            jit_ms, art_ms, jit_first, art_first = [], [], [], []
            for _ in range(args.rounds):
                for name, cmd, ms, first in (
                        ("jit", [*launcher, str(tool("pf-train")), *common, *flags], jit_ms,
                         jit_first),
                        ("art", [*launcher, str(tool("pf-trainer")), str(artifact), "--corpus",
                                 str(tmp / "c.npz"), "--num-threads", str(args.threads)],
                         art_ms, art_first)):
                    out, seconds = timed([*cmd, *run, "--checkpoint", str(tmp / f"{name}.npz")])
                    steps = [(int(s), float(m)) for s, m in LINE.findall(out)]
                    ms += [m for s, m in steps if s > 5]
                    # Wall time before the training steps: the run less its steps.
                    first.append(seconds - sum(m for _, m in steps) / 1e3)
            with np.load(tmp / "jit.npz") as a, np.load(tmp / "art.npz") as b:
                equal = sorted(a.files) == sorted(b.files) and all(
                    a[k].tobytes() == b[k].tobytes() for k in a.files)
            label = f"{args.config} {kind}" + (f" ({args.pipeline})" if args.pipeline else "")
            print(f"| {label} | {median(jit_ms):.1f} | {median(art_ms):.1f} | "
                  f"{median(art_ms) / median(jit_ms):.3f} | {median(jit_first):.2f} s | "
                  f"{compile_s:.2f} s, then {median(art_first):.2f} s | "
                  f"{'yes' if equal else 'NO'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
