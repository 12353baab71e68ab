#!/usr/bin/env python3
"""Training-step figures (training issue): step time of BERT-mini with and
without K-FAC, and the per-layer profile the pipeline scheduler consumes
(forward, backward, curvature A+B, inversion, preconditioning), measured with
pf-run --profile on the compiled K-FAC step and converted to the scheduler's
format; also the step of K-FAC in the factors' eigenbasis (`basis=eigen`),
and both steps with the decoder applied only at the masked positions
(`pf-add-masked-lm-loss{predictions=P}`, pf-train --predictions).

    PYTHONPATH=python python3 bench/training_step.py [--config mini] [--batch 8] [--seq 128]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pipefisher import make_bert_model, save_model  # noqa: E402
from pipefisher.profile_convert import convert  # noqa: E402
from pipefisher.tools import tool  # noqa: E402


def sh(*args: str) -> str:
    return subprocess.run(list(args), check=True, capture_output=True, text=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="mini")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--profile-out", help="write the scheduler profile here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        save_model(make_bert_model(args.config, vocab_size=args.vocab), tmp / "m.onnx")
        sh(str(tool("pf-translate")), "--import-onnx", str(tmp / "m.onnx"),
           "--dim", f"batch={args.batch}", "--dim", f"sequence={args.seq}",
           "--emit-bytecode", "-o", str(tmp / "m.mlirbc"))
        rng = np.random.default_rng(0)
        ids = rng.integers(5, args.vocab, (args.batch, args.seq)).astype(np.int64)
        labels = np.where(rng.random(ids.shape) < 0.15, ids, -100).astype(np.int64)
        np.savez(tmp / "in.npz", input_ids=ids, token_type_ids=np.zeros_like(ids),
                 attention_mask=np.ones_like(ids), labels=labels, lr=np.float64(1e-4),
                 step=np.int64(1))
        # The decoder at the masked positions only (pf-train --predictions P):
        # each row's masked positions, padded to the most any row has.
        predictions = int((labels != -100).sum(axis=1).max())
        positions = np.zeros((args.batch, predictions), np.int64)
        gathered = np.full((args.batch, predictions), -100, np.int64)
        for row in range(args.batch):
            where = np.flatnonzero(labels[row] != -100)
            positions[row, :len(where)] = where
            gathered[row, :len(where)] = labels[row, where]
        np.savez(tmp / "in_gathered.npz", input_ids=ids, token_type_ids=np.zeros_like(ids),
                 attention_mask=np.ones_like(ids), labels=gathered, mlm_positions=positions,
                 lr=np.float64(1e-4), step=np.int64(1))
        kfac_inverse = ["--pf-insert-kfac", "--pf-build-gradients", "--pf-kfac-precondition"]
        gather = f"--pf-add-masked-lm-loss=predictions={predictions}"
        times = {}
        # The inverse basis last: the per-layer profile is the last run's.
        for name, kfac, loss in (
                ("first-order (AdamW)", [], "--pf-add-masked-lm-loss"),
                (f"first-order (AdamW), decoder at P={predictions}", [], gather),
                (f"K-FAC + AdamW, refresh every step, decoder at P={predictions}", kfac_inverse,
                 gather),
                ("K-FAC + AdamW, eigenbasis, refresh",
                 ["--pf-insert-kfac", "--pf-build-gradients",
                  "--pf-kfac-precondition=basis=eigen"], "--pf-add-masked-lm-loss"),
                ("K-FAC + AdamW, refresh every step", kfac_inverse, "--pf-add-masked-lm-loss")):
            passes = [loss, *(kfac or ["--pf-build-gradients"]),
                      "--pf-add-optimizer", "--canonicalize", "--cse"]
            inputs = tmp / ("in_gathered.npz" if loss == gather else "in.npz")
            step = tmp / f"step{len(times)}.mlirbc"
            sh(str(tool("pf-opt")), str(tmp / "m.mlirbc"), *passes, "--emit-bytecode",
               "-o", str(step))
            profile = tmp / f"profile{len(times)}.json"
            out = sh(str(tool("pf-run")), str(step), "--inputs", str(inputs),
                     "--repeat", str(args.repeat), "--num-threads", str(args.threads),
                     "--profile", str(profile))
            times[name] = float(re.search(r"median ([0-9.]+) ms", out).group(1))
        layers = convert(json.loads(profile.read_text()))

    print(f"BERT-{args.config}, batch {args.batch} x {args.seq}, vocab {args.vocab}, "
          f"{args.threads} threads, median of {args.repeat}:")
    for name, ms in times.items():
        print(f"  {name:<56} {ms:8.1f} ms/step")
    print("per-layer profile (ms; forward/backward/curvature per micro-batch, inversion per "
          "refresh, preconditioning per step):")
    print(f"  {'layer':<8} {'forward':>8} {'backward':>9} {'curv A+B':>9} {'inversion':>10} "
          f"{'precond':>8}")
    for layer in layers["layers"]:
        print(f"  {layer['name']:<8} {layer['forward']:8.2f} {layer['backward']:9.2f} "
              f"{layer['curvature']:9.2f} {layer['inversion']:10.2f} {layer['precondition']:8.2f}")
    if args.profile_out:
        Path(args.profile_out).write_text(json.dumps(layers, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
