"""examples/python/train_step.py: imports, schedules, builds the K-FAC step and
runs it once; its loss line is the C API example's and pf-run's."""

from __future__ import annotations

import subprocess
import sys

import bindings_support  # noqa: F401  (skips without the extension)
from pipefisher import make_bert_model, save_model
from pipefisher.tools import REPO_ROOT, run_tool

EXAMPLE = REPO_ROOT / "examples" / "python" / "train_step.py"


def _loss_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("output loss:"))


def test_python_example_matches_the_c_example(tmp_path):
    model = tmp_path / "model.onnx"
    save_model(make_bert_model("tiny", num_hidden_layers=2, vocab_size=100), model)
    proc = subprocess.run([sys.executable, str(EXAMPLE), str(model)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("schedule: 1f1b on 2 stages, 4 micro-batches: step ")
    assert lines[2].startswith("cls.predictions.bias: sum 0.000000 before the step, ")
    assert not lines[2].endswith(" 0.000000 after")  # the step updated its weights
    c_example = run_tool("pf-example-train-step", str(model)).stdout
    assert _loss_line(proc.stdout) == _loss_line(c_example)
    # and without a model it makes its own
    proc = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "output loss:" in proc.stdout, proc.stderr


def test_python_example_reports_a_missing_model(tmp_path):
    proc = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path / "missing.onnx")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "missing.onnx: error: cannot read" in proc.stderr
