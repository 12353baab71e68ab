"""pf-train --kfac-factor-every F: the K-FAC factors are updated at every
step of the refresh warm-up, then at its first step and every F-th after
(the step's `kfac_curvature` input, pf-kfac-precondition curvature-input);
the preconditioning (and the inverse refresh) go on every step. A pipeline
(1F1B, D = 2) with it is bitwise equal to single-process training with it;
Chimera (whose replicas sum their factor copies: on a step without factor
updates the second copy contributes -0.0) equals it within rounding, as
Chimera with K-FAC does. Bad options are refused."""

from __future__ import annotations

import numpy as np
import pytest

from pipefisher.tools import run_tool

from test_kfac_eigen import tiny  # noqa: F401 (a fixture)
from test_pipeline_training import (MPIRUN, _assert_same_checkpoint, _load, _losses,  # noqa: F401
                                    _pipeline, _single, setup)

FACTOR = "param/bert.encoder.layer.0.attention.self.query.weight.kfac."
WEIGHT = "param/bert.encoder.layer.0.attention.self.query.weight"


def _train(tiny, steps, *args, check=True):
    path = tiny / f"factor-every-{steps}-{'-'.join(map(str, args))}.npz"
    proc = run_tool("pf-train", str(tiny / "m.onnx"), "--corpus", str(tiny / "corpus.npz"),
                    "--batch", "8", "--log-every", "1", "--num-threads", "1", "--steps",
                    str(steps), "--checkpoint", str(path), *map(str, args), check=check)
    if not check:
        return proc
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def test_factors_change_only_on_their_steps(tiny):
    # Warm-up 1: factors at step 1, then steps 2, 5, 8, ... (F = 3).
    args = ("--kfac", "--kfac-refresh-warmup", "1", "--kfac-factor-every", "3")
    runs = {steps: _train(tiny, steps, *args) for steps in range(1, 6)}
    for factor in ("A", "B"):
        key = FACTOR + factor
        assert not np.array_equal(runs[2][key], runs[1][key]), key
        np.testing.assert_array_equal(runs[3][key], runs[2][key], err_msg=key)
        np.testing.assert_array_equal(runs[4][key], runs[2][key], err_msg=key)
        assert not np.array_equal(runs[5][key], runs[4][key]), key
    # The weights move at every step.
    for steps in range(2, 6):
        assert not np.array_equal(runs[steps][WEIGHT], runs[steps - 1][WEIGHT]), steps
    # Until step 2 the factors are every-step K-FAC's, bit for bit (the gate
    # changes when, not how); from step 3 on they differ.
    default = {steps: _train(tiny, steps, "--kfac", "--kfac-refresh-warmup", "1")
               for steps in (2, 5)}
    np.testing.assert_array_equal(runs[2][FACTOR + "A"], default[2][FACTOR + "A"])
    assert not np.array_equal(runs[5][FACTOR + "A"], default[5][FACTOR + "A"])


@pytest.mark.parametrize("args,message", [
    (("--kfac", "--kfac-factor-every", "0"), "--kfac-factor-every 0: needs >= 1"),
    (("--kfac-factor-every", "2"), "above 1, --kfac without --kfac-window"),
    (("--kfac", "--kfac-window", "2", "--kfac-factor-every", "2"),
     "above 1, --kfac without --kfac-window"),
    (("--kfac", "--kfac-refresh-warmup", "1", "--kfac-factor-every", "2", "--pipeline",
      "microbatches=2 kfac=bubbles"), "the windows decide the factor steps"),
    (("--kfac", "--kfac-refresh-warmup", "1", "--kfac-interval-schedule", "step", "--pipeline",
      "microbatches=2 kfac=bubbles"), "the windows decide the factor and refresh steps"),
])
def test_bad_factor_intervals_are_refused(tiny, args, message):
    proc = _train(tiny, 2, *args, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def _single_and_pipeline(setup, tmp_path, schedule):
    """6 steps with F = 2, single-process and on a D = 2 pipeline: (losses,
    checkpoint) of each."""
    args = ("--kfac", "--kfac-refresh-warmup", "1", "--kfac-factor-every", "2", "--steps", "6",
            "--log-every", "1", "--micro-batches", "4")
    single, piped = tmp_path / "single.npz", tmp_path / f"{schedule}.npz"
    want = _single(setup, "tiny", *args, "--checkpoint", single, timeout=120)
    got = _pipeline(setup, 2, "tiny", f"stages=2 schedule={schedule} microbatches=4", *args,
                    "--checkpoint", piped, timeout=180)
    return (_losses(want.stdout), _load(single)), (_losses(got.stdout), _load(piped))


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")
def test_pipeline_with_a_factor_interval_equals_single_process(setup, tmp_path):
    (want_losses, want_state), (got_losses, got_state) = _single_and_pipeline(
        setup, tmp_path, "1f1b")
    assert got_losses == want_losses
    _assert_same_checkpoint(got_state, want_state)


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")
def test_chimera_with_a_factor_interval_equals_single_process_within_rounding(setup, tmp_path):
    (want_losses, want_state), (got_losses, got_state) = _single_and_pipeline(
        setup, tmp_path, "chimera")
    assert got_losses == want_losses
    assert sorted(got_state) == sorted(want_state)
    compared = 0
    for key, value in want_state.items():
        # The attention key biases' gradient is rounding noise (see
        # test_pipeline_kfac.py).
        if not key.startswith("param/") or "attention.self.key.bias" in key:
            continue
        expected = value.astype(np.float64)
        difference = np.linalg.norm((got_state[key] - expected).ravel())
        assert difference <= 1e-3 * max(np.linalg.norm(expected.ravel()), 1e-30), key
        compared += 1
    assert compared > 50
    # A doubled factor (both copies summed on a step without updates) would
    # be twice the single-process one.
    factor = "param/bert.encoder.layer.0.attention.self.query.weight.kfac.A"
    np.testing.assert_allclose(got_state[factor], want_state[factor], rtol=1e-4, atol=1e-6)
