"""K-FAC damping schedules: the step's λ as a per-step input (pf-kfac-precondition
damping-input, an f64 argument `kfac_damping`) and pf-train's
--kfac-damping-schedule that feeds it (constant, warmup, step), against the
attribute path and the schedules' formulas; bad options are refused."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipefisher.tools import run_tool

from test_kfac_eigen import WEIGHT, _inputs, _module, tiny  # noqa: F401 (a fixture)

PROGRESS = re.compile(r"^step\s+(\d+)\s+loss\s+(\S+)\s+lr\s+\S+\s+tokens/s\s+\S+\s+ms/step\s+\S+"
                      r"(?:\s+damping\s+(\S+))?$", re.M)


def _run_step(tmp_path, name, options, **extra_inputs):
    x, probe, rng = _inputs(21)
    w = rng.normal(size=(5, 4)).astype(np.float32)
    b = rng.normal(size=5).astype(np.float32)
    (tmp_path / "m.mlir").write_text(_module(w, b, False))
    step = tmp_path / f"{name}.mlir"
    run_tool("pf-opt", str(tmp_path / "m.mlir"), "--pf-insert-kfac", "--pf-build-gradients",
             f"--pf-kfac-precondition=kl-clip=0 graft=none export-factors=true {options}", "-o",
             str(step))
    np.savez(tmp_path / f"{name}.npz", x=x, probe=probe, step=np.int64(1), **extra_inputs)
    run_tool("pf-run", str(step), "--inputs", str(tmp_path / f"{name}.npz"), "--outputs",
             str(tmp_path / f"{name}-out.npz"))
    return dict(np.load(tmp_path / f"{name}-out.npz")), step.read_text()


@pytest.mark.parametrize("basis", ["inverse", "eigen"])
def test_damping_input_equals_the_option(tmp_path, basis):
    """λ from the kfac_damping input gives the bits the damping option gives."""
    damping = 0.037
    want, _ = _run_step(tmp_path, "option", f"basis={basis} damping={damping}")
    got, ir = _run_step(tmp_path, "input", f"basis={basis} damping=5 damping-input=true",
                        kfac_damping=np.float64(damping))
    assert '{pf.name = "kfac_damping"}' in ir
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    # And another λ changes the preconditioned gradient.
    other, _ = _run_step(tmp_path, "other", f"basis={basis} damping-input=true",
                         kfac_damping=np.float64(10 * damping))
    assert not np.allclose(other[f"grad/{WEIGHT}"], want[f"grad/{WEIGHT}"])


def _train(tiny, *args, check=True):
    return run_tool("pf-train", str(tiny / "m.onnx"), "--corpus", str(tiny / "corpus.npz"),
                    "--batch", "8", "--log-every", "1", "--num-threads", "1", "--steps", "8",
                    *map(str, args), check=check)


def _progress(proc):
    rows = PROGRESS.findall(proc.stdout)
    assert [int(step) for step, _, _ in rows] == list(range(1, 9)), proc.stdout
    return [loss for _, loss, _ in rows], [float(d) if d else None for _, _, d in rows]


@pytest.mark.parametrize("basis", ["inverse", "eigen"])
def test_schedules_follow_their_formulas(tiny, basis):
    final = 1e-4
    constant = _train(tiny, "--kfac", "--kfac-basis", basis, "--kfac-damping", final)
    losses, dampings = _progress(constant)
    assert dampings == [None] * 8  # no column without a schedule

    # step with decay 1: the input path at a constant λ, the same run.
    same = _train(tiny, "--kfac", "--kfac-basis", basis, "--kfac-damping", final,
                  "--kfac-damping-schedule", "step", "--kfac-damping-decay", 1)
    same_losses, same_dampings = _progress(same)
    assert same_losses == losses and same_dampings == [final] * 8

    warm = _train(tiny, "--kfac", "--kfac-basis", basis, "--kfac-damping", final,
                  "--kfac-damping-schedule", "warmup", "--kfac-damping-start", 1e-1,
                  "--kfac-damping-warmup", 4)
    warm_losses, warm_dampings = _progress(warm)
    want = [1e-1 * (final / 1e-1) ** ((t - 1) / 4) if t <= 4 else final for t in range(1, 9)]
    np.testing.assert_allclose(warm_dampings, want, rtol=6e-3)  # printed with 3 digits
    assert warm_losses[1:] != losses[1:]  # the damping shaped the run

    decay = _train(tiny, "--kfac", "--kfac-basis", basis, "--kfac-damping", final,
                   "--kfac-damping-schedule", "step", "--kfac-damping-decay", 0.1,
                   "--kfac-damping-every", 3)
    _, decay_dampings = _progress(decay)
    np.testing.assert_allclose(decay_dampings, [final * 0.1 ** ((t - 1) // 3)
                                                for t in range(1, 9)], rtol=6e-3)


@pytest.mark.parametrize("args,message", [
    (("--kfac-damping-schedule", "warmup"), "it needs --kfac"),
    (("--kfac", "--kfac-damping-schedule", "warmup", "--kfac-damping-start", 0),
     "warmup needs --kfac-damping-start > 0 and --kfac-damping-warmup >= 1"),
    (("--kfac", "--kfac-damping-schedule", "warmup", "--kfac-damping-warmup", 0),
     "warmup needs --kfac-damping-start > 0 and --kfac-damping-warmup >= 1"),
    (("--kfac", "--kfac-damping-schedule", "step", "--kfac-damping-decay", 1.5),
     "step needs --kfac-damping-decay in (0, 1] and --kfac-damping-every >= 1"),
    (("--kfac", "--kfac-damping-schedule", "step", "--kfac-damping-every", 0),
     "step needs --kfac-damping-decay in (0, 1] and --kfac-damping-every >= 1"),
    (("--kfac", "--kfac-damping", 0, "--kfac-damping-schedule", "step"),
     "needs --kfac-damping > 0"),
    (("--kfac", "--kfac-window", 2, "--kfac-damping-schedule", "step"),
     "with K-FAC in the bubbles (--kfac-window, kfac=bubbles) is not supported yet"),
    (("--kfac", "--kfac-damping-schedule", "cosine"), "cosine"),
])
def test_bad_schedules_are_refused(tiny, args, message):
    proc = _train(tiny, *args, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
