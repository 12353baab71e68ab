"""scripts/gpu_models.py, the whole-model half of the GPU check, on the CPU:
`prepare` compiles BERT-tiny ahead of time (forward, AdamW step, K-FAC step)
as gpu-check.sh does, and `check --against cpu` runs each twice with the
runner, compares, times and profiles them, so that a GPU session finds the
script working (only the backend differs there)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from pipefisher.tools import REPO_ROOT, build_dir

SCRIPT = REPO_ROOT / "scripts" / "gpu_models.py"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_prepare_check_and_summary_on_the_cpu(tmp_path):
    stage = tmp_path / "stage"
    subprocess.run([sys.executable, str(SCRIPT), "prepare", "--build", str(build_dir()),
                    "--out", str(stage), "--models", "tiny"], check=True, capture_output=True)
    models = sorted(p.name for p in (stage / "models").iterdir())
    assert models == ["tiny-adamw", "tiny-forward", "tiny-kfac", "tiny-predict"]
    for model in models:
        assert (stage / "models" / model / "model.so").exists()
        assert not (stage / "models" / model / "model.o").exists()  # not shipped
    # The bundle's runner, as gpu-check.sh unpacks it next to the models.
    (stage / "pf-aot-run-portable").symlink_to((build_dir() / "bin" / "pf-aot-run").resolve())
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "check", "--bundle", str(stage),
                           "--out", str(out), "--work", str(tmp_path / "work"), "--against",
                           "cpu", "--threads", "2", "--repeat", "1"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = {r["model"]: r for r in json.loads((out / "models.json").read_text())}
    assert sorted(results) == models
    for r in results.values():
        # The same backend twice: the same bits, and a time.
        assert r["pass"] and r["max_rel"] == 0 and r["cuda_ms"] > 0, r
    kfac = results["tiny-kfac"]
    assert {"loss", "grad", "kfac/A_inv", "update"} <= set(kfac["parity"])
    assert kfac["per_block_ms"]["inversion"] > 0
    layers = json.loads((out / kfac["layer_profile"]).read_text())["layers"]
    assert len(layers) == 2  # BERT-tiny's blocks
    (tmp_path / "torch.json").write_text(json.dumps({"device": "x", "results": [
        {"config": "tiny", "vocab": 30522, "case": "forward", "median_ms": 1.0},
        {"config": "tiny", "vocab": 2048, "case": "train_adamw", "median_ms": 2.0}]}))
    proc = subprocess.run([sys.executable, str(SCRIPT), "summary", "--models",
                           str(out / "models.json"), "--torch", str(tmp_path / "torch.json"),
                           "--out", str(tmp_path / "summary.json")],
                          capture_output=True, text=True, check=True)
    rows = json.loads((tmp_path / "summary.json").read_text())["rows"]
    assert [r["model"] for r in rows] == ["tiny-forward", "tiny-adamw", "tiny-kfac",
                                          "tiny-predict"]
    # Peers match by vocabulary too (BERT-tiny here has 2048 words); both
    # training steps compare with PyTorch's AdamW step.
    ratios = {r["model"]: r["ratio"] for r in rows}
    assert ratios["tiny-forward"] is None
    assert ratios["tiny-adamw"] == pytest.approx(results["tiny-adamw"]["cuda_ms"] / 2.0)
    assert ratios["tiny-kfac"] == pytest.approx(results["tiny-kfac"]["cuda_ms"] / 2.0)
    # The predictions step does other work than PyTorch's full-decoder step.
    assert ratios["tiny-predict"] is None
