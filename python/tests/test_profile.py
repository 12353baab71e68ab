"""pf-run --profile writes per-op times, and they convert into a scheduler
profile that pf-sched accepts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.profile_convert import block_of, convert
from pipefisher.sample_inputs import make_inputs
from pipefisher.tools import run_tool


@pytest.fixture(scope="module")
def run_profile(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("profile")
    save_model(make_bert_model("tiny", vocab_size=1000, num_hidden_layers=4), tmp / "m.onnx")
    np.savez(tmp / "in.npz", **make_inputs(2, 16, vocab=1000))
    run_tool("pf-run", str(tmp / "m.onnx"), "--dim", "batch=2", "--dim", "sequence=16",
             "--inputs", str(tmp / "in.npz"), "--repeat", "2", "--profile", str(tmp / "p.json"))
    return json.loads((tmp / "p.json").read_text()), tmp


def test_profile_lists_every_kernel_call(run_profile):
    profile, _ = run_profile
    assert profile["format"] == "pf-run-profile/1" and profile["runs"] == 2
    names = [op["name"] for op in profile["ops"]]
    # 4 blocks x 6 linears + the head's transform and decoder.
    assert sum(n.startswith("pf.linear") for n in names) == 26
    assert all(op["calls"] == 2 and op["median_ms"] >= 0 for op in profile["ops"])
    assert 0 < profile["kernel_sum_ms"] <= profile["run_median_ms"] * 1.5


def test_converted_profile_schedules(run_profile):
    profile, tmp = run_profile
    layers = convert(profile)
    assert [l["name"] for l in layers["layers"]] == [f"block{i}" for i in range(4)]
    assert all(l["forward"] > 0 for l in layers["layers"])
    assert "estimated" in layers["source"]
    (tmp / "layers.json").write_text(json.dumps(layers))
    proc = run_tool("pf-sched", "--profile", str(tmp / "layers.json"), "--schedule", "1f1b",
                    "--stages", "2", "--microbatches", "4", "--policy", "pf",
                    "--report-json", str(tmp / "report.json"))
    assert "utilization" in proc.stdout
    report = json.loads((tmp / "report.json").read_text())
    assert report["schedule"] == "1f1b" and report["devices"] == 2 and report["layers"] == 4
    # Each device runs forward and backward of its layers for the 4
    # micro-batches; the bare step is at least the busiest device's work.
    assert sum(report["layers_per_stage"]) == 4
    first = 0
    for device, count in zip(report["per_device"], report["layers_per_stage"]):
        work = sum(l["forward"] + l["backward"] for l in layers["layers"][first:first + count])
        assert device["pipeline_busy_ms_per_step"] == pytest.approx(4 * work)
        assert report["pipeline_step_ms"] >= 4 * work - 1e-9
        first += count
    busy = sum(d["pipeline_busy_ms_per_step"] for d in report["per_device"])
    assert report["utilization"]["without_kfac"] == pytest.approx(busy / (2 * report["pipeline_step_ms"]))
    assert report["bubble_fraction"] == pytest.approx(1 - busy / (2 * report["pipeline_step_ms"]))


def test_block_of_node_names():
    assert block_of("pf.linear (node '/bert/encoder/layer.11/output/dense/Add')") == 11
    assert block_of("pf.gather (node '/bert/embeddings/word_embeddings/Gather')") is None


def test_rejects_other_json():
    with pytest.raises(ValueError):
        convert({"layers": []})


def test_training_step_profile_measures_every_key(tmp_path):
    """A profiled K-FAC training step gives measured backward, curvature,
    inversion and preconditioning per block (the scheduler's inputs)."""
    save_model(make_bert_model("tiny", vocab_size=100, num_hidden_layers=2), tmp_path / "m.onnx")
    run_tool("pf-translate", "--import-onnx", str(tmp_path / "m.onnx"), "--dim", "batch=2",
             "--dim", "sequence=16", "--emit-bytecode", "-o", str(tmp_path / "m.mlirbc"))
    # Bytecode keeps the ONNX node names (locations) the conversion needs.
    run_tool("pf-opt", str(tmp_path / "m.mlirbc"), "--pf-add-masked-lm-loss",
             "--pf-insert-kfac=decay=0.95", "--pf-build-gradients",
             "--pf-kfac-precondition=damping=1e-3 refresh-warmup=0 kl-clip=0", "--pf-add-optimizer",
             "--emit-bytecode", "-o", str(tmp_path / "step.mlirbc"))
    inputs = make_inputs(2, 16, vocab=100)
    labels = np.where(np.arange(16) % 4 == 0, inputs["input_ids"], -100).astype(np.int64)
    np.savez(tmp_path / "in.npz", **inputs, labels=labels, lr=np.float64(1e-3), step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "step.mlirbc"), "--inputs", str(tmp_path / "in.npz"),
             "--profile", str(tmp_path / "p.json"))
    layers = convert(json.loads((tmp_path / "p.json").read_text()))
    assert "estimated" not in layers["source"]
    for layer in layers["layers"]:
        for key in ("forward", "backward", "curvature", "inversion", "precondition"):
            assert layer[key] > 0, (layer["name"], key)


def test_micro_batched_step_is_refused(tmp_path):
    """A step over several micro-batches repeats forward and backward; its
    per-op times are not per micro-batch, so the conversion says so instead
    of charging later micro-batches' forward to the backward."""
    save_model(make_bert_model("tiny", vocab_size=100, num_hidden_layers=1), tmp_path / "m.onnx")
    inputs = make_inputs(4, 16, vocab=100)
    labels = np.where(np.arange(16) % 4 == 0, inputs["input_ids"], -100).astype(np.int64)
    np.savez(tmp_path / "in.npz", **inputs, labels=labels, lr=np.float64(1e-3), step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "m.onnx"), "--dim", "batch=4", "--dim", "sequence=16",
             "--training-step", "--kfac", "--micro-batches", "2", "--inputs",
             str(tmp_path / "in.npz"), "--profile", str(tmp_path / "p.json"))
    with pytest.raises(ValueError, match="2 masked-LM losses"):
        convert(json.loads((tmp_path / "p.json").read_text()))
