"""pf-run --aot: the object, weights and plan header link with the small C
driver in examples/aot and give the same logits as the JIT."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

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


def _model_library(tmp_path, *pf_run_args: str, vocab: int = 500):
    """pf-run --aot of BERT-tiny (one layer), built as a shared library with
    examples/aot/model_library.c; returns the AOT directory."""
    save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=1), tmp_path / "m.onnx")
    out = tmp_path / "aot"
    run_tool("pf-run", str(tmp_path / "m.onnx"), "--dim", "batch=2", "--dim", "sequence=16",
             *pf_run_args, "--aot", str(out))
    subprocess.run(["cc", "-shared", "-fPIC", "-std=c11", "-Wall", "-Werror",
                    "-I", str(REPO_ROOT / "include"), "-I", str(out),
                    str(REPO_ROOT / "examples/aot/model_library.c"), str(out / "model.o"),
                    "-o", str(out / "model.so")], check=True)
    return out


def _step_inputs(vocab: int = 500) -> dict:
    inputs = make_inputs(2, 16, vocab=vocab)
    rng = np.random.default_rng(1)
    labels = np.full((2, 16), -100, np.int64)
    masked = rng.random((2, 16)) < 0.3
    masked[0, 0] = True
    labels[masked] = rng.integers(0, vocab, masked.sum())
    inputs.update(labels=labels, step=np.array(1, np.int64), lr=np.array(1e-3, np.float64))
    return inputs


def _read_outputs(directory) -> dict:
    import json
    dtypes = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32}
    manifest = json.loads((directory / "manifest.json").read_text())
    return {e["name"]: np.fromfile(directory / e["file"], dtype=dtypes[e["dtype"]])
            .reshape(e["shape"]) for e in manifest}


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_aot_run_kfac_training_step_matches_jit(tmp_path):
    """pf-aot-run (the runner the GPU check uses) on the CPU: the K-FAC
    training step's loss, gradients and factors are the JIT's bits, and
    --weights-out holds the updated parameters."""
    out = _model_library(tmp_path, "--training-step", "--kfac")
    inputs = _step_inputs()
    np.savez(tmp_path / "in.npz", **inputs)
    run_tool("pf-run", str(tmp_path / "m.onnx"), "--dim", "batch=2", "--dim", "sequence=16",
             "--training-step", "--kfac", "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "jit.npz"))
    (tmp_path / "in").mkdir()
    for name, value in inputs.items():
        value.tofile(tmp_path / "in" / f"{name}.bin")
    (tmp_path / "got").mkdir()
    proc = run_tool("pf-aot-run", str(out / "model.so"), "--weights", str(out / "model.weights"),
                    "--inputs", str(tmp_path / "in"), "--outputs", str(tmp_path / "got"),
                    "--weights-out", str(tmp_path / "after.weights"), "--repeat", "1",
                    "--json", str(tmp_path / "t.json"))
    assert "backend cpu" in proc.stdout
    got = _read_outputs(tmp_path / "got")
    jit = np.load(tmp_path / "jit.npz")
    assert sorted(got) == sorted(jit.files)
    assert any(name.startswith("kfac/A_inv/") for name in got)
    for name in jit.files:
        np.testing.assert_array_equal(got[name], jit[name], err_msg=name)
    before = np.fromfile(out / "model.weights", np.uint8)
    after = np.fromfile(tmp_path / "after.weights", np.uint8)
    assert before.size == after.size and not np.array_equal(before, after)
    import json
    timing = json.loads((tmp_path / "t.json").read_text())
    assert timing["repeat"] == 1 and timing["device"] == "cpu" and timing["median_ms"] > 0
    # A device is written, not replaced by a renamed file (pf::writeFileAtomically).
    import os
    import stat
    run_tool("pf-aot-run", str(out / "model.so"), "--weights", str(out / "model.weights"),
             "--inputs", str(tmp_path / "in"), "--repeat", "1", "--json", "/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_aot_run_rejects_bad_input(tmp_path):
    out = _model_library(tmp_path)
    model, weights = str(out / "model.so"), str(out / "model.weights")
    inputs = make_inputs(2, 16, vocab=500)
    (tmp_path / "in").mkdir()
    for name, value in inputs.items():
        value.tofile(tmp_path / "in" / f"{name}.bin")
    ok = run_tool("pf-aot-run", model, "--weights", weights, "--inputs", str(tmp_path / "in"))
    assert "1 timed run(s) on cpu" in ok.stdout

    def fails(*args: str, code: int = 1) -> str:
        proc = run_tool("pf-aot-run", *args, check=False)
        assert proc.returncode == code, (args, proc.returncode, proc.stderr)
        assert "Traceback" not in proc.stderr and "Segmentation" not in proc.stderr
        return proc.stderr

    # An input of the wrong size: named, with the size it should have.
    (tmp_path / "in" / "attention_mask.bin").write_bytes(b"\0" * 8)
    err = fails(model, "--weights", weights, "--inputs", str(tmp_path / "in"))
    assert "attention_mask.bin has 8 bytes, expected 256" in err and "i64 [2, 16]" in err
    (tmp_path / "in" / "attention_mask.bin").unlink()
    assert "cannot open" in fails(model, "--weights", weights, "--inputs", str(tmp_path / "in"))
    # Weights of another model.
    (tmp_path / "w").write_bytes(b"\0" * 64)
    assert "expected" in fails(model, "--weights", str(tmp_path / "w"), "--inputs", "x")
    # Not a model library; not a library at all.
    assert "has no pf_aot_model_describe" in fails(
        str(build_dir() / "lib" / "libpfrt.so"), "--weights", weights)
    assert "cannot load" in fails(str(tmp_path / "w"), "--weights", weights)
    # A truncated library: refused before dlopen maps it (a touch of a page
    # past its end would be SIGBUS).
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes((out / "model.so").read_bytes()[:4096])
    err = fails(str(truncated), "--weights", weights)
    assert "cannot load" in err and "truncated" in err, err
    # Named relative to the working directory (dlopen would search the
    # library path for a name without a '/').
    relative = subprocess.run([str(build_dir() / "bin" / "pf-aot-run"), "model.so", "--weights",
                               "model.weights", "--inputs", str(tmp_path / "in"), "--describe"],
                              cwd=out, capture_output=True, text=True)
    assert relative.returncode == 0, relative.stderr
    # Bad options are usage errors.
    assert "unknown --device" in fails(model, "--weights", weights, "--device", "tpu", code=2)
    assert "unknown --gemm-precision 'fp16'" in fails(model, "--weights", weights,
                                                      "--gemm-precision", "fp16", code=2)
    assert "bad --repeat" in fails(model, "--weights", weights, "--repeat", "0", code=2)
    assert "--weights is required" in fails(model, code=2)
    assert "give --inputs" in fails(model, "--weights", weights, code=2)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_aot_run_cuda_without_gpu_is_a_clear_error(tmp_path):
    if Path("/dev/nvidiactl").exists():
        pytest.skip("a GPU is present: scripts/gpu-check.sh runs the CUDA side")
    out = _model_library(tmp_path)
    inputs = make_inputs(2, 16, vocab=500)
    (tmp_path / "in").mkdir()
    for name, value in inputs.items():
        value.tofile(tmp_path / "in" / f"{name}.bin")
    proc = run_tool("pf-aot-run", str(out / "model.so"), "--weights", str(out / "model.weights"),
                    "--inputs", str(tmp_path / "in"), "--device", "cuda", check=False)
    assert proc.returncode == 1
    assert "cannot create the runtime context" in proc.stderr
    assert "Segmentation" not in proc.stderr


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_aot_run_profile_gives_the_schedulers_layer_profile(tmp_path):
    """pf-run --aot --aot-profile wraps every kernel in timing hooks that
    pf-aot-run --profile fills (pf-run --profile's format, so
    pipefisher.profile_convert makes the scheduler's per-layer profile of
    it); a model without hooks is refused with the flag to use."""
    import json
    import sys

    out = _model_library(tmp_path, "--training-step", "--kfac", "--aot-profile")
    inputs = _step_inputs()
    (tmp_path / "in").mkdir()
    for name, value in inputs.items():
        value.tofile(tmp_path / "in" / f"{name}.bin")
    args = (str(out / "model.so"), "--weights", str(out / "model.weights"), "--inputs",
            str(tmp_path / "in"))
    run_tool("pf-aot-run", *args, "--repeat", "2", "--profile", str(tmp_path / "ops.json"))
    ops = json.loads((tmp_path / "ops.json").read_text())
    assert ops["format"] == "pf-run-profile/1" and ops["runs"] == 2
    kinds = {op["name"].split(" ")[0] for op in ops["ops"]}
    assert {"pf.linear", "pf.kfac.update_factor", "pf.kfac.refresh_inverses",
            "pf.kfac.precondition", "pf.softmax_cross_entropy"} <= kinds
    assert all(op["calls"] >= 2 and op["median_ms"] >= 0 for op in ops["ops"])
    subprocess.run([sys.executable, "-m", "pipefisher.profile_convert", str(tmp_path / "ops.json"),
                    "-o", str(tmp_path / "layers.json")], check=True,
                   env={"PYTHONPATH": str(REPO_ROOT / "python"), "PATH": "/usr/bin:/bin"})
    layers = json.loads((tmp_path / "layers.json").read_text())["layers"]
    assert len(layers) == 1 and all(layers[0][k] > 0 for k in (
        "forward", "backward", "curvature", "inversion", "precondition"))

    plain = _model_library(tmp_path / "plain", "--training-step")
    proc = run_tool("pf-aot-run", str(plain / "model.so"), "--weights",
                    str(plain / "model.weights"), "--inputs", str(tmp_path / "in"), "--profile",
                    str(tmp_path / "x.json"), check=False)
    assert proc.returncode == 1 and "--aot-profile" in proc.stderr
    assert not (tmp_path / "x.json").exists()


def test_aot_run_never_writes_over_the_model_and_checks_outputs_first(tmp_path):
    """pf-aot-run refuses, before loading anything, an output that is the
    model library (also through a link), two outputs on one file, and an
    output into a missing folder; --weights-out may be --weights (a loop
    stepping one file, replaced atomically)."""
    model = tmp_path / "model.so"
    model.write_bytes(b"not loaded: the check comes first")
    weights = tmp_path / "model.weights"
    weights.write_bytes(b"\0" * 16)
    (tmp_path / "link.so").symlink_to(model)
    cases = [
        (["--weights-out", str(tmp_path / "link.so")], "is the MODEL.so file"),
        (["--json", str(model)], "is the MODEL.so file"),
        (["--json", str(weights)], "is the --weights file"),
        (["--json", str(tmp_path / "t.json"), "--profile", str(tmp_path / "t.json")],
         "name one file"),
        (["--json", str(tmp_path / "missing" / "t.json")], "No such file or directory"),
    ]
    for extra, message in cases:
        proc = run_tool("pf-aot-run", str(model), "--weights", str(weights), *extra, check=False)
        assert proc.returncode == 1, (extra, proc.stderr)
        assert message in proc.stderr, (extra, proc.stderr)
        assert "cannot load" not in proc.stderr
    assert model.read_bytes() == b"not loaded: the check comes first"
    # --weights-out = --weights passes the check (and then fails to load the
    # fake library, which shows the check let it through).
    proc = run_tool("pf-aot-run", str(model), "--weights", str(weights),
                    "--weights-out", str(weights), check=False)
    assert proc.returncode == 1 and "cannot load" in proc.stderr, proc.stderr


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_aot_run_refuses_an_object_and_a_plan_of_different_runs(tmp_path):
    """model.o of one pf-run --aot run linked with model_plan.h of another
    (the same model, even): refused by their fingerprints before anything
    is bound."""
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    a, b = _model_library(first), _model_library(second)
    assert run_tool("pf-aot-run", str(a / "model.so"), "--weights", str(a / "model.weights"),
                    "--describe").returncode == 0
    mixed = tmp_path / "mixed.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-std=c11", "-I", str(REPO_ROOT / "include"),
                    "-I", str(b), str(REPO_ROOT / "examples/aot/model_library.c"),
                    str(a / "model.o"), "-o", str(mixed)], check=True)
    proc = run_tool("pf-aot-run", str(mixed), "--weights", str(a / "model.weights"), "--describe",
                    check=False)
    assert proc.returncode == 1, proc.stderr
    assert "its model.o and model_plan.h come from different pf-run --aot runs" in proc.stderr
