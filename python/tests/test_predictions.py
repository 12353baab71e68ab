"""`pf-train --predictions P`: the masked-LM decoder applied only at each
sequence's predicted positions (gathered, at most P per sequence, as NVIDIA's
BERT pre-training does) instead of at every position.

- With P = 8 of 16 positions no sequence of these batches draws more than
  P masks, so the batches are the same and the run equals the full-decoder
  run within rounding (the printed losses identical, every weight and
  optimizer moment within 1e-5 relative; measured: within 1e-6), with and
  without K-FAC. The attention key biases are left out: their gradient is
  zero but for rounding noise (softmax is invariant to them), as in the
  other parity tests.
- A pipeline (the last stage gathers) is bitwise equal to single-process
  training with the same P, as every pipelined run is.
- A small P caps the masks (the run differs) and still trains; bad values
  are refused with a message.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from test_pipeline_training import (MPIRUN, _assert_same_checkpoint, _load, _losses,  # noqa: F401
                                    _pipeline, _single, setup)

SEQUENCE = 16  # the corpus of the setup fixture
PREDICTIONS = 8
NOISE_ONLY = "attention.self.key.bias"


def _relative(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-30)


@pytest.mark.parametrize("extra", [(), ("--kfac",)], ids=["adamw", "kfac"])
def test_gathered_decoder_equals_the_full_one_within_rounding(setup, tmp_path, extra):
    full, gathered = tmp_path / "full.npz", tmp_path / "gathered.npz"
    args = ("--steps", "6", "--log-every", "1", *extra)
    want = _single(setup, "tiny", *args, "--checkpoint", full, timeout=120)
    step = tmp_path / "step.mlir"
    got = _single(setup, "tiny", *args, "--predictions", str(PREDICTIONS), "--checkpoint",
                  gathered, "--emit-step", step, timeout=120)
    # The decoder runs on [batch, P] rows: the logits are [8, P, vocabulary].
    loss_line = next(line for line in step.read_text().splitlines()
                     if "pf.softmax_cross_entropy" in line)
    assert f": (tensor<8x{PREDICTIONS}x" in loss_line, loss_line
    want_losses, got_losses = _losses(want.stdout), _losses(got.stdout)
    assert len(got_losses) == 6
    assert got_losses == want_losses
    want_state, got_state = _load(full), _load(gathered)
    assert sorted(got_state) == sorted(want_state)
    compared = 0
    for key, value in want_state.items():
        if not key.startswith("param/") or NOISE_ONLY in key:
            continue
        assert got_state[key].shape == value.shape, key
        assert _relative(got_state[key], value) < 1e-5, key
        compared += 1
    assert compared > 20


@pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")
def test_pipeline_with_gathered_decoder_equals_single_process(setup, tmp_path):
    single, piped = tmp_path / "single.npz", tmp_path / "pipeline.npz"
    args = ("--steps", "5", "--log-every", "1", "--predictions", "6", "--micro-batches", "4")
    want = _single(setup, "tiny", *args, "--checkpoint", single, timeout=120)
    got = _pipeline(setup, 2, "tiny", "stages=2 schedule=1f1b microbatches=4", *args,
                    "--checkpoint", piped, timeout=180)
    assert _losses(got.stdout) == _losses(want.stdout)
    _assert_same_checkpoint(_load(piped), _load(single))


def test_a_small_cap_changes_the_masks_and_trains(setup, tmp_path):
    args = ("--steps", "4", "--log-every", "1")
    full = _losses(_single(setup, "tiny", *args, timeout=120).stdout)
    capped = _losses(_single(setup, "tiny", *args, "--predictions", "1", timeout=120).stdout)
    assert len(capped) == 4
    assert all(np.isfinite(float(loss)) for _, loss, _ in capped)
    assert [loss for _, loss, _ in capped] != [loss for _, loss, _ in full]


@pytest.mark.parametrize("value,message", [
    ("-1", "predictions must be >= 0, got -1"),
    (str(SEQUENCE + 1), f"predictions={SEQUENCE + 1} exceeds the sequence length {SEQUENCE}"),
])
def test_bad_predictions_are_refused(setup, value, message):
    proc = _single(setup, "tiny", "--steps", "1", "--predictions", value, timeout=60,
                   check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    assert not re.search(r"Stack dump|Segmentation", proc.stderr)
