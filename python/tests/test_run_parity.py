"""pf-run against ONNX Runtime: the generated BERT-tiny and BERT-mini models give
the same logits (max-abs error 1e-4) on the same inputs; pf-run's bad-input
handling (missing input, wrong dtype or shape, unreadable file, unknown entry)."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.tools import run_tool

BATCH, SEQ = 2, 16


def _inputs(vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.ones((BATCH, SEQ), np.int64)
    mask[1, SEQ * 3 // 4:] = 0  # padding in the second sequence
    return {
        "input_ids": rng.integers(0, vocab, size=(BATCH, SEQ)).astype(np.int64),
        "token_type_ids": rng.integers(0, 2, size=(BATCH, SEQ)).astype(np.int64),
        "attention_mask": mask,
    }


def _ort_logits(path, inputs):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(["logits"], inputs)[0]


def _pf_logits(tmp_path, model_path, inputs, *extra):
    np.savez(tmp_path / "in.npz", **inputs)
    run_tool("pf-run", str(model_path), "--dim", f"batch={BATCH}", "--dim", f"sequence={SEQ}",
             "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"), *extra)
    return np.load(tmp_path / "out.npz")["logits"]


@pytest.mark.parametrize("config,style,gelu", [
    ("tiny", "transpose", "erf"),
    ("tiny", "pytorch", "tanh"),
    ("mini", "transpose", "erf"),
])
def test_logits_match_onnxruntime(tmp_path, config, style, gelu):
    model = make_bert_model(config, seed=1, style=style, gelu=gelu)
    path = tmp_path / f"{config}.onnx"
    save_model(model, path)
    inputs = _inputs(vocab=30522)
    expected = _ort_logits(path, inputs)
    got = _pf_logits(tmp_path, path, inputs)
    assert got.shape == expected.shape == (BATCH, SEQ, 30522)
    assert np.abs(got - expected).max() < 1e-4
    # A real signal, not zeros: logits differ across positions.
    assert np.std(got) > 1e-3


def test_layernorm_op_model_matches(tmp_path):
    model = make_bert_model("tiny", opset=17, layernorm_op=True, vocab_size=1000)
    path = tmp_path / "ln.onnx"
    save_model(model, path)
    inputs = _inputs(vocab=1000)
    assert np.abs(_pf_logits(tmp_path, path, inputs) - _ort_logits(path, inputs)).max() < 1e-4


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny.onnx"
    save_model(make_bert_model("tiny", vocab_size=1000), path)
    return path


def _run_bad(tmp_path, model, arrays, *extra):
    np.savez(tmp_path / "bad.npz", **arrays)
    proc = run_tool("pf-run", str(model), "--dim", f"batch={BATCH}", "--dim", f"sequence={SEQ}",
                    "--inputs", str(tmp_path / "bad.npz"), *extra, check=False)
    assert proc.returncode != 0
    assert "error" in proc.stderr
    return proc.stderr


def test_missing_input(tmp_path, tiny_model):
    arrays = _inputs(1000)
    del arrays["attention_mask"]
    assert "missing input 'attention_mask'" in _run_bad(tmp_path, tiny_model, arrays)


def test_wrong_dtype(tmp_path, tiny_model):
    arrays = _inputs(1000)
    arrays["input_ids"] = arrays["input_ids"].astype(np.float32)
    err = _run_bad(tmp_path, tiny_model, arrays)
    assert "input 'input_ids' has dtype float32 but the model expects int64" in err


def test_wrong_shape(tmp_path, tiny_model):
    arrays = _inputs(1000)
    arrays["token_type_ids"] = arrays["token_type_ids"][:, :8]
    err = _run_bad(tmp_path, tiny_model, arrays)
    assert "input 'token_type_ids' has shape 2x8 but the model expects 2x16" in err


def test_unknown_input(tmp_path, tiny_model):
    arrays = _inputs(1000)
    arrays["position_ids"] = arrays["input_ids"]
    assert "unknown input 'position_ids'" in _run_bad(tmp_path, tiny_model, arrays)


def test_out_of_range_token_is_a_runtime_error(tmp_path, tiny_model):
    arrays = _inputs(1000)
    arrays["input_ids"][0, 0] = 5000
    err = _run_bad(tmp_path, tiny_model, arrays)
    assert "pfrt_gather" in err or "gather" in err


def test_unreadable_inputs(tmp_path, tiny_model):
    (tmp_path / "not.npz").write_text("not a zip")
    proc = run_tool("pf-run", str(tiny_model), "--dim", f"batch={BATCH}", "--dim",
                    f"sequence={SEQ}", "--inputs", str(tmp_path / "not.npz"), check=False)
    assert proc.returncode != 0 and "not.npz" in proc.stderr


def test_unreadable_model(tmp_path):
    proc = run_tool("pf-run", str(tmp_path / "missing.onnx"), check=False)
    assert proc.returncode != 0 and "missing.onnx" in proc.stderr


def test_unknown_entry(tmp_path, tiny_model):
    ir = run_tool("pf-translate", "--import-onnx", str(tiny_model), "--dim", f"batch={BATCH}",
                  "--dim", f"sequence={SEQ}").stdout
    (tmp_path / "m.mlir").write_text(ir)
    proc = run_tool("pf-run", str(tmp_path / "m.mlir"), "--entry", "nope", "--describe",
                    check=False)
    assert proc.returncode != 0 and "no function named 'nope'" in proc.stderr


def test_ir_input_runs_and_repeat_reports_median(tmp_path, tiny_model):
    ir = run_tool("pf-translate", "--import-onnx", str(tiny_model), "--dim", f"batch={BATCH}",
                  "--dim", f"sequence={SEQ}", "--emit-bytecode", "-o", str(tmp_path / "m.mlirbc"))
    assert ir.returncode == 0
    inputs = _inputs(1000)
    np.savez(tmp_path / "in.npz", **inputs)
    proc = run_tool("pf-run", str(tmp_path / "m.mlirbc"), "--inputs", str(tmp_path / "in.npz"),
                    "--outputs", str(tmp_path / "out.npz"), "--repeat", "3")
    timing = re.search(r"median ([0-9.]+) ms over ([0-9]+) runs \(min ([0-9.]+) ms\)", proc.stdout)
    assert timing, proc.stdout
    median, runs, fastest = float(timing[1]), int(timing[2]), float(timing[3])
    assert runs == 3 and 0 < fastest <= median
    got = np.load(tmp_path / "out.npz")["logits"]
    assert np.abs(got - _ort_logits(tiny_model, inputs)).max() < 1e-4


def test_device_buffers_path_gives_the_host_paths_bits(tmp_path, tiny_model):
    """--device-buffers runs the path of --device cuda on the CPU backend:
    weights copied into backend memory once, inputs in and outputs out at
    every run, intermediates in a backend arena. The forward pass and a K-FAC
    training step (which updates its parameters in backend memory) give the
    host path's bits; a bad token still fails as a runtime error."""
    inputs = _inputs(1000)
    host = _pf_logits(tmp_path, tiny_model, inputs)
    np.testing.assert_array_equal(_pf_logits(tmp_path, tiny_model, inputs, "--device-buffers",
                                             "--repeat", "2"), host)
    rng = np.random.default_rng(3)
    labels = np.where(rng.random((BATCH, SEQ)) < 0.3, rng.integers(0, 1000, (BATCH, SEQ)), -100)
    step = dict(inputs, labels=labels.astype(np.int64), step=np.array(1, np.int64),
                lr=np.array(1e-3, np.float64))
    np.savez(tmp_path / "step.npz", **step)
    outputs = {}
    for mode in ("host", "device"):
        run_tool("pf-run", str(tiny_model), "--dim", f"batch={BATCH}", "--dim", f"sequence={SEQ}",
                 "--training-step", "--kfac", "--inputs", str(tmp_path / "step.npz"),
                 "--outputs", str(tmp_path / f"{mode}.npz"),
                 *(["--device-buffers"] if mode == "device" else []))
        outputs[mode] = np.load(tmp_path / f"{mode}.npz")
    assert any(name.startswith("kfac/B_inv/") for name in outputs["host"].files)
    for name in outputs["host"].files:
        np.testing.assert_array_equal(outputs["device"][name], outputs["host"][name],
                                      err_msg=name)
    arrays = _inputs(1000)
    arrays["input_ids"][0, 0] = 5000
    assert "gather" in _run_bad(tmp_path, tiny_model, arrays, "--device-buffers")
    assert "needs --device cpu" in _run_bad(tmp_path, tiny_model, _inputs(1000),
                                            "--device-buffers", "--profile",
                                            str(tmp_path / "p.json"))
