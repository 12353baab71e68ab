"""pf-run --aot: the object, weights and plan header link with the small C
driver in examples/aot and give the same logits as the JIT."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.sample_inputs import make_inputs
from pipefisher.tools import REPO_ROOT, build_dir, run_tool


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_aot_model_links_and_matches_jit(tmp_path):
    save_model(make_bert_model("tiny", vocab_size=1000), tmp_path / "m.onnx")
    dims = ("--dim", "batch=2", "--dim", "sequence=16")
    inputs = make_inputs(2, 16, vocab=1000)
    np.savez(tmp_path / "in.npz", **inputs)
    run_tool("pf-run", str(tmp_path / "m.onnx"), *dims, "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "jit.npz"))
    out = tmp_path / "aot"
    run_tool("pf-run", str(tmp_path / "m.onnx"), *dims, "--aot", str(out))
    for name in ("model.o", "model.weights", "model_plan.h"):
        assert (out / name).exists(), name

    lib = build_dir() / "lib"
    exe = tmp_path / "driver"
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Werror", "-I", str(REPO_ROOT / "include"),
                    "-I", str(out), str(REPO_ROOT / "examples/aot/driver.c"), str(out / "model.o"),
                    "-L", str(lib), "-lpfrt", f"-Wl,-rpath,{lib}", "-o", str(exe)], check=True)
    args = [str(exe), str(out / "model.weights")]
    for name in ("input_ids", "token_type_ids", "attention_mask"):
        inputs[name].tofile(tmp_path / f"{name}.bin")
        args.append(str(tmp_path / f"{name}.bin"))
    args += ["--", str(tmp_path / "logits.bin")]
    subprocess.run(args, check=True, capture_output=True)
    aot = np.fromfile(tmp_path / "logits.bin", dtype=np.float32).reshape(2, 16, 1000)
    np.testing.assert_array_equal(aot, np.load(tmp_path / "jit.npz")["logits"])


def test_aot_driver_rejects_wrong_input_size(tmp_path):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    save_model(make_bert_model("tiny", vocab_size=100, num_hidden_layers=1), tmp_path / "m.onnx")
    out = tmp_path / "aot"
    run_tool("pf-run", str(tmp_path / "m.onnx"), "--dim", "batch=1", "--dim", "sequence=4",
             "--aot", str(out))
    lib = build_dir() / "lib"
    exe = tmp_path / "driver"
    subprocess.run(["cc", "-std=c11", "-I", str(REPO_ROOT / "include"), "-I", str(out),
                    str(REPO_ROOT / "examples/aot/driver.c"), str(out / "model.o"), "-L", str(lib),
                    "-lpfrt", f"-Wl,-rpath,{lib}", "-o", str(exe)], check=True)
    (tmp_path / "short.bin").write_bytes(b"\0" * 8)
    proc = subprocess.run([str(exe), str(out / "model.weights"), str(tmp_path / "short.bin"),
                           str(tmp_path / "short.bin"), str(tmp_path / "short.bin"), "--",
                           str(tmp_path / "o.bin")], capture_output=True, text=True)
    assert proc.returncode != 0 and "expected" in proc.stderr
