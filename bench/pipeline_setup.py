"""What the pipelined-training benchmarks share: the model and corpus
options, the generated BERT model and corpus, and how they start pf-train
(alone or under `mpirun -np 2`)."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pipefisher import make_bert_model, save_model  # noqa: E402
from pipefisher.corpus import make_corpus  # noqa: E402
from pipefisher.tools import tool  # noqa: E402, F401  (re-exported)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default="mini")
    parser.add_argument("--vocab", type=int, default=30522,
                        help="vocabulary of the model (the corpus uses the first ids)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--microbatches", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--repeat", type=int, default=3)


def mpirun_two_ranks() -> list[str]:
    """`mpirun -np 2`, oversubscribed (and allowed as root, as CI runs)."""
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise SystemExit("mpirun not found (scripts/setup.sh installs Open MPI)")
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return [mpirun, "--oversubscribe", *root, "-np", "2"]


def prepare(tmp: Path, args: argparse.Namespace) -> list[str]:
    """Writes the model and corpus into `tmp`; returns pf-train's common
    arguments (one thread per process, a progress line every step)."""
    corpus = make_corpus(sequences=2000, seq_len=args.seq, seed=1)
    corpus.pop("vocab")
    np.savez(tmp / "corpus.npz", **corpus)
    save_model(make_bert_model(args.config, vocab_size=args.vocab, seed=2), tmp / "m.onnx")
    return [str(tmp / "m.onnx"), "--corpus", str(tmp / "corpus.npz"), "--batch",
            str(args.batch), "--steps", str(args.steps), "--log-every", "1",
            "--num-threads", "1", "--lr", "1e-3"]


def run(args: list[str]) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout
