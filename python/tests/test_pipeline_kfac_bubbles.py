"""K-FAC in the pipeline's bubbles:
`mpirun -np D pf-train --kfac --pipeline "... kfac=bubbles [refresh=K]"`
against single-process `pf-train --kfac --kfac-window K --micro-batches N`.

The warm-up steps (--kfac-refresh-warmup W) invert every layer at their end
and are measured; then rank 0 places each layer's inverse call into a bubble
of a window of K steps (the scheduler's K, or refresh=K) and every rank runs
the window programs. The curvature of a window's first step is inverted
during the window into pending inverses and used in the next window; the
single-process --kfac-window K has the same arithmetic.

- Parity: the gathered checkpoint (weights, AdamW moments, K-FAC factors and
  the inverses in use) and the losses are **bitwise equal** to
  single-process --kfac-window K (the placement changes when, not what, is
  computed): BERT-tiny D = 2 with gpipe, 1f1b, zb-h1 and zb-h2 at refresh=3;
  BERT-mini D = 2 with 1f1b at the scheduler's own K (read from the run's
  plan line) and D = 4 (oversubscribed: correctness only); BERT-mini D = 2
  with interleaved, zb-v and dualpipev (two stages per rank) at refresh=3.
- The window arithmetic is not every-step K-FAC, and not first-order.
- Resuming inside a window and at a window's start continues bit for bit
  (the pending inverses are recomputed; the checkpoint keeps the placement).
- Chimera (two replicas per stage): each layer's inverse on one replica, in
  a later window step than the factors' sum, handed to the other at the
  window's end; each layer's preconditioning on one replica, broadcast to
  the other (the measured trace shows each layer once per step); within
  rounding of single-process, resumes bitwise. DualPipe's two pipes alike.
- Options that do not go together are refused with a message.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from test_pipeline_training import (MPIRUN, _assert_same_checkpoint, _load, _losses,  # noqa: F401
                                    _pipeline, _single, setup)

pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")

STEPS = "12"
WARMUP = ("--kfac", "--kfac-refresh-warmup", "2")
PLAN = re.compile(r"^K-FAC in the bubbles: windows of (\d+) step\(s\) from step (\d+) .*"
                  r"inverse calls per window step: (.*); factor calls placed in step 0: (\d+)$",
                  re.M)


def _without_placement(checkpoint):
    assert "meta/kfac_placement" in checkpoint
    return {k: v for k, v in checkpoint.items() if k != "meta/kfac_placement"}


def _single_window(setup, model, window, path, *extra):
    proc = _single(setup, model, *WARMUP, "--kfac-window", str(window), "--micro-batches", "4",
                   "--steps", STEPS, "--log-every", "1", "--checkpoint", path, *extra,
                   timeout=300)
    return _load(path), _losses(proc.stdout)


PARITY = [("tiny", 2, "gpipe", "refresh=3"), ("tiny", 2, "1f1b", "refresh=3"),
          ("tiny", 2, "zb-h1", "refresh=3"), ("tiny", 2, "zb-h2", "refresh=3"),
          ("mini", 2, "1f1b", ""),
          ("mini", 4, "1f1b", "refresh=2"),
          # Two stages per rank (chunks=2): each rank's calls of both.
          ("mini", 2, "interleaved", "refresh=3"),
          # The V: stages s and 2D-1-s on rank s.
          ("mini", 2, "zb-v", "refresh=3"),
          ("mini", 2, "dualpipev", "refresh=3"),
          # K = 1: every inverse after all of the curvature step's calls, a
          # whole backward counted as its two calls.
          ("mini", 2, "dualpipev", "refresh=1"),
          # The eigenbasis: pending eigenvectors and eigenvalues, promoted.
          ("tiny", 2, "1f1b", "refresh=3", ("--kfac-basis", "eigen"))]
PARITY = [case if len(case) == 5 else (*case, ()) for case in PARITY]


@pytest.mark.parametrize("model,ranks,schedule,refresh,extra", PARITY,
                         ids=[f"{m}-D{d}-{s}-{r or 'auto'}" + ("-eigen" if e else "")
                              for m, d, s, r, e in PARITY])
def test_bubbles_equal_single_process_window_bitwise(setup, tmp_path, model, ranks, schedule,
                                                     refresh, extra):
    got_path = tmp_path / "pipeline.npz"
    proc = _pipeline(setup, ranks, model,
                     f"stages={ranks} schedule={schedule} microbatches=4 kfac=bubbles {refresh}",
                     *WARMUP, "--steps", STEPS, "--log-every", "1", "--checkpoint", got_path,
                     *extra, timeout=400)
    plan = PLAN.search(proc.stdout)
    assert plan, proc.stdout
    window, start = int(plan.group(1)), int(plan.group(2))
    assert start == 3
    if refresh:
        assert window == int(refresh.split("=")[1])
    # Every layer's inverse is placed once per window.
    placed = sum(int(n) for n in re.findall(r"step \d+: (\d+)", plan.group(3)))
    # Factor calls the scheduler moved into the curvature step's bubbles:
    # at most A and B of every layer per micro-batch.
    got = _load(got_path)
    layers = sum(1 for k in got if k.endswith((".kfac.A_inv", ".kfac.A_vectors")))
    assert int(plan.group(4)) <= 2 * layers * 4, plan.group(0)
    if schedule == "gpipe":
        # GPipe's bubble (D - 1 passes of each kind) holds many factor calls.
        assert int(plan.group(4)) > 0, plan.group(0)
    assert placed == layers, plan.group(0)
    assert int(got["meta/kfac_window"]) == window
    assert not any(k.endswith("_next") for k in got), "pending inverses are not state"
    want, want_losses = _single_window(setup, model, window, tmp_path / "single.npz", *extra)
    assert _losses(proc.stdout) == want_losses
    _assert_same_checkpoint(_without_placement(got), want)
    # The measured timeline's report compares the windows with the simulation.
    assert re.search(r"^bubble fill \(K-FAC\)\s+\S+%\s+\S+%$", proc.stdout, re.M), proc.stdout


def test_window_arithmetic_is_its_own(setup, tmp_path):
    """--kfac-window changes the run against every-step K-FAC and against
    first-order training, and its inverses are non-zero."""
    window, _ = _single_window(setup, "tiny", 3, tmp_path / "w.npz")
    every = tmp_path / "every.npz"
    _single(setup, "tiny", *WARMUP, "--micro-batches", "4", "--steps", STEPS, "--checkpoint",
            every, timeout=300)
    first = tmp_path / "first.npz"
    _single(setup, "tiny", "--micro-batches", "4", "--steps", STEPS, "--checkpoint", first,
            timeout=300)
    every, first = _load(every), _load(first)
    for key, value in window.items():
        if key.endswith((".kfac.A_inv", ".kfac.B_inv")):
            assert np.abs(value).max() > 0, key
    weights = [k for k in first if ".encoder." in k and k.endswith(".weight")
               and "LayerNorm" not in k and ".kfac." not in k and k.startswith("param/")]
    assert weights
    assert all(not np.array_equal(window[k], every[k]) for k in weights)
    assert all(not np.array_equal(window[k], first[k]) for k in weights)


@pytest.mark.parametrize("cut", [4, 5], ids=["inside-a-window", "at-a-window-start"])
def test_resume_inside_a_window_continues_bitwise(setup, tmp_path, cut):
    spec = "stages=2 schedule=1f1b microbatches=4 kfac=bubbles refresh=3"
    whole = tmp_path / "whole.npz"
    _pipeline(setup, 2, "tiny", spec, *WARMUP, "--steps", "10", "--checkpoint", whole,
              timeout=300)
    part = tmp_path / "part.npz"
    _pipeline(setup, 2, "tiny", spec, *WARMUP, "--steps", str(cut), "--checkpoint", part,
              timeout=300)
    resumed = tmp_path / "resumed.npz"
    proc = _pipeline(setup, 2, "tiny", spec, *WARMUP, "--steps", "10", "--resume", part,
                     "--checkpoint", resumed, timeout=300)
    assert f"resumed from {part} after step {cut}" in proc.stdout
    got, want = _load(resumed), _load(whole)
    # The resumed run keeps the placement of the run it continues.
    assert np.array_equal(got["meta/kfac_placement"], _load(part)["meta/kfac_placement"])
    _assert_same_checkpoint(_without_placement(got), _without_placement(want))


# Chimera: the replicas sum their factors after the curvature step (as the
# gradients), so the sums associate differently from single-process (the
# step-mode Chimera tests in test_pipeline_kfac.py say why): equal within
# rounding. Each layer's inverse is computed by one replica, in a bubble of a
# later window step, and handed to the other at the window's end.
NOISE_ONLY = "attention.self.key.bias"
CHIMERA = [("tiny", "refresh=2", ()), ("tiny", "refresh=1", ()), ("mini", "", ()),
           ("tiny", "refresh=2", ("--kfac-basis", "eigen"))]
CHIMERA = [(*case, "chimera") for case in CHIMERA] + [
    # DualPipe's two pipes are Chimera's replicas.
    ("tiny", "refresh=2", (), "dualpipe"), ("tiny", "refresh=1", (), "dualpipe")]


def _assert_within_rounding(got, want):
    assert sorted(got) == sorted(want)
    compared = 0
    for key in want:
        if not key.startswith("param/") or NOISE_ONLY in key:
            continue
        # An eigenvector's sign (and the basis of a repeated eigenvalue) is
        # the solver's choice, which rounding-level changes of the factor
        # can flip; the preconditioning, and so the weights, do not change.
        if key.endswith("_vectors"):
            continue
        expected = want[key].astype(np.float64)
        difference = np.linalg.norm((got[key] - expected).ravel())
        assert difference <= 1e-3 * max(np.linalg.norm(expected.ravel()), 1e-30), key
        compared += 1
    assert compared > 100


@pytest.mark.parametrize("model,refresh,extra,schedule", CHIMERA,
                         ids=[f"{m}-{r or 'auto'}" + ("-eigen" if e else "") +
                              ("" if s == "chimera" else f"-{s}") for m, r, e, s in CHIMERA])
def test_chimera_bubbles_equal_single_process_window_within_rounding(setup, tmp_path, model,
                                                                     refresh, extra, schedule):
    got_path, trace = tmp_path / "chimera.npz", tmp_path / "trace.json"
    proc = _pipeline(setup, 2, model,
                     f"stages=2 schedule={schedule} microbatches=4 kfac=bubbles {refresh}",
                     *WARMUP, "--steps", STEPS, "--log-every", "1", "--checkpoint", got_path,
                     "--trace", trace, *extra, timeout=400)
    plan = PLAN.search(proc.stdout)
    assert plan, proc.stdout
    window = int(plan.group(1))
    if refresh:
        assert window == int(refresh.split("=")[1])
    got = _load(got_path)
    layers = sum(1 for k in got if k.endswith((".kfac.A_inv", ".kfac.A_vectors")))
    # One replica inverts each layer: every layer placed once, not twice.
    placed = sum(int(n) for n in re.findall(r"step \d+: (\d+)", plan.group(3)))
    assert placed == layers, plan.group(0)
    placement = got["meta/kfac_placement"].reshape(-1, 4)
    inverse_rows = placement[placement[:, 2] >= 0]
    assert len(inverse_rows) == layers
    assert set(inverse_rows[:, 0]) == {0, 1}, "both replicas invert a share"
    # The factors are summed at the curvature step's end: an inverse runs in a
    # later window step, or in window step 0 after all of the rank's passes
    # (each rank runs N/2 forwards and backwards of each of its two stages).
    passes = 2 * 4
    assert ((inverse_rows[:, 2] >= 1) | (inverse_rows[:, 3] >= passes)).all(), inverse_rows
    # The replicas split the preconditioning: each step preconditions every
    # layer once, on one rank, and both ranks take a share.
    events = [e for e in json.loads(trace.read_text())["traceEvents"]
              if e["ph"] == "X" and e["cat"] == "precondition"]
    ranks_of = {}
    for e in events:
        ranks_of.setdefault((e["args"]["step"], e["args"]["layer"]), []).append(e["tid"] // 2)
    steps = {step for step, _ in ranks_of}
    assert len(steps) >= int(STEPS) - 1, sorted(ranks_of)
    assert all(len(ranks) == 1 for ranks in ranks_of.values()), ranks_of
    assert len(ranks_of) == len(steps) * layers
    assert {ranks[0] for ranks in ranks_of.values()} == {0, 1}
    want, want_losses = _single_window(setup, model, window, tmp_path / "single.npz", *extra)
    assert _losses(proc.stdout) == want_losses
    _assert_within_rounding(_without_placement(got), want)


@pytest.mark.parametrize("cut", [4, 5], ids=["inside-a-window", "at-a-window-start"])
def test_chimera_bubbles_resume_bitwise(setup, tmp_path, cut):
    """The pending inverses are recomputed by the replica that owns them and,
    at a window's start, handed over again."""
    spec = "stages=2 schedule=chimera microbatches=4 kfac=bubbles refresh=3"
    whole, part = tmp_path / "whole.npz", tmp_path / "part.npz"
    _pipeline(setup, 2, "tiny", spec, *WARMUP, "--steps", "10", "--checkpoint", whole,
              timeout=300)
    _pipeline(setup, 2, "tiny", spec, *WARMUP, "--steps", str(cut), "--checkpoint", part,
              timeout=300)
    resumed = tmp_path / "resumed.npz"
    _pipeline(setup, 2, "tiny", spec, *WARMUP, "--steps", "10", "--resume", part,
              "--checkpoint", resumed, timeout=300)
    _assert_same_checkpoint(_without_placement(_load(resumed)),
                            _without_placement(_load(whole)))


BAD = [
    (("stages=2 microbatches=4 kfac=bubbles",), (), "it needs --kfac"),
    (("stages=2 microbatches=4 kfac=bubbles refresh=-1",), WARMUP, "refresh must be >= 0"),
    (("stages=2 microbatches=4 refresh=3",), WARMUP, "refresh= applies to kfac=bubbles"),
    (("stages=2 microbatches=4 kfac=bubbles max-overhead=-1",), WARMUP,
     "max-overhead must be in [0, 10]"),
    (("stages=2 microbatches=4 kfac=bubbles max-refresh=0",), WARMUP,
     "max-refresh must be in [1, 512]"),
    (("stages=2 microbatches=4 kfac=bubbles",), ("--kfac", "--kfac-refresh-warmup", "0"),
     "needs --kfac-refresh-warmup >= 1"),
    (("stages=2 microbatches=4 kfac=sometimes",), WARMUP, "sometimes"),
    (("stages=2 microbatches=4 kfac=bubbles",), (*WARMUP, "--kfac-window", "2"),
     "--kfac-window is single-process"),
    (("stages=2 microbatches=4 kfac=bubbles",), (*WARMUP, "--kfac-damping-schedule", "step"),
     "with K-FAC in the bubbles (--kfac-window, kfac=bubbles) is not supported yet"),
]


@pytest.mark.parametrize("spec,args,message", BAD, ids=[m for _, _, m in BAD])
def test_bad_bubble_options_are_refused(setup, spec, args, message):
    proc = _pipeline(setup, 2, "tiny", spec[0], *args, "--steps", "1", timeout=120, check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr, proc.stdout + proc.stderr


@pytest.mark.parametrize("args,message", [
    (("--kfac-window", "3"), "needs --kfac"),
    (("--kfac", "--kfac-window", "-1"), "--kfac-window -1"),
    (("--kfac", "--kfac-window", "3", "--kfac-refresh-warmup", "0"), "--kfac-refresh-warmup"),
])
def test_bad_single_process_window_is_refused(setup, args, message):
    proc = _single(setup, "tiny", *args, "--steps", "1", timeout=120, check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_resume_with_another_window_is_refused(setup, tmp_path):
    path = tmp_path / "w.npz"
    _single(setup, "tiny", *WARMUP, "--kfac-window", "3", "--micro-batches", "4", "--steps", "3",
            "--checkpoint", path, timeout=120)
    proc = _single(setup, "tiny", *WARMUP, "--kfac-window", "2", "--micro-batches", "4",
                   "--steps", "4", "--resume", path, timeout=120, check=False)
    assert proc.returncode != 0
    assert "K-FAC windows of 3 step(s), this run has 2" in proc.stdout + proc.stderr
