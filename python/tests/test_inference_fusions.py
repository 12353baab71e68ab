"""pf-run's inference fusions (pf-inference-fusions): attention's scaled and
masked softmax, the head transposes read as strides of the batched matmuls,
residual add + LayerNorm, linear + GELU. The fused forward gives the unfused forward's logits
(--inference-fusions=false) to within float rounding, and ONNX Runtime's to
1e-4; the profile shows the fused kernels ran and the ones they replace did
not; the training step is built from the unfused graph."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.tools import run_tool

BATCH, SEQ = 2, 16


def _inputs(vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.ones((BATCH, SEQ), np.int64)
    mask[1, SEQ * 3 // 4:] = 0  # padding: the mask matters
    return {
        "input_ids": rng.integers(0, vocab, size=(BATCH, SEQ)).astype(np.int64),
        "token_type_ids": rng.integers(0, 2, size=(BATCH, SEQ)).astype(np.int64),
        "attention_mask": mask,
    }


def _pf_run(tmp_path, model_path, tag, *extra):
    out = tmp_path / f"out-{tag}.npz"
    profile = tmp_path / f"profile-{tag}.json"
    run_tool("pf-run", str(model_path), "--dim", f"batch={BATCH}", "--dim", f"sequence={SEQ}",
             "--inputs", str(tmp_path / "in.npz"), "--outputs", str(out), "--profile",
             str(profile), *extra)
    ops = {op["name"].split(" (")[0] for op in json.loads(profile.read_text())["ops"]}
    return np.load(out)["logits"], ops


@pytest.mark.parametrize("config,style,gelu,mask_value", [
    ("tiny", "transpose", "erf", -10000.0),
    ("tiny", "pytorch", "tanh", "min"),
    ("mini", "transpose", "erf", -10000.0),
])
def test_fused_forward_matches_unfused_and_onnxruntime(tmp_path, config, style, gelu,
                                                        mask_value):
    model = make_bert_model(config, seed=3, style=style, gelu=gelu, mask_value=mask_value,
                            vocab_size=1000)
    path = tmp_path / "m.onnx"
    save_model(model, path)
    inputs = _inputs(vocab=1000)
    np.savez(tmp_path / "in.npz", **inputs)
    fused, fused_ops = _pf_run(tmp_path, path, "fused")
    unfused, unfused_ops = _pf_run(tmp_path, path, "unfused", "--inference-fusions=false")

    fused_kinds = {"pf.scaled_masked_softmax", "pf.permuted_matmul", "pf.add_layer_norm",
                   "pf.linear_gelu"}
    assert fused_kinds <= fused_ops
    assert not fused_ops & {"pf.softmax", "pf.transpose", "pf.div", "pf.matmul", "pf.gelu"}
    assert {"pf.softmax", "pf.transpose", "pf.matmul", "pf.gelu"} <= unfused_ops
    assert not unfused_ops & fused_kinds

    assert np.std(fused) > 1e-3
    assert np.abs(fused - unfused).max() < 2e-5
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    expected = session.run(["logits"], inputs)[0]
    assert np.abs(fused - expected).max() < 1e-4


def test_training_step_is_built_from_the_unfused_graph(tmp_path):
    path = tmp_path / "m.onnx"
    save_model(make_bert_model("tiny", vocab_size=100, num_hidden_layers=1), path)
    run_tool("pf-run", str(path), "--dim", "batch=2", "--dim", "sequence=8", "--training-step",
             "--emit-step", str(tmp_path / "step.mlir"))
    step = (tmp_path / "step.mlir").read_text()
    assert "pf.softmax_grad" in step
    for fused in ("pf.scaled_masked_softmax", "pf.permuted_matmul", "pf.add_layer_norm",
                  "pf.linear_gelu"):
        assert fused not in step
