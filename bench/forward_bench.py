#!/usr/bin/env python3
"""Forward benchmark (issue: run the graph).

BERT-base for masked LM, batch 8, sequence 128 on the CPU: pf-run against
ONNX Runtime with the same thread count, median of --repeat runs each, and the
ratio. Also reports pf's lowering and JIT time and its arena against the
largest sum of live intermediates. Not a test: nothing is asserted.

    PYTHONPATH=python python3 bench/forward_bench.py [--config base] [--threads 2] [--repeat 5]
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
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pipefisher import make_bert_model, save_model  # noqa: E402
from pipefisher.tools import tool  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="base")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = tmp / f"bert-{args.config}.onnx"
        save_model(make_bert_model(args.config), model, external_data=True)
        rng = np.random.default_rng(0)
        inputs = {
            "input_ids": rng.integers(0, 30522, (args.batch, args.seq)).astype(np.int64),
            "token_type_ids": np.zeros((args.batch, args.seq), np.int64),
            "attention_mask": np.ones((args.batch, args.seq), np.int64),
        }
        np.savez(tmp / "in.npz", **inputs)

        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        session.run(None, inputs)  # warm-up
        ort_times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            reference = session.run(["logits"], inputs)[0]
            ort_times.append(time.perf_counter() - start)

        cmd = [str(tool("pf-run")), str(model), "--dim", f"batch={args.batch}",
               "--dim", f"sequence={args.seq}", "--inputs", str(tmp / "in.npz"),
               "--outputs", str(tmp / "out.npz"), "--repeat", str(args.repeat + 1),
               "--num-threads", str(args.threads), "--describe"]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        total = time.perf_counter() - start
        pf_median = float(re.search(r"median ([0-9.]+) ms", proc.stdout).group(1)) / 1e3
        stats = re.search(r"arena ([0-9.]+) MB \(peak live ([0-9.]+) MB\).*lower ([0-9.]+) s, "
                          r"jit ([0-9.]+) s", proc.stdout)
        got = np.load(tmp / "out.npz")["logits"]

    result = {
        "config": args.config, "batch": args.batch, "seq": args.seq, "threads": args.threads,
        "ort_median_s": statistics.median(ort_times),
        "pf_median_s": pf_median,
        "ratio_pf_over_ort": pf_median / statistics.median(ort_times),
        "max_abs_diff": float(np.abs(got - reference).max()),
        "arena_mb": float(stats.group(1)), "peak_live_mb": float(stats.group(2)),
        "lower_s": float(stats.group(3)), "jit_s": float(stats.group(4)),
        "pf_run_process_s": total,
    }
    for key, value in result.items():
        print(f"{key:>20}: {value:.4g}" if isinstance(value, float) else f"{key:>20}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
