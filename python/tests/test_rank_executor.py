"""`mpirun -np D pf-run PROGRAMS.mlir --run-ranks`: the per-rank programs of
`pf-build-rank-programs` run on D MPI ranks (one stage per rank, the
activations and their gradients sent between them, the tied embedding's
gradient all-reduced), checked against `pf-run --run-stages` (every stage in
one process, GPipe order) on the same module and inputs.

Loss and every gradient are **bitwise equal**, for both schedules and any
number of micro-batches: each stage function runs the same ops in the same
order on either side (the schedule only changes the order of whole calls,
and a call's result does not depend on what ran before it); the tied word
embedding's two partial gradients are summed per micro-batch by an all-reduce
of two ranks, which is exactly a + b, the addition `--run-stages` does (IEEE
addition is commutative, so the order of the two parts does not matter); and
both sides combine the micro-batches with the same count-weighted sum
(`weightedMicrobatchSum`, the counts taken from the labels on the host).

Every subprocess has a timeout, so a hang fails the test instead of blocking.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import numpy as np
import pytest

from pipefisher.tools import tool

from stage_models import BATCH, import_step, load_npz, stage_inputs

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")


def _run(args, timeout, check=True):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed ({proc.returncode}):\n"
                           f"{proc.stdout}\n{proc.stderr}")
    return proc


def _tool(name, *args, timeout=120, check=True):
    return _run([tool(name), *args], timeout, check)


def _mpirun(ranks, *args, timeout=120, check=True):
    return _run([MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", ranks,
                 tool("pf-run"), *args], timeout, check)


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """The tagged one-micro-batch training step of BERT-tiny (2 blocks) and of
    a 4-block BERT, as in test_stage_executor.py."""
    tmp = tmp_path_factory.mktemp("rank_executor")
    built = {layers: import_step(tmp, layers)[2] for layers in (2, 4)}
    return tmp, built


def _programs(steps, layers, stages, schedule, microbatches):
    tmp, built = steps
    path = tmp / f"l{layers}_d{stages}_{schedule}_n{microbatches}.mlir"
    if not path.exists():
        _tool("pf-opt", built[layers], f"--pf-split-stages=stages={stages}",
              f"--pf-build-rank-programs=schedule={schedule} microbatches={microbatches}",
              "-o", path)
    return path


@pytest.mark.parametrize("microbatches", [1, 4])
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("layers,stages", [(2, 2), (4, 2), (4, 4)])
def test_ranks_equal_run_stages_bitwise(steps, tmp_path, layers, stages, schedule,
                                        microbatches):
    programs = _programs(steps, layers, stages, schedule, microbatches)
    inp = tmp_path / "in.npz"
    np.savez(inp, **stage_inputs(BATCH * microbatches, seed=5 + microbatches))
    want_path, got_path = tmp_path / "want.npz", tmp_path / "got.npz"
    _tool("pf-run", programs, "--run-stages", "--micro-batches", microbatches, "--inputs", inp,
          "--outputs", want_path)
    proc = _mpirun(stages, programs, "--run-ranks", "--inputs", inp, "--outputs", got_path)
    want, got = load_npz(want_path), load_npz(got_path)
    assert f"ranks {stages}, micro-batches {microbatches}" in proc.stdout
    for r in range(stages):
        assert f"rank {r}: stages [{r}], functions stage{r}_forward stage{r}_backward" \
            in proc.stdout, proc.stdout
    assert set(got) == set(want) and "loss" in want and len(want) > 20
    assert np.isfinite(want["loss"]) and float(want["loss"]) > 0
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_each_rank_holds_only_its_stages_parameters(steps, tmp_path):
    programs = _programs(steps, 4, 4, "1f1b", 1)
    inp = tmp_path / "in.npz"
    np.savez(inp, **stage_inputs(BATCH, seed=1))
    proc = _mpirun(4, programs, "--run-ranks", "--inputs", inp)
    counts = {}
    for r in range(4):
        line = next(x for x in proc.stdout.splitlines() if x.startswith(f"rank {r}: "))
        counts[r] = int(line.split("parameters ")[1].split(" ")[0])
    # 4 blocks of 16 parameters; the embeddings (5 + LayerNorm) on the first
    # stage, the heads and the tied decoder weight on the last.
    assert counts[1] == counts[2] == 16, counts
    assert counts[0] > 16 and counts[3] > 16, counts


def test_wrong_number_of_ranks_fails_fast(steps, tmp_path):
    programs = _programs(steps, 2, 2, "gpipe", 1)
    inp = tmp_path / "in.npz"
    np.savez(inp, **stage_inputs(BATCH, seed=1))
    start = time.monotonic()
    proc = _mpirun(3, programs, "--run-ranks", "--inputs", inp, timeout=60, check=False)
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    assert "has 2 pf.rank_program ops but the job has 3 ranks" in proc.stderr, proc.stderr
    assert elapsed < 30, elapsed


def test_bad_options_are_diagnosed(steps, tmp_path):
    programs = _programs(steps, 2, 2, "gpipe", 1)
    inp = tmp_path / "in.npz"
    inputs = stage_inputs(BATCH, seed=1)
    np.savez(inp, **inputs)
    proc = _mpirun(2, programs, "--run-ranks", "--micro-batches", 2, "--inputs", inp,
                   timeout=60, check=False)
    assert proc.returncode != 0
    assert "--micro-batches 2 but the rank programs have microbatches(1)" in proc.stderr
    # A graph input missing: every rank reading it says so; the job ends.
    np.savez(inp, **{k: v for k, v in inputs.items() if k != "labels"})
    proc = _mpirun(2, programs, "--run-ranks", "--inputs", inp, timeout=60, check=False)
    assert proc.returncode != 0
    assert "rank 1: op " in proc.stderr and "missing input 'labels'" in proc.stderr, proc.stderr
    # A module without rank programs.
    split = steps[0] / "split_only.mlir"
    _tool("pf-opt", steps[1][2], "--pf-split-stages=stages=2", "-o", split)
    proc = _mpirun(1, split, "--run-ranks", "--inputs", inp, timeout=60, check=False)
    assert proc.returncode != 0 and "no pf.rank_program" in proc.stderr, proc.stderr
    proc = _tool("pf-run", programs, "--run-ranks", "--run-stages", "--inputs", inp,
                 check=False)
    assert proc.returncode != 0 and "--run-ranks takes none of" in proc.stderr, proc.stderr


def _edited(steps, name, edit):
    """The D = 2 GPipe N = 1 programs of BERT-tiny with `edit` applied to the
    text; the edits below keep the programs verifying (both sides agree), so
    the executor itself must find the problem."""
    text = _programs(steps, 2, 2, "gpipe", 1).read_text()
    edited = edit(text)
    assert edited != text
    path = steps[0] / name
    path.write_text(edited)
    return path


def test_transfer_type_that_is_not_the_functions_is_refused_before_the_job(steps, tmp_path):
    """A send whose type is not that of the value it sends (the stage
    function's result) no longer reaches the ranks: the value is SSA, so
    the parser refuses the program, naming the op and the value, on every
    rank at once (no rank waits in a recv)."""
    def shrink(text):
        lines = []
        for line in text.splitlines():
            if "pf.send_act" in line and "x128xf32>" in line and "microbatch(0)" in line:
                line = line.replace("x128xf32>", "x64xf32>")
            lines.append(line)
        return "\n".join(lines) + "\n"

    programs = _edited(steps, "shrunk.mlir", shrink)
    inp = tmp_path / "in.npz"
    np.savez(inp, **stage_inputs(BATCH, seed=1))
    start = time.monotonic()
    proc = _mpirun(2, programs, "--run-ranks", "--inputs", inp, timeout=60, check=False)
    assert proc.returncode != 0
    assert "shrunk.mlir" in proc.stderr, proc.stderr
    assert re.search(r"use of value '%[^']+' expects different type than prior uses: "
                     r"'tensor<2x8x64xf32>' vs 'tensor<2x8x128xf32>'", proc.stderr), proc.stderr
    assert time.monotonic() - start < 30


def test_a_kind_that_is_not_the_functions_is_refused(steps, tmp_path):
    """An accumulate call of a backward verifies (the verifier does not check
    that a kind matches the function) but the executor refuses it, naming
    the input an accumulate call cannot supply."""
    def add_accumulate(text):
        # The first stage's backward returns its gradients' pieces: the copy
        # names its results anew.
        fused = re.search(r"^( *)%[0-9]+((?::[0-9]+)? = )"
                          r"(pf\.run_stage backward @stage0_backward\(.*microbatch\(0\).*)$",
                          text, re.M)
        assert fused, text
        indent, arity, call = fused.group(1), fused.group(2), fused.group(3)
        return text.replace(fused.group(0), fused.group(0) + "\n" + indent + "%copy" + arity +
                            call.replace("backward @", "accumulate @"), 1)

    programs = _edited(steps, "accumulate.mlir", add_accumulate)
    inp = tmp_path / "in.npz"
    np.savez(inp, **stage_inputs(BATCH, seed=1))
    proc = _mpirun(2, programs, "--run-ranks", "--inputs", inp, timeout=60, check=False)
    assert proc.returncode != 0
    assert "rank 0: op " in proc.stderr, proc.stderr
    assert re.search(r"\(pf.run_stage\): unexpected input '[^']+' of stage0_backward",
                     proc.stderr), proc.stderr
