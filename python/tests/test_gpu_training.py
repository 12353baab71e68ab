"""scripts/gpu_training.py, the training half of the GPU check, on the CPU:
`prepare` compiles BERT-tiny's training artifacts as gpu-check.sh does and
`check --against cpu` trains each twice with the trainer and compares the
losses, so that a GPU session finds the script working (only the device of
one of the two runs differs there)."""

from __future__ import annotations

import json
import subprocess
import sys

from pipefisher.tools import REPO_ROOT, build_dir

SCRIPT = REPO_ROOT / "scripts" / "gpu_training.py"


def test_prepare_and_check_on_the_cpu(tmp_path):
    stage = tmp_path / "stage"
    subprocess.run([sys.executable, str(SCRIPT), "prepare", "--build", str(build_dir()),
                    "--out", str(stage), "--models", "tiny"], check=True, capture_output=True)
    artifacts = sorted(p.name for p in (stage / "training").iterdir() if p.is_dir())
    assert artifacts == ["tiny-adamw", "tiny-kfac"]
    # The bundle's trainer, as gpu-check.sh unpacks it next to the artifacts.
    (stage / "pf-trainer-portable").symlink_to((build_dir() / "bin" / "pf-trainer").resolve())
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "check", "--bundle", str(stage),
                           "--out", str(out), "--against", "cpu", "--threads", "2"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = {r["artifact"]: r for r in json.loads((out / "training.json").read_text())}
    assert sorted(results) == artifacts
    for r in results.values():
        # The same backend twice: the same losses, 20 of them, and a time.
        assert r["ok"] and r["max_relative_loss_difference"] == 0, r
        assert len(r["cpu_losses"]) == 20 and r["cuda_ms_per_step"] > 0, r
