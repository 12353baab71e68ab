"""`pf-run --run-stages`: the stage functions of `pf-split-stages` compiled into
one program (one JIT engine, one copy of the parameters) and run as a
single-process pipeline, checked against the unsplit training step.

One micro-batch (BERT-tiny with D = 2, a 4-block BERT with D = 2 and 4):
loss and every gradient are **bitwise equal** to the unsplit step
(`pf-add-masked-lm-loss`, `pf-build-gradients`), as in test_stage_split.py:
each stage function runs the step's ops in the step's order and the tied
embedding's two partial gradients are added in one IEEE addition, which is
commutative.

M = 2 and 4 micro-batches (GPipe order: every forward, then every backward):
compared with the step built with `pf-split-microbatches=microbatches=M`
before `pf-build-gradients` on the whole batch. The loss is **bitwise equal**:
both compute Σ_m loss_m·c_m / Σ c_m with the same float32 operations in the
same order (c_m: the counted labels of micro-batch m). The gradients match
**within 1e-6 relative** (of the largest magnitude of each gradient), not
bitwise: the single-function step differentiates through the weighted sum,
so each micro-batch's backward starts from the seed c_m/Σc and the repeats'
gradients are summed by autodiff, while the executor scales each micro-batch's
finished gradient by c_m, sums and divides once — the same value, rounded
at different places.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipefisher.tools import run_tool

from stage_models import BATCH, import_step, load_npz, stage_inputs


def _reference(tmp_path, ir, microbatches, inputs):
    """The single-function step over the whole batch."""
    step = tmp_path / f"reference_m{microbatches}.mlir"
    split = [f"--pf-split-microbatches=microbatches={microbatches}"] if microbatches > 1 else []
    run_tool("pf-opt", str(ir), "--pf-add-masked-lm-loss", *split, "--pf-build-gradients",
             "-o", str(step))
    inp, out = tmp_path / f"ref_in_m{microbatches}.npz", tmp_path / f"ref_out_m{microbatches}.npz"
    np.savez(inp, **inputs)
    run_tool("pf-run", str(step), "--inputs", str(inp), "--outputs", str(out))
    return load_npz(out)


def _run_stages(tmp_path, split, microbatches, inputs):
    inp, out = tmp_path / f"in_m{microbatches}.npz", tmp_path / f"out_m{microbatches}.npz"
    np.savez(inp, **inputs)
    args = ["--micro-batches", str(microbatches)] if microbatches > 1 else []
    stdout = run_tool("pf-run", str(split), "--run-stages", *args, "--inputs", str(inp),
                      "--outputs", str(out)).stdout
    return load_npz(out), stdout


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stage_executor")
    built = {}
    for layers in (2, 4):
        ir, _, tagged = import_step(tmp, layers)
        built[layers] = (ir, tagged)
    return tmp, built


def _split(tmp, tagged, layers, stages):
    work = tmp / f"l{layers}_d{stages}"
    work.mkdir(exist_ok=True)
    split = work / "split.mlir"
    if not split.exists():
        run_tool("pf-opt", str(tagged), f"--pf-split-stages=stages={stages}", "-o", str(split))
    return work, split


@pytest.mark.parametrize("layers,stages", [(2, 2), (4, 2), (4, 4)])
def test_one_microbatch_equals_the_unsplit_step(models, layers, stages):
    tmp, built = models
    ir, tagged = built[layers]
    work, split = _split(tmp, tagged, layers, stages)
    inputs = stage_inputs(BATCH)
    want = _reference(work, ir, 1, inputs)
    got, stdout = _run_stages(work, split, 1, inputs)
    assert f"stages {stages}, micro-batches 1" in stdout
    assert set(got) == set(want)
    assert np.isfinite(want["loss"]) and float(want["loss"]) > 0
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("layers,stages,microbatches", [(2, 2, 2), (2, 2, 4), (4, 4, 2),
                                                        (4, 2, 4)])
def test_microbatches_equal_the_split_microbatches_step(models, layers, stages, microbatches):
    tmp, built = models
    ir, tagged = built[layers]
    work, split = _split(tmp, tagged, layers, stages)
    inputs = stage_inputs(BATCH * microbatches, seed=11 + microbatches)
    want = _reference(work, ir, microbatches, inputs)
    got, stdout = _run_stages(work, split, microbatches, inputs)
    assert f"stages {stages}, micro-batches {microbatches}" in stdout
    assert set(got) == set(want)
    np.testing.assert_array_equal(got["loss"], want["loss"])
    largest = max(float(np.max(np.abs(v))) for k, v in want.items() if k != "loss")
    for name in want:
        if name == "loss":
            continue
        assert got[name].shape == want[name].shape, name
        diff = float(np.max(np.abs(got[name].astype(np.float64) - want[name])))
        scale = float(np.max(np.abs(want[name])))
        if name.endswith("attention.self.key.bias"):
            # Zero in exact arithmetic (softmax ignores a per-query shift of the
            # scores): both sides hold rounding noise of about 1e-12.
            assert scale < 1e-6 * largest and diff < 1e-6 * largest, (name, scale, diff)
            continue
        assert scale > 0, name
        # The sums associate differently (measured: at most 1.05e-6 of the
        # tensor's largest entry, on a key weight's small gradient, since the
        # GEMMs run on oneDNN).
        assert diff <= 4e-6 * scale, (name, diff / scale)


def test_activation_slots_are_reported(models):
    """GPipe keeps one slot of `saved/*` per micro-batch on each stage: the
    reported bytes are M × the forward's saved results, per stage."""
    tmp, built = models
    _, tagged = built[2]
    work, split = _split(tmp, tagged, 2, 2)
    _, stdout = _run_stages(work, split, 4, stage_inputs(BATCH * 4, seed=3))
    line = (r"^stage \d+: activation slot (\d+) bytes "
            r"\(\d+ of them copies of act/\* arguments\), 4 slots$")
    slots = [int(b) for b in re.findall(line, stdout, re.M)]
    total = int(re.search(r"^activation slots: (\d+) bytes$", stdout, re.M).group(1))
    # Each forward's saved results, from the split module's signatures.
    text = split.read_text()
    want = []
    for s in range(2):
        header = re.search(rf"func\.func @stage{s}_forward\((.*?)\) attributes", text, re.S)
        results = header.group(1).split("->", 1)[1]
        nbytes = 0
        for shape in re.findall(r'tensor<([0-9x]*)xf32> \{pf\.name = "saved/', results):
            nbytes += 4 * int(np.prod([int(d) for d in shape.split("x")]))
        want.append(nbytes)
    assert slots == want and all(b > 0 for b in slots)
    assert total == 4 * sum(want)


def test_bad_inputs_are_diagnosed(models, tmp_path):
    tmp, built = models
    ir, tagged = built[2]
    work, split = _split(tmp, tagged, 2, 2)
    inputs = stage_inputs(BATCH * 2)
    inp = tmp_path / "in.npz"
    np.savez(inp, **inputs)
    # Rows that are not M micro-batches.
    r = run_tool("pf-run", str(split), "--run-stages", "--micro-batches", "3", "--inputs",
                 str(inp), check=False)
    assert r.returncode != 0 and "micro-batches needs" in r.stderr, r.stderr
    # A graph input missing.
    np.savez(inp, **{k: v for k, v in inputs.items() if k != "labels"})
    r = run_tool("pf-run", str(split), "--run-stages", "--micro-batches", "2", "--inputs",
                 str(inp), check=False)
    assert r.returncode != 0 and "missing input 'labels' (read by stage1_forward)" in r.stderr
    # Not a split module.
    r = run_tool("pf-run", str(ir), "--run-stages", "--inputs", str(inp), check=False)
    assert r.returncode != 0 and "no stage functions" in r.stderr, r.stderr
    # Options --run-stages does not take.
    r = run_tool("pf-run", str(split), "--run-stages", "--training-step", "--inputs", str(inp),
                 check=False)
    assert r.returncode != 0 and "--run-stages takes none of" in r.stderr, r.stderr
