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
                    "--stages", "2", "--microbatches", "4", "--policy", "pf")
    assert "utilization" in proc.stdout


def test_block_of_node_names():
    assert block_of("pf.linear (node '/bert/encoder/layer.11/output/dense/Add')") == 11
    assert block_of("pf.gather (node '/bert/embeddings/word_embeddings/Gather')") is None


def test_rejects_other_json():
    with pytest.raises(ValueError):
        convert({"layers": []})
