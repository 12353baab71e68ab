"""`pf-split-stages` checked by running: the stage functions in pipeline order
compute the same loss and gradients as the unsplit training step.

The step of one micro-batch (`pf-add-masked-lm-loss`, `pf-build-gradients`) of
BERT-tiny (2 encoder blocks) and of a 4-block BERT is split into D = 2 and 4
stages. The test runs `stage<s>_forward` for s = 0..D-1, then `stage<s>_backward`
for s = D-1..0, each through `pf-run --entry`, handing every function the values
it names (graph inputs, `act/*` from the previous forward, `saved/*` from its own
forward, `grad_act/*` from the next backward), and compares the loss and every
`grad/<param>` with the unsplit step run on the same inputs and labels.

Expected: bitwise equality everywhere. Every stage function runs the same ops
in the same order on the same values as the unsplit step (only their grouping
into functions differs). The one gradient that is split is the tied word
embedding, read by the first stage (gather) and the last (decoder): each
stage returns its partial `grad/bert.embeddings.word_embeddings.weight`, and
their sum, like the unsplit step's single `pf.add` of the same two parts, is
exact to the bit because IEEE addition is commutative. (With three or more
parts the order of association would change and only a tolerance would hold.)
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipefisher.tools import run_tool

from stage_models import TIED, import_step, stage_inputs


def _run(tmp_path, module, values, entry=None):
    """Runs one function of `module` with the values it names; returns its outputs."""
    describe = ["--entry", entry] if entry else []
    listing = run_tool("pf-run", str(module), *describe, "--describe").stdout
    names = re.findall(r"^input\s+(\S+):", listing, re.M)
    tag = entry or "main"
    inputs = tmp_path / f"{tag}_in.npz"
    outputs = tmp_path / f"{tag}_out.npz"
    np.savez(inputs, **{n: values[n] for n in names})
    run_tool("pf-run", str(module), *describe, "--inputs", str(inputs), "--outputs", str(outputs))
    with np.load(outputs) as out:
        return {k: out[k] for k in out.files}


def _run_pipeline(tmp_path, module, stages, inputs):
    """Forward 0..D-1, then backward D-1..0; returns the loss and the gradients
    (partial gradients of one parameter summed in stage order)."""
    forward_values = [dict(inputs) for _ in range(stages)]  # what each stage's backward sees
    values = dict(inputs)
    results = {}
    for s in range(stages):
        out = _run(tmp_path, module, values, f"stage{s}_forward")
        values = dict(inputs)
        for name, v in out.items():
            if name.startswith("act/"):
                values[name] = v
            elif name.startswith("saved/"):
                forward_values[s][name] = v
            else:
                assert name not in results, name
                results[name] = v
    grad_acts = {}
    partial = {}
    for s in reversed(range(stages)):
        out = _run(tmp_path, module, {**forward_values[s], **grad_acts}, f"stage{s}_backward")
        grad_acts = {}
        for name, v in out.items():
            if name.startswith("grad_act/"):
                grad_acts[name] = v
            else:
                partial.setdefault(name, []).append((s, v))
    assert not grad_acts, "stage 0 returned activation gradients"
    for name, parts in partial.items():
        total = parts[0][1]
        for _, v in parts[1:]:
            total = total + v
        results[name] = total
    return results, {name: [s for s, _ in parts] for name, parts in partial.items()}


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stage_split")
    return tmp, {layers: import_step(tmp, layers)[1:] for layers in (2, 4)}


@pytest.mark.parametrize("layers,stages", [(2, 2), (4, 2), (4, 4)])
def test_stage_functions_equal_the_unsplit_step(steps, layers, stages):
    tmp, models = steps
    plain, tagged = models[layers]
    work = tmp / f"l{layers}_d{stages}"
    work.mkdir()
    split = work / "split.mlir"
    run_tool("pf-opt", str(tagged), f"--pf-split-stages=stages={stages}", "-o", str(split))
    text = split.read_text()
    for s in range(stages):
        assert f"func.func @stage{s}_forward(" in text and f"func.func @stage{s}_backward(" in text
    assert "func.func @main(" not in text

    inputs = stage_inputs()
    want = _run(work, plain, inputs)
    got, stages_of = _run_pipeline(work, split, stages, inputs)

    assert set(got) == set(want)
    assert np.isfinite(want["loss"]) and float(want["loss"]) > 0
    # The tied embedding has a partial gradient on the first and the last stage;
    # every other parameter's gradient comes from exactly one stage.
    assert stages_of[TIED] == [stages - 1, 0]
    assert all(len(v) == 1 for k, v in stages_of.items() if k != TIED)
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_encoder_gradients_stay_on_their_stage(steps):
    """With 4 blocks on 4 stages, the gradient of block b's weights is a result
    of stage b's backward only, and each stage reads only its own parameters."""
    tmp, models = steps
    _, tagged = models[4]
    split = tmp / "l4_d4_structure.mlir"
    run_tool("pf-opt", str(tagged), "--pf-split-stages=stages=4", "-o", str(split))
    text = split.read_text()
    bodies = re.split(r"\n  func\.func @", text)[1:]
    funcs = {b.split("(", 1)[0]: b for b in bodies}
    for s in range(4):
        for name in (f"stage{s}_forward", f"stage{s}_backward"):
            blocks = set(re.findall(r"pf\.param_ref @bert\.encoder\.layer\.(\d+)\.", funcs[name]))
            assert blocks <= {str(s)}, (name, blocks)
        grads = set(re.findall(r'"grad/bert\.encoder\.layer\.(\d+)\.', funcs[f"stage{s}_backward"]))
        assert grads == {str(s)}


# --- units of their own: the embeddings, block halves, the head's parts ------------

HALVES = ["embeddings", "block0.attn", "block0.ffn", "block1.attn", "block1.ffn",
          "head.transform", "head.decoder"]


@pytest.fixture(scope="module")
def fused_step(tmp_path_factory):
    """BERT-tiny after pf-train's graph passes: its LayerNorms are pf.layer_norm
    ops, where grain=half cuts a block (and the head)."""
    tmp = tmp_path_factory.mktemp("stage_units")
    ir = import_step(tmp, 2)[0]
    plain, tagged = tmp / "fused_step.mlir", tmp / "fused_step_tagged.mlir"
    run_tool("pf-opt", str(ir), "--pf-graph-opt", "--pf-add-masked-lm-loss",
             "--pf-build-gradients", "-o", str(plain))
    run_tool("pf-opt", str(ir), "--pf-graph-opt", "--pf-add-masked-lm-loss",
             "--pf-build-gradients=tag-origin=true", "-o", str(tagged))
    return tmp, plain, tagged


def _units(text, stages):
    """pf.units of every stage's forward, in stage order."""
    units = []
    for s in range(stages):
        head = re.search(rf"func\.func @stage{s}_forward\(.*", text).group(0)
        listed = re.search(r"pf\.units = \[([^\]]*)\]", head)
        assert listed, head
        units.append(re.findall(r'"([^"]+)"', listed.group(1)))
    return units


@pytest.mark.parametrize("grain,stages", [("half", 7), ("half", 3), ("half", 2), ("ends", 4)])
def test_units_equal_the_unsplit_step(fused_step, grain, stages):
    """Cuts inside an encoder block (between its attention and FFN halves) and
    between the last block and the head, or between the head's transform and
    its decoder, keep the stage functions bitwise equal to the unsplit step."""
    tmp, plain, tagged = fused_step
    work = tmp / f"{grain}_d{stages}"
    work.mkdir()
    split = work / "split.mlir"
    run_tool("pf-opt", str(tagged), f"--pf-split-stages=stages={stages} grain={grain}",
             "-o", str(split))
    units = _units(split.read_text(), stages)
    # The units in model order, each on one stage, every stage holding some.
    flat = [u for stage in units for u in stage]
    if grain == "half":
        assert flat == HALVES
    else:
        assert flat == ["embeddings", "block0", "block1", "head"]
    assert all(units)
    if stages == 7:
        assert units == [[u] for u in HALVES]  # a cut inside every block and the head

    inputs = stage_inputs()
    want = _run(work, plain, inputs)
    got, stages_of = _run_pipeline(work, split, stages, inputs)
    assert set(got) == set(want)
    assert stages_of[TIED] == [stages - 1, 0]
    assert all(len(v) == 1 for k, v in stages_of.items() if k != TIED)
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
