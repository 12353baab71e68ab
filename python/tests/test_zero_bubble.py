"""The input/weight backward split (`pf-split-stages{split-backward=true}`)
and the ZB-H1 and ZB-H2 per-rank programs (`pf-build-rank-programs{schedule=zb-h1|zb-h2}`):
`mpirun -np D pf-run --run-ranks` against `pf-run --run-stages` of the
*unsplit* stage functions (fused backwards, GPipe order) on the same inputs.

Loss and every gradient are **bitwise equal**: the two halves of a backward
hold the fused backward's ops, each op once, in the step's order, and an op's
result depends only on its operands (the halves hand the values between them
unchanged, as wsaved/* results and arguments); the schedule only reorders
whole calls, and deferring a weight half changes nothing it reads. The tied
embedding's two parts and the micro-batch combination are formed as in the
fused case (test_rank_executor.py).

Every subprocess has a timeout, so a hang fails the test instead of blocking.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from pipefisher.tools import tool

from stage_models import BATCH, import_step, load_npz, stage_inputs

MPIRUN = shutil.which("mpirun")


def _run(args, timeout=120, check=True):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed ({proc.returncode}):\n"
                           f"{proc.stdout}\n{proc.stderr}")
    return proc


def _mpirun(ranks, *args, timeout=120):
    return _run([MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", ranks,
                 tool("pf-run"), *args], timeout)


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """The tagged one-micro-batch training steps of BERT-tiny (2 blocks) and a
    4-block BERT."""
    tmp = tmp_path_factory.mktemp("zero_bubble")
    return tmp, {layers: import_step(tmp, layers)[2] for layers in (2, 4)}


def _module(steps, layers, stages, split, programs=None):
    tmp, built = steps
    name = f"l{layers}_d{stages}_{'split' if split else 'fused'}_{programs or 'none'}.mlir"
    path = tmp / name.replace(" ", "_").replace("=", "")
    if not path.exists():
        args = [tool("pf-opt"), built[layers],
                f"--pf-split-stages=stages={stages} split-backward={str(split).lower()}"]
        if programs:
            args.append(f"--pf-build-rank-programs={programs}")
        _run([*args, "-o", path])
    return path


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")
@pytest.mark.parametrize("schedule", ["zb-h1", "zb-h2"])
@pytest.mark.parametrize("microbatches", [1, 4])
@pytest.mark.parametrize("layers,stages", [(2, 2), (4, 2), (4, 4)])
def test_zero_bubble_ranks_equal_fused_run_stages_bitwise(steps, tmp_path, layers, stages,
                                                          microbatches, schedule):
    fused = _module(steps, layers, stages, split=False)
    programs = _module(steps, layers, stages, split=True,
                       programs=f"schedule={schedule} microbatches={microbatches}")
    text = programs.read_text()
    assert "pf.run_stage backward_weight" in text and "pf.run_stage backward " not in text
    inp = tmp_path / "in.npz"
    np.savez(inp, **stage_inputs(BATCH * microbatches, seed=11 + microbatches))
    want_path, got_path = tmp_path / "want.npz", tmp_path / "got.npz"
    _run([tool("pf-run"), fused, "--run-stages", "--micro-batches", microbatches, "--inputs",
          inp, "--outputs", want_path])
    proc = _mpirun(stages, programs, "--run-ranks", "--inputs", inp, "--outputs", got_path)
    for r in range(stages):
        assert (f"rank {r}: stages [{r}], functions stage{r}_forward stage{r}_backward_input "
                f"stage{r}_backward_weight") in proc.stdout, proc.stdout
    want, got = load_npz(want_path), load_npz(got_path)
    assert set(got) == set(want) and "loss" in want and len(want) > 20
    assert np.isfinite(want["loss"]) and float(want["loss"]) > 0
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("layers,stages,microbatches", [(2, 2, 2), (4, 4, 1)])
def test_split_run_stages_equals_fused_bitwise(steps, tmp_path, layers, stages, microbatches):
    """`pf-run --run-stages` over the halves (input half, then weight half, in
    place of each backward) against the fused backwards."""
    inp = tmp_path / "in.npz"
    np.savez(inp, **stage_inputs(BATCH * microbatches, seed=3))
    outputs = {}
    for split in (False, True):
        out = tmp_path / f"out_{split}.npz"
        _run([tool("pf-run"), _module(steps, layers, stages, split), "--run-stages",
              "--micro-batches", microbatches, "--inputs", inp, "--outputs", out])
        outputs[split] = load_npz(out)
    assert set(outputs[True]) == set(outputs[False]) and len(outputs[False]) > 20
    for name, want in outputs[False].items():
        np.testing.assert_array_equal(outputs[True][name], want, err_msg=name)


def test_split_interface(steps):
    """BERT-tiny, D = 2: stage 0 sends nothing back, so its input half is
    empty; stage 1's input half returns the gradient for stage 0 and the
    values its weight half needs (wsaved/*); only weight halves return grad/*."""
    text = _module(steps, 2, 2, split=True).read_text()
    heads = {line.split("@")[1].split("(")[0]: line for line in text.splitlines()
             if line.strip().startswith("func.func @stage")}
    assert set(heads) == {"stage0_forward", "stage0_backward_input", "stage0_backward_weight",
                          "stage1_forward", "stage1_backward_input", "stage1_backward_weight"}
    assert "stage0_backward_input() attributes" in heads["stage0_backward_input"]
    b1, w1 = heads["stage1_backward_input"], heads["stage1_backward_weight"]
    assert "grad_act/" in b1.split("->")[1] and "grad/" not in b1
    wsaved = [x.split('"')[0] for x in b1.split("->")[1].split('pf.name = "wsaved/')[1:]]
    assert wsaved and all(f'"wsaved/{w}"' in w1.split("->")[0] for w in wsaved)
    assert w1.split("->")[1].count('"grad/') == 22, w1
    assert heads["stage0_backward_weight"].split("->")[1].count('"grad/') == 21


def test_zb_h1_needs_the_split(steps, tmp_path):
    fused = _module(steps, 2, 2, split=False)
    proc = _run([tool("pf-opt"), fused, "--pf-build-rank-programs=schedule=zb-h1",
                 "-o", tmp_path / "x.mlir"], check=False)
    assert proc.returncode != 0
    assert ("schedule 'zb-h1' needs @stage0_backward_input and @stage0_backward_weight "
            "(run pf-split-stages with split-backward=true)") in proc.stderr, proc.stderr
