"""`mpirun -np D pf-train --kfac --pipeline "stages=D schedule=S microbatches=N"`:
K-FAC through the pipeline (factor updates in the stage functions, inverses
and preconditioning in each stage's precondition function, the KL-clip over
all ranks) against single-process `pf-train --kfac --micro-batches N`.

- Parity: after 20 steps the gathered checkpoint (weights, AdamW moments,
  K-FAC factors and inverses) is **bitwise equal** to the single-process one
  and the printed losses are identical: BERT-tiny D = 2 and BERT-mini D = 2
  and 4 (oversubscribed on 2 cores: correctness only), gpipe, 1f1b, zb-h1, zb-h2,
  N = 4; also N = 1, without KL-clipping and with stale inverses.
- The K-FAC state is really there and changes the run (factors and
  inverses non-zero, the result differs from first-order training).
- zb-v and dualpipev (two stages per rank in a V, each factor on one rank):
  bitwise too.
- Chimera and DualPipe (two pipes): within rounding of single-process (the
  replicas' factors are summed in another association); the replicas split
  the layers' inverse refreshes and preconditioning (one owner per layer, its
  result broadcast), bit for bit the run where both replicas do every layer.
- The start-up lines report each rank's K-FAC state; the refreshes that
  needed more damping are summed over the ranks and named per rank.

Every subprocess has a timeout; both sides run with --num-threads 1.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from test_pipeline_training import (MPIRUN, SCHEDULES, _assert_same_checkpoint, _load,
                                    _losses, _pipeline, _single, setup)  # noqa: F401

pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")

KFAC_SUFFIXES = (".kfac.A", ".kfac.B", ".kfac.A_inv", ".kfac.B_inv")
EIGEN_SUFFIXES = (".kfac.A", ".kfac.B", ".kfac.A_vectors", ".kfac.A_values", ".kfac.B_vectors",
                  ".kfac.B_values")


@pytest.fixture(scope="module")
def kfac_reference(setup):
    """The single-process 20-step K-FAC run of (model, N, extra options)."""
    cache = {}

    def get(model, microbatches, extra=()):
        key = (model, microbatches, tuple(extra))
        if key not in cache:
            path = setup / f"kfac-reference-{len(cache)}.npz"
            proc = _single(setup, model, "--kfac", "--steps", "20", "--log-every", "1",
                           "--micro-batches", microbatches, "--checkpoint", path, *extra)
            assert "optimizer adamw + K-FAC" in proc.stdout, proc.stdout
            cache[key] = (_load(path), _losses(proc.stdout))
        return cache[key]

    return get


PARITY = [(model, ranks, schedule, 4, ())
          for model, ranks in [("tiny", 2), ("mini", 2)] for schedule in SCHEDULES] + [
    ("mini", 4, "1f1b", 4, ()),
    ("mini", 4, "zb-h1", 4, ()),
    ("tiny", 2, "1f1b", 1, ()),
    ("tiny", 2, "gpipe", 4, ("--kfac-kl-clip", "0")),
    ("tiny", 2, "zb-h1", 4, ("--kfac-refresh", "3", "--kfac-refresh-warmup", "2")),
    # Interleaved: 4 stages on 2 ranks, each factor still on one rank.
    ("mini", 2, "interleaved", 4, ()),
    # The V schedules: 4 stages on 2 ranks, each factor on one rank.
    ("mini", 2, "zb-v", 4, ()),
    ("mini", 2, "dualpipev", 4, ()),
    # The eigenbasis: eigenvectors and eigenvalues as the layers' state.
    ("tiny", 2, "1f1b", 4, ("--kfac-basis", "eigen")),
    # A damping schedule: every rank's refresh reads the step's kfac_damping.
    ("tiny", 2, "gpipe", 4, ("--kfac-damping-schedule", "warmup", "--kfac-damping-warmup", "10")),
    # An interval schedule: every rank's refresh reads kfac_refresh_due and
    # its factor updates kfac_curvature (refresh K and F grow 1, 2, 4).
    ("tiny", 2, "1f1b", 4, ("--kfac-interval-schedule", "step", "--kfac-refresh-warmup", "2",
                            "--kfac-interval-growth", "2", "--kfac-interval-every", "2",
                            "--kfac-interval-max", "4")),
]


@pytest.mark.parametrize(
    "model,ranks,schedule,microbatches,extra", PARITY,
    ids=[f"{m}-D{d}-{s}-N{n}" + (f"-{e[0][2:]}={e[1]}" if e else "") for m, d, s, n, e in PARITY])
def test_kfac_pipeline_equals_single_process_bitwise(setup, kfac_reference, tmp_path, model,
                                                     ranks, schedule, microbatches, extra):
    want, want_losses = kfac_reference(model, microbatches, extra)
    got_path = tmp_path / "pipeline.npz"
    proc = _pipeline(setup, ranks, model,
                     f"stages={ranks} schedule={schedule} microbatches={microbatches}",
                     "--kfac", "--steps", "20", "--log-every", "1", "--checkpoint", got_path,
                     *extra, timeout=240)
    assert "optimizer adamw + K-FAC" in proc.stdout, proc.stdout
    losses = _losses(proc.stdout)
    assert [int(step) for step, _, _ in losses] == list(range(1, 21)), proc.stdout
    assert losses == want_losses
    got = _load(got_path)
    eigen = "eigen" in extra
    for suffix in EIGEN_SUFFIXES if eigen else KFAC_SUFFIXES:
        assert any(k.endswith(suffix) for k in got), suffix
    if eigen:
        assert not any(k.endswith("_inv") for k in got)
        assert all(np.abs(v).max() > 0 for k, v in got.items() if k.endswith("_values"))
    _assert_same_checkpoint(got, want)


def test_kfac_state_is_used(setup, kfac_reference, reference_first_order):
    """The factors and inverses hold values, and K-FAC changes the weights
    (so the parity above compares runs that K-FAC shaped)."""
    kfac, _ = kfac_reference("tiny", 4)
    for key, value in kfac.items():
        if key.endswith(KFAC_SUFFIXES):
            assert np.abs(value).max() > 0, key
    plain = reference_first_order
    weights = [k for k in plain if k.startswith("param/") and ".encoder." in k
               and k.endswith(".weight") and "LayerNorm" not in k]
    assert weights and all(not np.array_equal(kfac[k], plain[k]) for k in weights)


@pytest.fixture(scope="module")
def reference_first_order(setup):
    path = setup / "first-order-reference.npz"
    _single(setup, "tiny", "--steps", "20", "--micro-batches", "4", "--checkpoint", path)
    return _load(path)


def test_state_lines_report_the_kfac_state(setup, kfac_reference):
    proc = _pipeline(setup, 2, "tiny", "stages=2 microbatches=4", "--kfac", "--steps", "1",
                     timeout=120)
    lines = re.findall(r"^rank (\d+): stage \d+ .*optimizer state (\d+) bytes, K-FAC state "
                       r"(\d+) bytes$", proc.stdout, re.M)
    assert sorted(int(rank) for rank, _, _ in lines) == [0, 1], proc.stdout
    kfac, _ = kfac_reference("tiny", 4)
    kfac_bytes = sum(v.nbytes for k, v in kfac.items() if ".kfac." in k)
    # Every K-FAC layer lives on one stage: the ranks' K-FAC state adds up.
    assert sum(int(b) for _, _, b in lines) == kfac_bytes
    assert all(int(b) > 0 for _, _, b in lines)


@pytest.mark.parametrize("schedule", ["1f1b", "chimera"])
def test_refresh_issues_are_summed_and_name_the_ranks(setup, schedule):
    """Damping 0 makes the Cholesky refreshes fail (kept inverses): the
    pipelined run prints the single-process count per step, split by rank
    (Chimera: each stage's refreshes counted once, though both replicas
    invert)."""
    args = ("--kfac", "--kfac-damping", "0", "--steps", "2")
    single = _single(setup, "tiny", "--micro-batches", "4", *args, timeout=120)
    pipelined = _pipeline(setup, 2, "tiny", f"stages=2 schedule={schedule} microbatches=4", *args,
                          timeout=120)
    pattern = r"^step (\d+): K-FAC: (\d+) inverse refresh\(es\) needed more damping"
    want = re.findall(pattern + r" or kept the previous inverse$", single.stdout, re.M)
    got = re.findall(pattern + r" or kept the previous inverse \((.*)\)$", pipelined.stdout,
                     re.M)
    assert want and [(s, n) for s, n, _ in got] == want, (single.stdout, pipelined.stdout)
    for _, total, ranks in got:
        per_rank = dict(re.findall(r"rank (\d+): (\d+)", ranks))
        assert sum(map(int, per_rank.values())) == int(total)
        assert set(per_rank) <= {"0", "1"}


# --- Chimera: two replicas of every stage, factors summed between them --------
#
# Each replica's passes add the curvature of its own micro-batches to its copy
# of a factor (the one without micro-batch 0 starts from zero); the step end
# all-reduces the two copies. Single-process adds the N micro-batches' terms
# to one factor in micro-batch order, so the sums associate differently: equal
# within rounding, not bit for bit (the other schedules' parity is bitwise).


def _relative_difference(got, want):
    """Frobenius norm of the difference over the reference's norm."""
    want = want.astype(np.float64)
    return np.linalg.norm((got - want).ravel()) / max(np.linalg.norm(want.ravel()), 1e-30)


def test_chimera_factors_of_one_step_equal_single_process(setup, tmp_path):
    """After one step the factors were formed from the same activations: only
    the association of the micro-batches' sum differs."""
    single_path, chimera_path = tmp_path / "single.npz", tmp_path / "chimera.npz"
    _single(setup, "tiny", "--kfac", "--steps", "1", "--micro-batches", "4", "--checkpoint",
            single_path)
    _pipeline(setup, 2, "tiny", "stages=2 schedule=chimera microbatches=4", "--kfac", "--steps",
              "1", "--checkpoint", chimera_path, timeout=120)
    want, got = _load(single_path), _load(chimera_path)
    factors = [k for k in want if k.endswith((".kfac.A", ".kfac.B"))]
    assert len(factors) == 24
    for key in factors:
        scale = np.abs(want[key]).max()
        assert scale > 0, key
        # Measured: at most 3.9e-7 of the factor's largest entry.
        assert np.abs(got[key].astype(np.float64) - want[key]).max() <= 1e-6 * scale, key


# Key biases get no true gradient (softmax ignores a shift shared by every key),
# so their AdamW steps follow rounding noise: the same run with any other
# association of a sum moves them differently. Left out of the comparison.
NOISE_ONLY = "attention.self.key.bias"

# DualPipe: Chimera's two pipes (replicas), its backwards split.
CHIMERA = [("tiny", 2, "chimera"), ("mini", 4, "chimera"), ("tiny", 2, "dualpipe")]


@pytest.mark.parametrize("model,ranks,schedule", CHIMERA,
                         ids=[f"{m}-D{d}" + ("" if s == "chimera" else f"-{s}")
                              for m, d, s in CHIMERA])
def test_chimera_kfac_equals_single_process_within_rounding(setup, kfac_reference, tmp_path,
                                                            model, ranks, schedule):
    """20 steps: the same printed losses; every weight, moment, factor and
    inverse within 1e-3 relative (measured: 6e-6 tiny D = 2, 7e-5 mini D = 4,
    oversubscribed). A replica's curvature missing from a factor moves the
    weights by percents."""
    want, want_losses = kfac_reference(model, 4)
    got_path = tmp_path / "chimera.npz"
    proc = _pipeline(setup, ranks, model, f"stages={ranks} schedule={schedule} microbatches=4",
                     "--kfac", "--steps", "20", "--log-every", "1", "--checkpoint", got_path,
                     timeout=300)
    assert f"{schedule} schedule" in proc.stdout and "adamw + K-FAC" in proc.stdout, proc.stdout
    assert _losses(proc.stdout) == want_losses
    got = _load(got_path)
    assert sorted(got) == sorted(want)
    compared = 0
    for key in want:
        if not key.startswith("param/") or NOISE_ONLY in key:
            continue
        assert got[key].shape == want[key].shape, key
        assert _relative_difference(got[key], want[key]) < 1e-3, key
        compared += 1
    assert compared > 100


@pytest.mark.parametrize("schedule", ["chimera", "dualpipe"])
def test_chimera_replicas_split_the_preconditioning(setup, tmp_path, schedule):
    """Each layer's inverse refresh and preconditioning runs on one replica
    per step (the measured trace), both replicas take a share, and the run
    is bit for bit the one where both replicas precondition every layer
    (split-precondition=false): the owner's result is broadcast unchanged.
    DualPipe's two pipes split them alike."""
    spec = f"stages=2 schedule={schedule} microbatches=4"
    args = ("--kfac", "--steps", "4", "--log-every", "1")
    split, both, trace = tmp_path / "split.npz", tmp_path / "both.npz", tmp_path / "trace.json"
    proc = _pipeline(setup, 2, "tiny", spec, *args, "--checkpoint", split, "--trace", trace,
                     timeout=180)
    reference = _pipeline(setup, 2, "tiny", spec + " split-precondition=false", *args,
                          "--checkpoint", both, timeout=180)
    assert _losses(proc.stdout) == _losses(reference.stdout)
    _assert_same_checkpoint(_load(split), _load(both))
    layers = sum(1 for k in _load(split) if k.endswith(".kfac.A_inv"))
    ranks_of = {}
    for e in json.loads(trace.read_text())["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == "precondition":
            ranks_of.setdefault((e["args"]["step"], e["args"]["layer"]), []).append(e["tid"] // 2)
    steps = {step for step, _ in ranks_of}
    assert len(steps) >= 3 and len(ranks_of) == len(steps) * layers, sorted(ranks_of)
    assert all(len(ranks) == 1 for ranks in ranks_of.values()), ranks_of
    assert {ranks[0] for ranks in ranks_of.values()} == {0, 1}


def test_chimera_kfac_resumes_bit_for_bit(setup, tmp_path):
    """10 steps, a checkpoint, 10 more: the uninterrupted run's bits (the
    replica that starts its factors from zero does so by the step number)."""
    spec = "stages=2 schedule=chimera microbatches=4"
    args = ("--kfac", "--log-every", "1")
    straight, first = tmp_path / "straight.npz", tmp_path / "first.npz"
    proc = _pipeline(setup, 2, "tiny", spec, *args, "--steps", "20", "--checkpoint", straight,
                     timeout=180)
    _pipeline(setup, 2, "tiny", spec, *args, "--steps", "10", "--checkpoint", first, timeout=180)
    resumed = _pipeline(setup, 2, "tiny", spec, *args, "--steps", "20", "--resume", first,
                        "--checkpoint", first, timeout=180)
    assert _losses(resumed.stdout) == _losses(proc.stdout)[10:]
    _assert_same_checkpoint(_load(first), _load(straight))


def test_a_non_finite_factor_is_named_by_its_rank(setup, tmp_path):
    """A NaN in one layer's factor (an edited checkpoint): the rank holding
    the layer names it, with the step, once; the run goes on."""
    _single(setup, "tiny", "--kfac", "--steps", "2", "--checkpoint", tmp_path / "c.npz")
    state = _load(tmp_path / "c.npz")
    layer = "bert.encoder.layer.1.output.dense.weight"  # the last block: stage 1
    state[f"param/{layer}.kfac.A"][0, 0] = np.inf
    np.savez(tmp_path / "bad.npz", **state)
    proc = _pipeline(setup, 2, "tiny", "stages=2 schedule=1f1b microbatches=4", "--kfac",
                     "--steps", "4", "--log-every", "1", "--resume", tmp_path / "bad.npz",
                     timeout=240)
    named = [line for line in proc.stdout.splitlines() if "holds NaN or Inf" in line]
    assert named == [f"rank 1: step 3: K-FAC: factor A of layer '{layer}' holds NaN or Inf; "
                     "the layer keeps its last good inverse from now on (lower --lr, or resume "
                     "from an earlier checkpoint)"], proc.stdout
    assert [step for step, _, _ in _losses(proc.stdout)] == ["3", "4"]
