"""pipefisher.schedule: the same reports as pf-sched (analytic model, profiles)
and pf-opt --pf-pipeline (modules), figures as attributes and keys, the SVG
timeline, and errors naming what is wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest

import bindings_support  # noqa: F401  (skips without the extension)
import pipefisher as pf
from pipefisher import make_bert_model, save_model
from pipefisher.tools import run_tool

VOLATILE = {"scheduler_seconds"}  # the scheduler's own run time


def _stable(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in VOLATILE}


@pytest.mark.parametrize("schedule,stages,micro,policy", [
    ("chimera", 8, 8, "pf"), ("1f1b", 4, 8, "pipefisher"), ("gpipe", 4, 4, "none"),
    ("interleaved", 4, 8, "pf"), ("zb-h1", 4, 8, "pf"),
])
def test_analytic_report_equals_pf_sched(tmp_path, schedule, stages, micro, policy):
    run_tool("pf-sched", "--device", "p100", "--model", "bert-large", "--schedule", schedule,
             "--stages", str(stages), "--microbatches", str(micro), "--policy", policy,
             "--report-json", str(tmp_path / "r.json"), "--svg", str(tmp_path / "t.svg"),
             "--quiet")
    expected = json.loads((tmp_path / "r.json").read_text())
    report = pf.schedule(device="p100", model="bert-large", schedule=schedule, stages=stages,
                         microbatches=micro, policy=policy)
    assert _stable(report.json) == _stable(expected)
    assert report.svg() == (tmp_path / "t.svg").read_text()
    assert report.schedule == schedule and report.devices == stages
    assert report.microbatches == micro
    assert report.step_time_ms == expected["step_time_ms"]
    assert report["utilization_with_kfac"] == expected["utilization"]["with_kfac"]
    assert report.utilization_without_kfac == expected["utilization"]["without_kfac"]
    assert report.as_dict()["bubble_fraction"] == expected["bubble_fraction"]
    assert dict(report)["overhead_fraction"] == expected["overhead"]["fraction"]
    assert "step" in report.text and "chimera" in repr(pf.schedule(
        device="p100", model="bert-base", stages=4, microbatches=4))


def test_profile_path_and_dict(tmp_path):
    profile = tmp_path / "profile.json"
    run_tool("pf-sched", "--device", "a100", "--model", "bert-base", "--stages", "4",
             "--microbatches", "4", "--export-profile", str(profile), "--quiet")
    run_tool("pf-sched", "--profile", str(profile), "--schedule", "1f1b", "--stages", "4",
             "--microbatches", "8", "--report-json", str(tmp_path / "r.json"), "--quiet")
    expected = _stable(json.loads((tmp_path / "r.json").read_text()))
    from_path = pf.schedule(profile, schedule="1f1b", stages=4, microbatches=8)
    from_dict = pf.schedule(json.loads(profile.read_text()), schedule="1f1b", stages=4,
                            microbatches=8)
    assert _stable(from_path.json) == expected
    assert _stable(from_dict.json) == expected
    assert from_path.svg() == from_dict.svg()


def test_module_report_equals_pf_opt(tmp_path):
    path = tmp_path / "m.onnx"
    save_model(make_bert_model("tiny", vocab_size=100, num_hidden_layers=4, seed=1), path)
    module = pf.import_onnx(path, dims={"batch": 8, "sequence": 32}, weights=False)
    report = pf.schedule(module, schedule="1f1b", stages=2, microbatches=4, device="p100")
    mlir = tmp_path / "m.mlir"
    mlir.write_text(str(module))
    run_tool("pf-opt", str(mlir), "--pf-pipeline=stages=2 microbatches=4 schedule=1f1b "
             f"kfac=bubbles policy=pf device=p100 report={tmp_path / 'r.json'}",
             "-o", str(tmp_path / "out.mlir"))
    expected = json.loads((tmp_path / "r.json").read_text())
    assert _stable(report.json) == _stable(expected)
    assert report.stages == 2 and report.microbatches == 4
    assert report.layers_per_stage == [2, 2]
    assert report.utilization_with_kfac >= report.utilization_without_kfac > 0
    assert report.refresh_steps >= 1
    svg = report.svg()
    assert svg.lstrip().startswith(("<svg", "<?xml")) and svg.rstrip().endswith("</svg>")
    assert report._repr_svg_() == svg
    # the module itself is not scheduled in place
    assert "pf.pipeline" not in module.to_string(elide_weights=True)


def test_report_figures_are_consistent():
    r = pf.schedule(device="p100", model="bert-large", schedule="chimera", stages=8,
                    microbatches=8, validate=True)  # the verifier finds nothing wrong
    assert r.step_time_ms >= r.pipeline_step_ms > 0
    assert r.kfac_in_bubbles_ms + r.kfac_outside_bubbles_ms == pytest.approx(r.kfac_work_ms,
                                                                             rel=1e-6)
    assert len(r.per_device) == 8 and sum(r.layers_per_stage) == r.layers == 24
    assert 0 < r.bubble_fraction < 1
    assert np.isclose(r.overhead_fraction * r.pipeline_step_ms, r.overhead_ms_per_step)
    with pytest.raises(AttributeError, match="no figure"):
        r.not_a_figure
    trace = json.loads(r.trace())
    assert trace


def test_schedule_errors(tmp_path):
    with pytest.raises(pf.ScheduleError, match="chimera"):  # names the valid schedules
        pf.schedule(device="p100", model="bert-large", schedule="round-robin")
    with pytest.raises(pf.ScheduleError, match="cost model is required"):
        pf.schedule()
    with pytest.raises(pf.ScheduleError, match="device"):
        pf.schedule(device="tpu", model="bert-large")
    with pytest.raises(pf.ScheduleError, match="positive"):
        pf.schedule(device="p100", model="bert-large", stages=0)
    with pytest.raises(pf.ScheduleError, match="cannot read"):
        pf.schedule(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{\"layers\": 3}")
    with pytest.raises(pf.ScheduleError, match="bad.json"):
        pf.schedule(tmp_path / "bad.json", stages=2, microbatches=2)
    with pytest.raises(pf.ScheduleError, match="exceed|cap|GB"):
        pf.schedule(device="p100", model="bert-large", stages=2, microbatches=8,
                    memory_cap_gb=0.5)
    with pytest.raises(TypeError):
        pf.schedule(42)
