#!/usr/bin/env python3
"""Import + graph-pass benchmark (issue: foundation).

Measures `pf-translate --import-onnx ... --summary` (parse, import, shape
folding, fusions, DCE; no IR printing) on
  * BERT-Large, shapes only (--no-weights), batch 8, sequence 128, and
  * BERT-Base with weights (external data file), batch 8, sequence 128.
Reports the median wall time over --repeat runs and the peak resident memory of
the tool (ru_maxrss of the child). Targets: BERT-Large under 2 s and 500 MB.

    PYTHONPATH=python python3 bench/import_bench.py [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pipefisher import make_bert_model, save_model  # noqa: E402
from pipefisher.tools import tool  # noqa: E402


def measure(args: list[str], repeat: int) -> dict:
    walls, peaks = [], []
    for _ in range(repeat):
        # A small Python wrapper per run isolates ru_maxrss to one tool run.
        wrapper = (
            "import resource, subprocess, sys, time;"
            "t=time.perf_counter();"
            "p=subprocess.run(sys.argv[1:], capture_output=True);"
            "w=time.perf_counter()-t;"
            "sys.stderr.write(p.stderr.decode());"
            "print(w, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss);"
            "sys.exit(p.returncode)"
        )
        proc = subprocess.run([sys.executable, "-c", wrapper, *args], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stderr}")
        wall, rss_kb = proc.stdout.split()
        walls.append(float(wall))
        peaks.append(float(rss_kb) / 1024.0)
    return {"median_s": statistics.median(walls), "min_s": min(walls),
            "peak_rss_mb": max(peaks), "runs": repeat}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--skip-base", action="store_true",
                        help="skip BERT-Base with weights (writes ~440 MB)")
    args = parser.parse_args()

    translate = str(tool("pf-translate"))
    dims = ["--dim", "batch=8", "--dim", "sequence=128"]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        large = Path(tmp) / "bert-large-shapes.onnx"
        save_model(make_bert_model("large", weights=False), large)
        results["bert-large shapes-only"] = measure(
            [translate, "--import-onnx", str(large), "--no-weights", "--summary", *dims],
            args.repeat)
        if not args.skip_base:
            base = Path(tmp) / "bert-base.onnx"
            save_model(make_bert_model("base"), base, external_data=True)
            results["bert-base with weights"] = measure(
                [translate, "--import-onnx", str(base), "--summary", *dims], args.repeat)

    print(f"{'case':<26} {'median s':>9} {'min s':>8} {'peak MB':>9}")
    for name, r in results.items():
        print(f"{name:<26} {r['median_s']:>9.3f} {r['min_s']:>8.3f} {r['peak_rss_mb']:>9.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
