#!/usr/bin/env python3
"""Forward pass under load: pf-run against ONNX Runtime, quiet and next to
busy processes (issue 16, "fast when the cores are shared").

For each model (BERT-base and BERT-mini for masked LM, batch x sequence) and
each load (none, then --busy processes spinning `while 1: pass`), runs ONNX
Runtime (default graph optimizations) and pf-run (JIT) with the same thread
count, --repeat times each after a warm-up, and prints the medians and the
ratio pf / ORT as a Markdown table. The environment is used as it is
(OPENBLAS_CORETYPE and OMP_* included); it is printed with the table. Not a
test: nothing is asserted.

    PYTHONPATH=python python3 bench/forward_load.py [--configs base,mini]
        [--batch 8] [--seq 128] [--threads 2] [--repeat 5] [--busy 2]
        [--pf-run PATH]   # another build's pf-run, e.g. for a before/after
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pipefisher import make_bert_model, save_model  # noqa: E402
from pipefisher.configs import get_config  # noqa: E402
from pipefisher.tools import tool  # noqa: E402

BUSY_LOOP = "while 1: pass"


def forward_flop(config: str, batch: int, seq: int) -> float:
    """Multiply-adds x 2 of BERT-for-masked-LM's matmuls (what dominates):
    per block Q, K, V, output projections, the FFN and attention's two
    batched products; then the MLM transform and the decoder. BERT-base at
    8 x 128: 228 GFLOP."""
    c = get_config(config)
    t, h, i = batch * seq, c.hidden_size, c.intermediate_size
    block = 2 * t * (4 * h * h + 2 * h * i) + 4 * batch * seq * seq * h
    head = 2 * t * h * h + 2 * t * h * c.vocab_size
    return c.num_hidden_layers * block + head


def ort_median(model: Path, inputs: dict, threads: int, repeat: int) -> float:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    session.run(None, inputs)  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(["logits"], inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def pf_median(pf_run: Path, model: Path, npz: Path, out: Path, batch: int, seq: int,
              threads: int, repeat: int) -> float:
    # --repeat N+1: pf-run's median over its runs, the first one a warm-up
    # like ORT's.
    cmd = [str(pf_run), str(model), "--dim", f"batch={batch}", "--dim", f"sequence={seq}",
           "--inputs", str(npz), "--outputs", str(out), "--repeat", str(repeat + 1),
           "--num-threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(re.search(r"median ([0-9.]+) ms", proc.stdout).group(1)) / 1e3


class Busy:
    """`count` processes spinning on the CPU while the block runs."""

    def __init__(self, count: int):
        self.count, self.procs = count, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
                      for _ in range(self.count)]
        time.sleep(0.5)  # let the scheduler see them
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            proc.kill()
            proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="base,mini")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--busy", type=int, default=2,
                        help="busy processes for the loaded runs (0: quiet runs only)")
    parser.add_argument("--pf-run", type=Path, help="pf-run to time (default: this build's)")
    args = parser.parse_args()
    if args.repeat < 1 or args.threads < 1 or args.busy < 0:
        parser.error("--repeat and --threads must be >= 1, --busy >= 0")
    pf_run = args.pf_run or tool("pf-run")

    loads = [0] + ([args.busy] if args.busy else [])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rng = np.random.default_rng(0)
        inputs = {
            "input_ids": rng.integers(0, 30522, (args.batch, args.seq)).astype(np.int64),
            "token_type_ids": np.zeros((args.batch, args.seq), np.int64),
            "attention_mask": np.ones((args.batch, args.seq), np.int64),
        }
        npz = tmp / "in.npz"
        np.savez(npz, **inputs)
        for config in args.configs.split(","):
            model = tmp / f"bert-{config}.onnx"
            save_model(make_bert_model(config), model, external_data=True)
            for busy in loads:
                with Busy(busy):
                    load = os.getloadavg()[0]
                    ort_s = ort_median(model, inputs, args.threads, args.repeat)
                    pf_s = pf_median(pf_run, model, npz, tmp / "out.npz", args.batch,
                                     args.seq, args.threads, args.repeat)
                rows.append((config, busy, ort_s, pf_s, load))
                print(f"# {config} busy={busy}: ORT {ort_s * 1e3:.0f} ms, "
                      f"pf {pf_s * 1e3:.0f} ms", file=sys.stderr, flush=True)

    env = {k: os.environ.get(k, "<unset>")
           for k in ("OPENBLAS_CORETYPE", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    print(f"# {time.strftime('%Y-%m-%d', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"{args.threads} threads each, batch {args.batch} x {args.seq}, "
          f"median of {args.repeat}; " + ", ".join(f"{k}={v}" for k, v in env.items()))
    print(f"# pf-run: {pf_run}")
    print("| model | busy processes | ONNX Runtime | pf | pf / ORT | vs quiet (ORT, pf) "
          "| pf GFLOP/s | load avg at start |")
    print("|---|---|---|---|---|---|---|---|")
    quiet = {config: (ort_s, pf_s) for config, busy, ort_s, pf_s, _ in rows if busy == 0}
    for config, busy, ort_s, pf_s, load in rows:
        q_ort, q_pf = quiet[config]
        gflops = forward_flop(config, args.batch, args.seq) / pf_s * 1e-9
        print(f"| BERT-{config} | {busy} | {ort_s * 1e3:.0f} ms | {pf_s * 1e3:.0f} ms | "
              f"{pf_s / ort_s:.2f} | {ort_s / q_ort:.2f}x, {pf_s / q_pf:.2f}x | {gflops:.0f} "
              f"| {load:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
