#!/usr/bin/env python3
"""Training runs on the GPU from training artifacts, for scripts/gpu-check.sh
(issue 37: compile once, train anywhere; docs/artifacts.md).

``prepare`` (the CPU machine, with MLIR): writes a corpus of 128-token
sequences and compiles BERT training artifacts with ``pf-train
--compile-only`` (batch 8 x 128; AdamW, and K-FAC with SGD), into one folder
that gpu-check.sh packs with ``pf-trainer-portable``::

    python3 scripts/gpu_training.py prepare --build build --out STAGE [--models mini]

``check`` (the GPU machine: no MLIR): trains every artifact 20 steps with
the same trainer on the CPU backend and on the CUDA backend, compares the
losses step by step and reports the CUDA ms/step (median after the first
five steps), into ``training.json`` (``cuda_*`` are the ``--against``
device's: ``--against cpu`` is the script's test without a GPU)::

    python3 scripts/gpu_training.py check --bundle BUNDLE --out OUT [--time-budget S]

The bar: each step's loss within 1e-3 relative of the CPU backend's (fp32;
the two backends sum in different orders, and 20 updates carry the
difference on).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

# The models and their shapes: gpu_models.py's (BERT-mini and -base with the
# full vocabulary and tiled weights, batch 8 x 128).
from gpu_models import BATCH, CONFIGS, SEQUENCE  # noqa: E402

STEPS = 20
KINDS = {"adamw": ["--optimizer", "adamw", "--lr", "1e-4"],
         "kfac": ["--optimizer", "sgd", "--lr", "0.05", "--kfac"]}
LOSS_BAR = 1e-3
LINE = re.compile(r"^step\s+(\d+)\s+loss\s+([0-9.]+).*ms/step\s+([0-9.]+)", re.M)


def log(message: str) -> None:
    print(f"gpu_training: {message}", flush=True)


def prepare(args) -> int:
    build = Path(args.build).resolve()
    root = Path(__file__).resolve().parents[1]
    out = Path(args.out) / "training"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(root / "python"))
    sys.path.insert(0, str(root / "python"))
    import numpy as np
    from pipefisher.corpus import make_corpus
    corpus = make_corpus(sequences=BATCH * (STEPS + 4), seq_len=SEQUENCE, seed=3)
    corpus.pop("vocab")
    np.savez(out / "corpus.npz", **corpus)
    for config in args.models.split(","):
        name, vocab, init = CONFIGS[config]
        onnx = out / f"{config}.onnx"
        subprocess.run([sys.executable, "-m", "pipefisher.bert_onnx", "--config", name,
                        "--vocab", str(vocab), "--init", init, "--no-dedupe", "--out", str(onnx)],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        for kind, flags in KINDS.items():
            artifact = out / f"{config}-{kind}"
            t0 = time.perf_counter()
            subprocess.run([str(build / "bin" / "pf-train"), str(onnx), "--corpus",
                            str(out / "corpus.npz"), "--batch", str(BATCH), *flags,
                            "--compile-only", "--artifact", str(artifact)],
                           check=True, stdout=subprocess.DEVNULL)
            size = sum(f.stat().st_size for f in artifact.iterdir())
            log(f"{artifact.name}: compiled in {time.perf_counter() - t0:.1f} s, "
                f"{size / 2**20:.0f} MiB")
        onnx.unlink()
    return 0


def train(bundle: Path, artifact: Path, device: str, threads: int, timeout: float):
    cmd = [str(bundle / "pf-trainer-portable"), str(artifact), "--corpus",
           str(bundle / "training" / "corpus.npz"), "--steps", str(STEPS), "--log-every", "1",
           "--device", device, "--num-threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
    lines = [(int(s), float(loss), float(ms)) for s, loss, ms in LINE.findall(proc.stdout)]
    return [loss for _, loss, _ in lines], [ms for step, _, ms in lines if step > 5]


def check(args) -> int:
    bundle, out = Path(args.bundle), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.time_budget
    results, failed = [], False
    for artifact in sorted(p for p in (bundle / "training").iterdir() if p.is_dir()):
        left = deadline - time.monotonic()
        if left < 20:
            results.append({"artifact": artifact.name, "skipped": "time budget"})
            continue
        entry = {"artifact": artifact.name, "steps": STEPS, "batch": BATCH,
                 "sequence": SEQUENCE, "bar": LOSS_BAR}
        try:
            cuda, cuda_ms = train(bundle, artifact, args.against, args.threads, left / 2)
            cpu, cpu_ms = train(bundle, artifact, "cpu", args.threads,
                                deadline - time.monotonic())
            worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(cuda, cpu))
            entry.update(cuda_losses=cuda, cpu_losses=cpu, max_relative_loss_difference=worst,
                         cuda_ms_per_step=sorted(cuda_ms)[len(cuda_ms) // 2],
                         cpu_ms_per_step=sorted(cpu_ms)[len(cpu_ms) // 2],
                         ok=len(cuda) == len(cpu) == STEPS and worst <= LOSS_BAR)
        except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
            entry.update(ok=False, error=str(e))
        failed |= not entry["ok"]
        log(json.dumps({k: v for k, v in entry.items() if not k.endswith("losses")}))
        results.append(entry)
        (out / "training.json").write_text(json.dumps(results, indent=1) + "\n")
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--build", default="build")
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="mini")
    c = sub.add_parser("check")
    c.add_argument("--bundle", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    c.add_argument("--time-budget", type=float, default=120)
    c.add_argument("--against", default="cuda",
                   help="the device compared with the CPU backend (cpu: the script's own "
                        "test, on a machine without a GPU)")
    args = ap.parse_args(argv)
    return {"prepare": prepare, "check": check}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
