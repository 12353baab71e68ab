"""`mpirun -np D pf-train --pipeline "stages=D schedule=S microbatches=N"`:
pipelined training (one stage per rank) against single-process
`pf-train --micro-batches N` on the same batches.

- Parity: after 20 steps the checkpoint (gathered by rank 0, in the
  single-process format) is **bitwise equal** to the single-process one, and
  the printed per-step losses are identical, for BERT-tiny (2 blocks) with
  D = 2 and BERT-mini (4 blocks) with D = 2 and 4 (oversubscribed on 2 cores:
  correctness only), for gpipe, 1f1b, zb-h1 and zb-h2; also N = 1, SGD with momentum,
  LAMB and no clipping.
- Checkpoints: a pipelined run resumed from a checkpoint continues bit for
  bit, and single-process and pipelined runs resume each other's.
- Stopping: SIGTERM/SIGINT sent to mpirun or to one rank stops every rank
  after the same step, with the checkpoint of that step; `kill -9` of a rank
  ends the job (non-zero) instead of hanging.
- Start-up: ranks started differently or resumed from different checkpoints,
  the wrong number of ranks, bad
  --pipeline text, options that do not go with it and damaged checkpoints
  are refused with a message; each rank's state line adds up to the model.
- --trace/--svg: the measured timeline of every rank.

Every subprocess has a timeout (and is killed with its ranks on expiry), so a
hang fails the test instead of blocking. Both sides run with --num-threads 1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.corpus import make_corpus
from pipefisher.tools import tool

from pipeline_support import assert_same_checkpoint as _assert_same_checkpoint
from pipeline_support import load_npz as _load
from pipeline_support import losses as _losses

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")

SCHEDULES = ["gpipe", "1f1b", "zb-h1", "zb-h2"]
OPTIMIZER_STATE = (".exp_avg", ".exp_avg_sq", ".momentum")
WORD_EMBEDDING = "bert.embeddings.word_embeddings.weight"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline_training")
    corpus = make_corpus(sequences=600, seq_len=16, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, seed=2), tmp / "tiny.onnx")
    save_model(make_bert_model("mini", vocab_size=vocab, seed=2), tmp / "mini.onnx")
    # Six blocks: the V schedules on three ranks (six stages).
    save_model(make_bert_model("tiny", vocab_size=vocab, seed=2, num_hidden_layers=6),
               tmp / "tiny6.onnx")
    return tmp


# --- running pf-train ---------------------------------------------------------

def _train_cmd(setup, model, *args):
    return [tool("pf-train"), setup / f"{model}.onnx", "--corpus", setup / "corpus.npz",
            "--batch", "8", "--num-threads", "1", *args]


def _mpirun_cmd(setup, ranks, model, spec, *args):
    return [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", ranks,
            *_train_cmd(setup, model, "--pipeline", spec, *args)]


def _start(cmd, **kwargs):
    # Its own session, so that on a timeout mpirun and its ranks can be ended together.
    return subprocess.Popen([str(a) for a in cmd], text=True, start_new_session=True, **kwargs)


def _end(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _run(cmd, timeout=120, check=True):
    proc = _start(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end(proc)
        pytest.fail(f"timed out after {timeout} s (a hang?): {' '.join(map(str, cmd))}")
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n"
                           f"{out}\n{err}")
    return result


def _single(setup, model, *args, **kwargs):
    return _run(_train_cmd(setup, model, *args), **kwargs)


def _pipeline(setup, ranks, model, spec, *args, **kwargs):
    return _run(_mpirun_cmd(setup, ranks, model, spec, *args), **kwargs)


def _parameters(checkpoint):
    """The model's parameters in a checkpoint (not the optimizer state)."""
    return {k[len("param/"):]: v for k, v in checkpoint.items()
            if k.startswith("param/") and not k.endswith(OPTIMIZER_STATE)}


# --- 1. parity with single-process training -----------------------------------

@pytest.fixture(scope="module")
def reference(setup):
    """The single-process 20-step run of (model, N, extra options): its
    checkpoint and progress lines, computed once per combination."""
    cache = {}

    def get(model, microbatches, extra=()):
        key = (model, microbatches, tuple(extra))
        if key not in cache:
            path = setup / f"reference-{len(cache)}.npz"
            proc = _single(setup, model, "--steps", "20", "--log-every", "1",
                           "--micro-batches", microbatches, "--checkpoint", path, *extra)
            cache[key] = (_load(path), _losses(proc.stdout))
        return cache[key]

    return get


PARITY = [(model, ranks, schedule, 4, ())
          for model, ranks in [("tiny", 2), ("mini", 2), ("mini", 4)]
          for schedule in SCHEDULES] + [
    ("mini", 2, "1f1b", 1, ()),
    ("mini", 2, "gpipe", 4, ("--optimizer", "sgd", "--lr", "0.05")),
    ("tiny", 2, "zb-h1", 4, ("--optimizer", "lamb", "--lr", "1e-2")),
    ("tiny", 2, "1f1b", 4, ("--clip-norm", "0")),
    # Interleaved 1F1B: 4 stages (chunks=2) on 2 ranks, rank r holding r and r + 2.
    ("mini", 2, "interleaved", 4, ()),
    # Chimera: two replicas, rank r holding stage r (down) and D-1-r (up).
    ("mini", 2, "chimera", 4, ()),
    ("mini", 4, "chimera", 4, ()),
    # The V schedules: 4 stages on 2 ranks, rank 0 holding stages 0 and 3 (the
    # tied embedding's two pieces summed there), rank 1 stages 1 and 2.
    ("mini", 2, "zb-v", 4, ()),
    ("mini", 2, "zb-v", 1, ()),  # one micro-batch: the two pieces only added
    ("mini", 2, "dualpipev", 4, ()),
    # DualPipe: two pipes as Chimera's, split backwards (N >= 2D).
    ("tiny", 2, "dualpipe", 4, ()),
    ("mini", 4, "dualpipe", 8, ()),
    # --predictions P: the decoder at the masked positions only (a gather of
    # the head transform's rows on the decoder's stage, the mlm_positions input).
    ("mini", 2, "1f1b", 4, ("--predictions", "4")),
    ("tiny", 2, "zb-h1", 4, ("--predictions", "4")),
    ("mini", 4, "gpipe", 4, ("--predictions", "4")),
]


TWO_PIPES = ("chimera", "dualpipe")


@pytest.mark.parametrize(
    "model,ranks,schedule,microbatches,extra", PARITY,
    ids=[f"{m}-D{d}-{s}-N{n}" + (f"-{e[0][2:]}={e[1]}" if e else "") for m, d, s, n, e in PARITY])
def test_pipeline_equals_single_process_bitwise(setup, reference, tmp_path, model, ranks,
                                                schedule, microbatches, extra):
    want, want_losses = reference(model, microbatches, extra)
    got_path, step_file = tmp_path / "pipeline.npz", tmp_path / "step.mlir"
    # The tiny model's programs are small enough to check for the clipping op.
    emit = ("--emit-step", step_file) if model == "tiny" else ()
    # Two pipes sum their replicas' gradients at the step end: bit for bit
    # only in micro-batch order (by default the library's all-reduce adds
    # each replica's weighted sum: test_replica_gradients_by_the_library...).
    # One tied embedding on two ranks (1f1b, N = 1) sums a + b either way.
    determinism = " deterministic=true" if schedule in TWO_PIPES else ""
    proc = _pipeline(setup, ranks, model,
                     f"stages={ranks} schedule={schedule} microbatches={microbatches}"
                     + determinism,
                     "--steps", "20", "--log-every", "1", "--checkpoint", got_path, *emit,
                     *extra, timeout=180)
    assert (f"pipeline of {ranks} ranks, {schedule} schedule, {microbatches} micro-batches"
            in proc.stdout), proc.stdout
    assert "checkpoint after step 20" in proc.stdout
    losses = _losses(proc.stdout)
    assert [int(step) for step, _, _ in losses] == list(range(1, 21)), proc.stdout
    assert losses == want_losses
    got = _load(got_path)
    assert int(got["meta/step"]) == 20
    optimizer = extra[1] if "--optimizer" in extra else "adamw"
    state = ".momentum" if optimizer == "sgd" else ".exp_avg"
    assert any(k.endswith(state) for k in got), sorted(got)
    _assert_same_checkpoint(got, want)
    if emit:
        clipped = "--clip-norm" not in extra
        assert ("pf.clip_gradients" in step_file.read_text()) == clipped
        if determinism:
            assert "order(library)" not in step_file.read_text()
    # The comparison can tell these runs apart: N and clipping change the result.
    if microbatches == 1 or "--clip-norm" in extra:
        other, _ = reference(model, 4)
        assert any(not np.array_equal(want[k], other[k]) for k in want if k.startswith("param/"))


# The stage units (pf-split-stages grain=, default half): whole blocks as
# before (the embeddings and the head folded in), whole blocks with the ends on
# their own, and halves where the cost model cuts inside a block: BERT-mini on
# 3 ranks (block 1's halves on stages 0 and 1), BERT-tiny interleaved (4
# stages on 2 ranks: one half-block each, the head with the last).
UNITS = [("mini", 2, "1f1b", "block", False), ("mini", 2, "zb-h1", "ends", False),
         ("mini", 3, "1f1b", "half", True), ("tiny", 2, "interleaved", "half", True)]


@pytest.mark.parametrize("model,ranks,schedule,grain,inside", UNITS,
                         ids=[f"{m}-D{d}-{s}-{g}" for m, d, s, g, _ in UNITS])
def test_stage_units_equal_single_process_bitwise(setup, reference, tmp_path, model, ranks,
                                                  schedule, grain, inside):
    want, want_losses = reference(model, 4)
    got_path, step_file = tmp_path / "pipeline.npz", tmp_path / "step.mlir"
    proc = _pipeline(setup, ranks, model,
                     f"stages={ranks} schedule={schedule} microbatches=4 grain={grain}",
                     "--steps", "20", "--log-every", "1", "--checkpoint", got_path,
                     "--emit-step", step_file, timeout=180)
    assert _losses(proc.stdout) == want_losses
    _assert_same_checkpoint(_load(got_path), want)
    heads = re.findall(r"func\.func @stage(\d+)_forward\((.*)", step_file.read_text())
    units = {int(s): re.search(r"pf\.units = \[([^\]]*)\]", h) for s, h in heads}
    if grain == "block":
        assert not any(units.values())
        return
    stage_of = {u: s for s, m in units.items() for u in re.findall(r'"([^"]+)"', m.group(1))}
    assert stage_of["embeddings"] == 0 and max(stage_of.values()) == max(units)
    # A stage boundary inside an encoder block: its halves on two stages.
    split_blocks = [b for b in range(4) if f"block{b}.attn" in stage_of
                    and stage_of[f"block{b}.attn"] != stage_of[f"block{b}.ffn"]]
    assert bool(split_blocks) == inside, stage_of


def _relative_difference(got, want):
    """Frobenius norm of the difference over the reference's norm."""
    want = want.astype(np.float64)
    return np.linalg.norm((got - want).ravel()) / max(np.linalg.norm(want.ravel()), 1e-30)


# Key biases get no true gradient (softmax ignores a shift shared by every
# key): their AdamW steps follow rounding noise, which any other association
# of a sum moves elsewhere. Left out of the tolerance comparison.
NOISE_ONLY = "attention.self.key.bias"

LIBRARY_SUM = [("mini", 2, "chimera", 4), ("tiny", 2, "dualpipe", 4), ("mini", 4, "chimera", 4)]


@pytest.mark.parametrize("model,ranks,schedule,microbatches", LIBRARY_SUM,
                         ids=[f"{m}-D{d}-{s}-N{n}" for m, d, s, n in LIBRARY_SUM])
def test_replica_gradients_by_the_library_equal_single_process_within_rounding(
        setup, reference, tmp_path, model, ranks, schedule, microbatches):
    """The default (deterministic=false): each replica weights its own
    micro-batches and MPI's all-reduce adds the two partial sums, so only the
    association of the step's weighted sum differs from one process. 20
    steps: every printed loss within 1e-3 relative (they are printed to 4
    decimals), every weight and AdamW moment within 1e-3 relative (Frobenius;
    the key biases, pure rounding noise, left out), and the run differs from
    the deterministic one somewhere, so the comparison could fail."""
    want, want_losses = reference(model, microbatches)
    got_path, step_file = tmp_path / "pipeline.npz", tmp_path / "step.mlir"
    proc = _pipeline(setup, ranks, model,
                     f"stages={ranks} schedule={schedule} microbatches={microbatches}",
                     "--steps", "20", "--log-every", "1", "--checkpoint", got_path,
                     "--emit-step", step_file, timeout=240)
    step = step_file.read_text()
    assert "order(library)" in step and "pf.all_reduce" in step
    losses = _losses(proc.stdout)
    assert [int(s) for s, _, _ in losses] == list(range(1, 21)), proc.stdout
    for (_, got_loss, got_lr), (_, want_loss, want_lr) in zip(losses, want_losses):
        assert got_lr == want_lr
        assert abs(float(got_loss) - float(want_loss)) <= 1e-3 * abs(float(want_loss))
    got = _load(got_path)
    assert sorted(got) == sorted(want)
    compared, differs = 0, False
    for key in want:
        if not key.startswith("param/") or NOISE_ONLY in key:
            continue
        assert _relative_difference(got[key], want[key]) < 1e-3, key
        differs |= not np.array_equal(got[key], want[key])
        compared += 1
    assert compared > 50 and differs


@pytest.mark.parametrize("schedule,microbatches", [("zb-v", 4), ("dualpipev", 8)])
def test_v_schedule_on_three_ranks_equals_single_process_bitwise(setup, tmp_path, schedule,
                                                                  microbatches):
    """The V schedules on 3 ranks (6 stages, BERT-tiny with 6 blocks;
    oversubscribed: correctness only; dualpipev needs N >= 2D): ranks with
    transfers on both sides, the V's turn on rank 2, the tied embedding's
    pieces summed on rank 0. 10 steps, bitwise."""
    want_path, got_path = tmp_path / "single.npz", tmp_path / "pipeline.npz"
    args = ("--steps", "10", "--log-every", "1")
    single = _single(setup, "tiny6", *args, "--micro-batches", microbatches, "--checkpoint",
                     want_path, timeout=180)
    proc = _pipeline(setup, 3, "tiny6",
                     f"stages=3 schedule={schedule} microbatches={microbatches}", *args,
                     "--checkpoint", got_path, timeout=240)
    assert "rank 2: stage 2 3 " in proc.stdout, proc.stdout
    assert _losses(proc.stdout) == _losses(single.stdout)
    _assert_same_checkpoint(_load(got_path), _load(want_path))


# --- 2. resuming ---------------------------------------------------------------

# The constant schedule keeps the learning rate of a step independent of
# --steps, so a 10-step run is the first half of the 20-step one.
RESUME_ARGS = ("--schedule", "constant", "--lr", "2e-3", "--warmup", "3", "--log-every", "1")
RESUME_SPEC = "schedule=1f1b microbatches=4"


def _single_resumable(setup, steps, *args):
    return _single(setup, "tiny", "--steps", steps, "--micro-batches", "4", *RESUME_ARGS, *args)


def _pipeline_resumable(setup, steps, *args):
    return _pipeline(setup, 2, "tiny", RESUME_SPEC, "--steps", steps, *RESUME_ARGS, *args)


@pytest.fixture(scope="module")
def single_runs(setup):
    """Single-process checkpoints after 10 and after 20 steps."""
    ten, twenty = setup / "single-10.npz", setup / "single-20.npz"
    _single_resumable(setup, 10, "--checkpoint", ten)
    proc = _single_resumable(setup, 20, "--checkpoint", twenty)
    return ten, twenty, _losses(proc.stdout)


def test_blocking_transfers_give_the_same_run(setup, reference, tmp_path):
    """overlap=false (blocking send/recv at their ops) against the default
    non-blocking transfers: the same programs, so the same bits."""
    want, want_losses = reference("mini", 4, ())
    got_path = tmp_path / "blocking.npz"
    proc = _pipeline(setup, 2, "mini", "stages=2 schedule=1f1b microbatches=4 overlap=false",
                     "--steps", "20", "--log-every", "1", "--checkpoint", got_path, timeout=180)
    assert _losses(proc.stdout) == want_losses
    _assert_same_checkpoint(_load(got_path), want)


def test_pipeline_resume_is_bitwise(setup, tmp_path):
    straight, first, resumed = (tmp_path / f"{n}.npz" for n in ("straight", "first", "resumed"))
    whole = _pipeline_resumable(setup, 20, "--checkpoint", straight)
    _pipeline_resumable(setup, 10, "--checkpoint", first)
    proc = _pipeline_resumable(setup, 20, "--resume", first, "--checkpoint", resumed)
    assert f"resumed from {first} after step 10" in proc.stdout, proc.stdout
    # The resumed run prints steps 11..20, the same as the straight run's.
    assert _losses(proc.stdout) == _losses(whole.stdout)[10:]
    a, b, c = _load(straight), _load(resumed), _load(first)
    assert int(c["meta/step"]) == 10 and int(b["meta/step"]) == 20
    _assert_same_checkpoint(b, a)
    assert any(not np.array_equal(a[k], c[k]) for k in a if k.startswith("param/"))


def test_single_process_and_pipeline_resume_each_other(setup, single_runs, tmp_path):
    ten, twenty, losses = single_runs
    # Single-process checkpoint, continued pipelined ...
    resumed = tmp_path / "pipeline-from-single.npz"
    proc = _pipeline_resumable(setup, 20, "--resume", ten, "--checkpoint", resumed)
    assert _losses(proc.stdout) == losses[10:]
    _assert_same_checkpoint(_load(resumed), _load(twenty))
    # ... and a pipelined checkpoint, continued in one process.
    first, back = tmp_path / "pipeline-10.npz", tmp_path / "single-from-pipeline.npz"
    _pipeline_resumable(setup, 10, "--checkpoint", first)
    _assert_same_checkpoint(_load(first), _load(ten))
    proc = _single_resumable(setup, 20, "--resume", first, "--checkpoint", back)
    assert _losses(proc.stdout) == losses[10:]
    _assert_same_checkpoint(_load(back), _load(twenty))


# --- 3. and 4. signals ---------------------------------------------------------

STOP_SPEC = "schedule=1f1b microbatches=2"
STOP_ARGS = ("--schedule", "constant", "--log-every", "1")


def _start_long_run(setup, tmp_path, checkpoint, ranks=2):
    """A pipelined run of (practically) unbounded length, its output going to
    files so that it can be read while it runs."""
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    cmd = _mpirun_cmd(setup, ranks, "tiny", STOP_SPEC, "--steps", "1000000", "--checkpoint",
                      checkpoint, *STOP_ARGS)
    with open(out, "w") as o, open(err, "w") as e:
        proc = _start(cmd, stdout=o, stderr=e)
    return proc, out, err


def _wait_for_step(proc, out, step, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        steps = [int(s) for s, _, _ in _losses(out.read_text())]
        if steps and max(steps) >= step:
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended ({proc.returncode}) before step {step}:\n"
                        f"{out.read_text()}")
        time.sleep(0.05)
    _end(proc)
    pytest.fail(f"no step {step} within {timeout} s:\n{out.read_text()}")


def _rank_pids(mpirun_pid, ranks, timeout=30):
    """{rank: pid} of mpirun's pf-train children (Open MPI's environment
    names each one's rank)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if ppid != mpirun_pid:
                    continue
                environ = (entry / "environ").read_bytes().split(b"\0")
            except (OSError, ValueError, IndexError):
                continue
            for var in environ:
                if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                    found[int(var.split(b"=", 1)[1])] = int(entry.name)
        if len(found) == ranks:
            return found
        time.sleep(0.1)
    pytest.fail(f"mpirun {mpirun_pid}: found rank processes {found}, expected {ranks}")


def _finish(proc, out, err, timeout):
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end(proc)
        pytest.fail(f"mpirun did not end within {timeout} s:\n{out.read_text()}"
                    f"\n{err.read_text()}")
    return out.read_text(), err.read_text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("target,sig,names", [
    ("mpirun", signal.SIGTERM, ("SIGTERM",)),
    # Open MPI forwards a SIGINT to the ranks as SIGTERM.
    ("mpirun", signal.SIGINT, ("SIGINT", "SIGTERM")),
    (1, signal.SIGTERM, ("SIGTERM",)),
    (0, signal.SIGINT, ("SIGINT",)),
], ids=["mpirun-SIGTERM", "mpirun-SIGINT", "rank1-SIGTERM", "rank0-SIGINT"])
def test_signal_stops_every_rank_after_the_same_step(setup, tmp_path, target, sig, names):
    checkpoint = tmp_path / "stopped.npz"
    proc, out, err = _start_long_run(setup, tmp_path, checkpoint)
    try:
        pids = _rank_pids(proc.pid, 2)
        _wait_for_step(proc, out, 3)
        os.kill(proc.pid if target == "mpirun" else pids[target], sig)
        stdout, stderr = _finish(proc, out, err, timeout=60)
    finally:
        if proc.poll() is None:
            _end(proc)
    assert proc.returncode != 0, stdout
    stopped = re.search(r"stopped by (SIGTERM|SIGINT) on a rank after step (\d+)", stdout)
    assert stopped, stdout + stderr
    assert stopped.group(1) in names, stopped.group(0)
    step = int(stopped.group(2))
    assert f"checkpoint after step {step}: {checkpoint}" in stdout
    assert max(int(s) for s, _, _ in _losses(stdout)) == step
    data = _load(checkpoint)
    assert int(data["meta/step"]) == step >= 3
    # Every rank stopped after that step: the gathered state is that of a
    # single-process run of exactly `step` steps (bitwise, as in the parity
    # tests), the last rank's parameters included.
    reference = tmp_path / "reference.npz"
    _single(setup, "tiny", "--steps", step, "--micro-batches", "2", "--checkpoint", reference,
            *STOP_ARGS)
    want = _load(reference)
    _assert_same_checkpoint(data, want)


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_rank_ends_the_job(setup, tmp_path):
    proc, out, err = _start_long_run(setup, tmp_path, tmp_path / "never.npz")
    try:
        pids = _rank_pids(proc.pid, 2)
        _wait_for_step(proc, out, 3)
        os.kill(pids[1], signal.SIGKILL)
        stdout, stderr = _finish(proc, out, err, timeout=20)
    finally:
        if proc.poll() is None:
            _end(proc)
    assert proc.returncode != 0
    # "mpirun noticed that process rank 1 with PID 0 on node vm exited on
    # signal 9 (Killed)."; Open MPI's wording varies between versions.
    assert re.search(r"rank 1\b.*(signal 9|Killed)", stdout + stderr), stdout + stderr
    assert "checkpoint after step" not in stdout
    # The surviving rank is ended with the job, not left waiting for rank 1.
    deadline = time.monotonic() + 10
    while _alive(pids[0]) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pids[0]):
        os.kill(pids[0], signal.SIGKILL)
        pytest.fail("rank 0 outlived the job")


# --- 5. start-up checks ----------------------------------------------------------

def test_ranks_started_differently_are_refused(setup):
    def rank(lr):
        return ["-np", "1", *_train_cmd(setup, "tiny", "--steps", "2", "--lr", lr,
                                          "--pipeline", "microbatches=2")]

    proc = _run([MPIRUN, "--oversubscribe", "--allow-run-as-root", *rank("1e-3"), ":",
                 *rank("2e-3")], timeout=60, check=False)
    assert proc.returncode != 0
    assert "rank(s) 1 were started with another model, corpus, command line or pf-train build " \
           "than rank 0 (start-up hashes differ)" in proc.stderr, proc.stderr
    assert _losses(proc.stdout) == []


def test_ranks_resumed_from_different_checkpoints_are_refused(setup, tmp_path):
    """The same command on every rank, but `--resume` names a file whose
    copies differ (each rank in its own directory, as on two hosts with a
    stale copy on one): refused at start-up naming the rank, before any
    step (without the check the ranks resume at different steps and hang)."""
    first, later = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    later.mkdir()
    _pipeline_resumable(setup, 2, "--checkpoint", first / "ckpt.npz")
    _pipeline_resumable(setup, 4, "--checkpoint", later / "ckpt.npz")

    def rank(directory):
        return ["-np", "1", "--wdir", directory,
                *_train_cmd(setup, "tiny", "--pipeline", RESUME_SPEC, "--steps", "6",
                            *RESUME_ARGS, "--resume", "ckpt.npz")]

    proc = _run([MPIRUN, "--oversubscribe", "--allow-run-as-root", *rank(first), ":",
                 *rank(later)], timeout=60, check=False)
    assert proc.returncode != 0
    assert "rank(s) 1 resumed from another checkpoint than rank 0 (the digests of ckpt.npz " \
           "differ): give every rank the same checkpoint" in proc.stderr, proc.stderr
    assert _losses(proc.stdout) == []
    # The same copies on both ranks: resumed as one.
    proc = _run([MPIRUN, "--oversubscribe", "--allow-run-as-root", *rank(later), ":",
                 *rank(later)], timeout=120)
    assert "resumed from ckpt.npz after step 4" in proc.stdout, proc.stdout


def test_wrong_number_of_ranks_is_refused(setup):
    proc = _pipeline(setup, 2, "tiny", "stages=3 microbatches=2", "--steps", "2", timeout=60,
                     check=False)
    assert proc.returncode != 0
    assert ("--pipeline has stages=3 but the job has 2 rank(s): start it with mpirun -np 3"
            in proc.stderr), proc.stderr


@pytest.mark.parametrize("spec,args,message", [
    ("schedule=foo microbatches=2", (),
     "schedule must be gpipe, 1f1b, interleaved, chimera, zb-h1, zb-h2, zb-v, dualpipe or "
     "dualpipev, got 'foo'"),
    ("microbatches=3", (), "--pipeline: microbatches must be >= 1 and divide --batch (8), got 3"),
    ("microbatches=0", (), "--pipeline: microbatches must be >= 1 and divide --batch (8), got 0"),
    ("bogus=1", (), "no such option 'bogus'"),
    ("stages=-1", (), "--pipeline: stages must be >= 0"),
    ("schedule=interleaved chunks=1 microbatches=4", (),
     "--pipeline: interleaved needs chunks >= 2, got 1"),
    ("microbatches=4", ("--micro-batches", "2"),
     "--micro-batches 2 but --pipeline has microbatches=4"),
    ("microbatches=2", ("--eval-every", "5", "--eval-sequences", "4"),
     "--eval-sequences 4 must hold at least one batch (8)"),
    # zb-v cuts 2D stages: BERT-tiny's 2 blocks do not make 4 (grain=block) ...
    ("schedule=zb-v microbatches=4 grain=block", (),
     "pf-split-stages: cannot cut 2 encoder blocks into 4 stages (more stages than blocks)"),
    # ... and interleaved with 4 chunks cuts 8: more than its 7 units of grain=half
    # (the embeddings, two halves of each block, the head's transform and decoder).
    ("schedule=interleaved chunks=4 microbatches=4", (),
     "pf-split-stages: cannot cut 7 units of grain=half into 8 stages (more stages than "
     "units)"),
    ("grain=linear microbatches=2", (), "grain must be block, ends or half, got 'linear'"),
    ("schedule=dualpipe microbatches=2", (),
     "pf-build-rank-programs: dualpipe needs at least 2 x 2 = 4 micro-batches (got 2)"),
    # Issue 39, class 7: nothing silently accepted. A key given twice (the
    # parser kept the last); a count beyond the limits before its narrowing
    # to int (2^32 + 2 chunks ran as 2); an option the schedule ignores.
    ("microbatches=2 microbatches=4", (), "'microbatches' is given twice"),
    ("stages=2 =4 microbatches=4", (), "an entry names no option"),
    ("schedule=interleaved chunks=4294967298 microbatches=4", (),
     "--pipeline: chunks 4294967298 exceeds the limit of 1024 (kMaxStages)"),
    ("schedule=1f1b chunks=3 microbatches=4", (),
     "--pipeline: chunks= applies to schedule=interleaved, not 1f1b"),
    ("schedule=1f1b microbatches=4 split-precondition=false", (),
     "--pipeline: split-precondition= applies to schedule=chimera and dualpipe, not 1f1b"),
    ("schedule=chimera microbatches=4 tied-per-microbatch=false", (),
     "--pipeline: tied-per-microbatch= does not apply to chimera"),
], ids=["schedule", "indivisible", "zero", "unknown-key", "negative-stages", "chunks",
        "micro-batches", "eval-sequences", "v-stages", "interleaved-units", "grain",
        "dualpipe-microbatches", "twice", "no-key", "chunks-limit", "chunks-not-interleaved",
        "split-precondition-not-chimera", "tied-per-microbatch-chimera"])
def test_bad_pipeline_options_are_refused(setup, spec, args, message):
    proc = _pipeline(setup, 2, "tiny", spec, "--steps", "2", *args, timeout=60, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr
    assert _losses(proc.stdout) == []


def test_mpi_ranks_without_the_pipeline_are_refused(setup, tmp_path):
    """Two ranks started without --pipeline would each train the whole model
    and write one checkpoint: refused before any work. `--pipeline ""` is
    the pipeline with its defaults (stages = the job's ranks)."""
    checkpoint = tmp_path / "c.npz"
    cmd = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", 2,
           *_train_cmd(setup, "tiny", "--steps", "1", "--checkpoint", checkpoint)]
    proc = _run(cmd, timeout=60, check=False)
    assert proc.returncode != 0
    assert "started as one of 2 MPI ranks without --pipeline" in proc.stderr, proc.stderr
    assert not checkpoint.exists()
    proc = _pipeline(setup, 2, "tiny", "", "--steps", "1", "--log-every", "1", timeout=120)
    assert "rank 1:" in proc.stdout and len(_losses(proc.stdout)) == 1, proc.stdout


def test_trace_and_svg_need_the_pipeline(setup, tmp_path):
    for option in ("--trace", "--svg"):
        proc = _single(setup, "tiny", "--steps", "1", option, tmp_path / "x", timeout=60,
                       check=False)
        assert proc.returncode != 0
        assert "--trace and --svg record a pipelined run: they need --pipeline" in proc.stderr
        assert not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def short_checkpoint(setup):
    """A single-process checkpoint of the tiny model after 2 steps (adamw)."""
    path = setup / "short.npz"
    _single(setup, "tiny", "--steps", "2", "--micro-batches", "2", "--checkpoint", path)
    return path


def _damaged(path, good, how):
    data = bytearray(good.read_bytes())
    if how == "truncated":
        data = data[:len(data) // 2]
    else:  # bytes inside an array's data (the archive's entries are stored)
        middle = len(data) // 2
        data[middle:middle + 64] = bytes(64)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("how,message", [
    ("truncated", "as .npz"),
    ("overwritten", "is damaged: CRC error"),
])
def test_damaged_checkpoint_is_refused(setup, short_checkpoint, tmp_path, how, message):
    damaged = _damaged(tmp_path / f"{how}.npz", short_checkpoint, how)
    proc = _pipeline(setup, 2, "tiny", "microbatches=2", "--steps", "4", "--resume", damaged,
                     timeout=60, check=False)
    assert proc.returncode != 0
    assert str(damaged) in proc.stderr and message in proc.stderr, proc.stderr
    assert _losses(proc.stdout) == []


def test_checkpoint_of_another_model_or_optimizer_is_refused(setup, short_checkpoint, tmp_path):
    """A state entry no rank loads (each loads its share): another model's
    parameter, or another optimizer's state. The single-process checkpoint
    itself resumes on the pipeline (the ranks' shares cover it)."""
    data = _load(short_checkpoint)
    data["param/bert.encoder.layer.9.output.dense.weight"] = np.zeros((4, 4), np.float32)
    path = tmp_path / "extra.npz"
    np.savez(path, **data)
    proc = _pipeline(setup, 2, "tiny", "microbatches=2", "--steps", "4", "--resume", path,
                     timeout=60, check=False)
    assert proc.returncode != 0
    assert (f"{path}: holds 'bert.encoder.layer.9.output.dense.weight', which this run does "
            "not have") in proc.stderr, proc.stderr
    assert _losses(proc.stdout) == []
    proc = _pipeline(setup, 2, "tiny", "microbatches=2", "--steps", "3", "--log-every", "1",
                     "--resume", short_checkpoint, timeout=120)
    assert len(_losses(proc.stdout)) == 1


def test_checkpoint_without_a_parameter_is_refused(setup, short_checkpoint, tmp_path):
    data = _load(short_checkpoint)
    # A parameter of the last stage: rank 1 finds it missing.
    missing = "bert.encoder.layer.1.output.dense.weight"
    del data["param/" + missing]
    path = tmp_path / "missing.npz"
    np.savez(path, **data)
    proc = _pipeline(setup, 2, "tiny", "microbatches=2", "--steps", "4", "--resume", path,
                     timeout=60, check=False)
    assert proc.returncode != 0
    assert f"rank 1: error: {path}: has no parameter '{missing}'" in proc.stderr, proc.stderr
    # Not a checkpoint at all.
    proc = _pipeline(setup, 2, "tiny", "microbatches=2", "--steps", "4", "--resume",
                     setup / "corpus.npz", timeout=60, check=False)
    assert proc.returncode != 0
    assert "not a pf-train checkpoint (no meta/step)" in proc.stderr, proc.stderr


# --- 6. each rank's state ----------------------------------------------------------

STARTUP = re.compile(r"^rank (\d+): stage (\d+) \(encoder blocks ([\d ]*)\), (\d+) parameter "
                     r"tensors \((\d+) bytes\), optimizer state (\d+) bytes, K-FAC state 0 "
                     r"bytes$", re.M)


@pytest.mark.parametrize("optimizer,state_per_parameter", [("adamw", 2), ("sgd", 1)])
def test_startup_lines_add_up_to_the_model(setup, short_checkpoint, optimizer,
                                           state_per_parameter):
    proc = _pipeline(setup, 2, "tiny", "schedule=gpipe microbatches=2 grain=block", "--steps",
                     "1", "--optimizer", optimizer, timeout=60)
    lines = STARTUP.findall(proc.stdout)
    assert sorted(int(line[0]) for line in lines) == [0, 1], proc.stdout
    parameters = _parameters(_load(short_checkpoint))
    total_bytes = sum(v.nbytes for v in parameters.values())
    count = held_bytes = 0
    for rank, stage, blocks, tensors, bytes_, state in lines:
        # Stage s holds encoder block s of the 2.
        assert stage == rank and blocks == rank
        count += int(tensors)
        held_bytes += int(bytes_)
        assert int(state) == state_per_parameter * int(bytes_)
    # The tied word embedding is held by the first and the last stage.
    assert count == len(parameters) + 1
    assert held_bytes == total_bytes + parameters[WORD_EMBEDDING].nbytes


ACTIVATIONS_PLANNED = re.compile(r"^rank (\d+): activations: up to (\d+) micro-batches' saved "
                                 r"activations in flight, at most (\d+) bytes live .*, laid out "
                                 r"in an arena of (\d+) bytes$", re.M)
ACTIVATIONS_RUN = re.compile(r"^rank (\d+): activations of every program run: up to (\d+) "
                             r"micro-batches' saved activations in flight, at most (\d+) bytes "
                             r"live, in one arena of (\d+) bytes$", re.M)


def _activation_plans(proc):
    """Per rank: (slots, live bytes, arena bytes) at start-up (the warm-up
    program) and after the run (with the window programs)."""
    start = {int(r): tuple(map(int, rest)) for r, *rest in ACTIVATIONS_PLANNED.findall(proc.stdout)}
    run = {int(r): tuple(map(int, rest)) for r, *rest in ACTIVATIONS_RUN.findall(proc.stdout)}
    assert sorted(start) == [0, 1] and sorted(run) == [0, 1], proc.stdout
    return start, run


# The saved activations in flight: all N for GPipe, D - r on rank r for 1F1B.
@pytest.mark.parametrize("spec,args,slots", [
    ("schedule=gpipe microbatches=4", (), {0: 4, 1: 4}),
    ("schedule=1f1b microbatches=4", (), {0: 2, 1: 1}),
    ("schedule=zb-h1 microbatches=4", (), None),
    ("schedule=zb-h2 microbatches=4", (), None),
    ("schedule=1f1b microbatches=4 kfac=bubbles refresh=2",
     ("--kfac", "--kfac-refresh-warmup", "1"), None),
], ids=["gpipe", "1f1b", "zb-h1", "zb-h2", "1f1b-kfac-bubbles"])
def test_activation_plan_is_the_arena_the_steps_run_in(setup, spec, args, slots):
    """Each rank plans its in-flight stage values from its programs
    (planStageValues: the lowering's offsets) and allocates that arena once:
    it holds at least the most bytes live at once, the steps run in it (the
    run trains), and the windows' programs (kfac=bubbles) only move factor
    calls, not passes."""
    proc = _pipeline(setup, 2, "tiny", spec, *args, "--steps", "4", timeout=120)
    start, run = _activation_plans(proc)
    for rank in (0, 1):
        slots_start, live_start, arena_start = start[rank]
        slots_run, live_run, arena_run = run[rank]
        assert 0 < live_start <= arena_start, proc.stdout
        assert 0 < live_run <= arena_run and arena_run >= arena_start, proc.stdout
        if slots:
            assert slots_run == slots_start == slots[rank], proc.stdout
        assert slots_run >= slots_start


def test_arena_follows_the_schedules_in_flight_count(setup):
    """The arena is sized by what the schedule keeps in flight: 1F1B's
    last rank keeps one micro-batch's saved activations where GPipe keeps
    all four, so its arena is smaller."""
    arenas = {}
    for schedule in ("gpipe", "1f1b"):
        proc = _pipeline(setup, 2, "tiny", f"schedule={schedule} microbatches=4", "--steps", "1",
                         timeout=120)
        arenas[schedule] = _activation_plans(proc)[1]
    assert arenas["1f1b"][1][2] < arenas["gpipe"][1][2], arenas
    assert arenas["1f1b"][1][0] == 1 and arenas["gpipe"][1][0] == 4, arenas


GRADIENTS_HELD = re.compile(r"^rank (\d+): gradients held at most: (\d+) bytes", re.M)


# 1F1B and GPipe, D = 2, N = 4: the tied embedding's gradient summed per
# micro-batch on the last stage's rank (pf.reduce_microbatch, the default)
# against every piece kept to one step-end all-reduce.
@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_tied_gradient_per_microbatch_saves_its_pieces(setup, tmp_path, schedule):
    """The same bits either way, and never more memory: the first stage holds
    at most one micro-batch's piece of the tied embedding's gradient at a
    time, not N, and the last stage fewer than N (all in the program's arena;
    the host holds only the rows in flight). Where the pieces are live at the
    arena's peak (1F1B, whose backwards run while activations are held), the
    first stage's peak falls by at least a piece; GPipe's peak is its last
    forward, before any piece exists."""
    # deterministic=true: the step-end all-reduce of the kept pieces adds them
    # in micro-batch order (by default it would add the two ranks' weighted
    # sums, within rounding only).
    spec = f"schedule={schedule} microbatches=4 deterministic=true"
    runs = {}
    for per_microbatch in ("true", "false"):
        checkpoint = tmp_path / f"{per_microbatch}.npz"
        proc = _pipeline(setup, 2, "tiny", f"{spec} tied-per-microbatch={per_microbatch}",
                         "--steps", "4", "--log-every", "1", "--checkpoint", checkpoint,
                         timeout=120)
        host = {int(r): int(b) for r, b in GRADIENTS_HELD.findall(proc.stdout)}
        assert sorted(host) == [0, 1], proc.stdout
        arena = _activation_plans(proc)[1]
        held = {rank: host[rank] + arena[rank][1] for rank in host}
        runs[per_microbatch] = (_losses(proc.stdout), _load(checkpoint), held)
    (losses, checkpoint, held), (want_losses, want, kept) = runs["true"], runs["false"]
    assert losses == want_losses
    _assert_same_checkpoint(checkpoint, want)
    piece = _parameters(want)[WORD_EMBEDDING].nbytes
    for rank in (0, 1):
        assert held[rank] <= kept[rank], (held, kept, piece)
    if schedule == "1f1b":
        assert kept[0] - held[0] >= piece, (held, kept, piece)


HOST_STAGE_VALUE_BYTES = re.compile(
    r"^rank (\d+): stage-value bytes read by host code in the steps: (\d+), "
    r"of them the step's results: (\d+)$", re.M)


# The step is the program's own work on its values: the tied embedding's
# rows per micro-batch (1F1B, also bitwise), the replicas' sums and
# broadcasts (Chimera), the clippings and K-FAC's KL-clip are pfrt calls of
# the lowered program, and so are the bitwise mode's exact sums of pieces
# (kept to the step's end with tied-per-microbatch=false; Chimera's
# replicas): one member weights them by accumulate calls. So host code reads
# no stage value but the step's results (every read goes through one counted
# place): here the loss, 4 bytes per step from one rank (pf-train hands no
# gradient to the host).
@pytest.mark.parametrize("spec, args", [
    ("schedule=1f1b microbatches=4", ()),
    ("schedule=1f1b microbatches=4 deterministic=true", ()),
    ("schedule=chimera microbatches=4", ("--kfac",)),
    ("schedule=1f1b microbatches=4 deterministic=true tied-per-microbatch=false", ()),
    ("schedule=chimera microbatches=4 deterministic=true", ("--kfac",)),
], ids=["1f1b", "1f1b-deterministic", "chimera-kfac", "pieces-to-the-end",
        "chimera-kfac-deterministic"])
def test_host_code_touches_no_stage_value(setup, spec, args):
    proc = _pipeline(setup, 2, "tiny", spec, "--steps", "2", *args, timeout=120)
    counts = {int(r): (int(read), int(results))
              for r, read, results in HOST_STAGE_VALUE_BYTES.findall(proc.stdout)}
    assert sorted(counts) == [0, 1], proc.stdout
    for read, results in counts.values():
        assert read == results, counts
    assert sum(results for _, results in counts.values()) == 2 * 4, counts


# --- 7. measured timelines ---------------------------------------------------------

def test_trace_and_svg_of_every_rank(setup, tmp_path):
    trace, svg = tmp_path / "run.json", tmp_path / "run.svg"
    steps, microbatches = 3, 4
    proc = _pipeline(setup, 2, "tiny", f"schedule=1f1b microbatches={microbatches}", "--steps",
                     steps, "--trace", trace, "--svg", svg, timeout=60)
    assert f"measured trace: {trace}" in proc.stdout
    assert f"measured timeline: {svg}" in proc.stdout
    assert "measured vs simulated: 1f1b, 2 ranks, 4 micro-batches" in proc.stdout, proc.stdout
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    # Rank r's compute on thread 2r, its transfers on thread 2r + 1.
    for rank in range(2):
        compute = [e for e in events if e["tid"] == 2 * rank]
        comm = [e for e in events if e["tid"] == 2 * rank + 1]
        for kind in ("forward", "backward"):
            passes = [e for e in compute if e["cat"] == kind]
            assert len(passes) == steps * microbatches, (rank, kind)
            assert {e["args"]["stage"] for e in passes} == {rank}
            assert {e["args"]["step"] for e in passes} == set(range(steps))
        assert sum(e["cat"] == "update" for e in compute) == steps
        # Each micro-batch's gradients added to their running sums (the
        # accumulate calls), on the compute lane under their own name.
        assert sum(e["cat"] == "accumulate" for e in compute) >= steps * microbatches, rank
        # Each collective under its op's name: the tied embedding's reduce
        # per micro-batch and its broadcast, the clipping's norm exchange.
        assert {"send", "recv", "reduce", "broadcast", "clip"} <= {e["cat"] for e in comm}, rank
        assert sum(e["cat"] == "reduce" for e in comm) == steps * microbatches, rank
        assert {e["cat"] for e in comm} <= {"send", "recv", "reduce", "broadcast", "clip",
                                           "all-reduce"}, rank
        assert all(e["dur"] >= 0 for e in compute + comm)
    # One steady step (of the steps after the first) above its simulation
    # fed with the measured durations.
    text = svg.read_text()
    assert text.startswith("<svg") and text.count("<rect") >= len(events) // steps
    assert "rank 1 measured<" in text and "rank 1 simulated<" in text, text[:800]
    assert "median of 2 steps" in text


@pytest.mark.parametrize("model,schedule,stages", [
    ("mini", "zb-v", [{0, 3}, {1, 2}]),  # the V: stages s and 2D-1-s on rank s
    ("tiny", "dualpipe", [{0, 1}, {0, 1}]),  # two pipes: stage s on ranks s and D-1-s
])
def test_measured_report_of_the_v_and_dualpipe_schedules(setup, tmp_path, model, schedule,
                                                         stages):
    """The measured-vs-simulated report takes the placements of the new
    schedules (it refused their passes as running elsewhere before)."""
    trace = tmp_path / "run.json"
    proc = _pipeline(setup, 2, model, f"schedule={schedule} microbatches=4", "--steps", 3,
                     "--trace", trace, timeout=90)
    assert f"measured vs simulated: {schedule}, 2 ranks, 4 micro-batches" in proc.stdout, \
        proc.stdout
    assert "no simulated comparison" not in proc.stdout, proc.stdout
    events = [e for e in json.loads(trace.read_text())["traceEvents"]
              if e["ph"] == "X" and e["cat"] == "forward"]
    for rank in range(2):
        assert {e["args"]["stage"] for e in events if e["tid"] == 2 * rank} == stages[rank]


@pytest.mark.parametrize("schedule", ["1f1b", "zb-v"])
def test_pf_run_training_step_with_the_pipeline(setup, tmp_path, schedule):
    """pf-run --training-step --pipeline (one step under mpirun) writes the loss
    and the clipped gradients the updates applied, bitwise those of the
    single-process step with --micro-batches 4 (zb-v: the tied embedding's
    gradient summed from its two stages on rank 0)."""
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 60, (8, 16)).astype(np.int64)
    labels = np.where(rng.random(ids.shape) < 0.3, ids, -100).astype(np.int64)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, input_ids=ids, token_type_ids=np.zeros_like(ids),
             attention_mask=np.ones_like(ids), labels=labels, lr=np.float64(1e-3),
             step=np.int64(1))
    model = [str(tool("pf-run")), str(setup / "mini.onnx"), "--dim", "batch=8", "--dim",
             "sequence=16", "--training-step", "--num-threads", "1", "--inputs", str(inputs)]
    single, piped = tmp_path / "single.npz", tmp_path / "pipeline.npz"
    _run([*model, "--micro-batches", "4", "--outputs", str(single)], timeout=120)
    proc = _run([MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "2", *model,
                 "--pipeline", f"stages=2 schedule={schedule} microbatches=4", "--outputs",
                 str(piped)], timeout=120)
    assert "ranks 2, micro-batches 4" in proc.stdout, proc.stdout
    want, got = _load(single), _load(piped)
    assert "loss" in got and any(k.startswith("grad/") for k in got)
    _assert_same_checkpoint(got, want)
    if schedule != "1f1b":
        return
    # Without stages (pf-run does not know the job's size before building).
    proc = _run([MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "2", *model,
                 "--pipeline", "microbatches=4"], timeout=60, check=False)
    assert proc.returncode != 0
    assert "--pipeline needs stages=D, the job's ranks" in proc.stderr, proc.stderr


@pytest.mark.parametrize("schedule", ["1f1b", "chimera"])
def test_eval_lines_equal_single_process(setup, schedule):
    """--eval-every with --pipeline: rank 0 gathers the weights and runs the
    single-process evaluation (same held-out rows and masks), so its lines
    equal single-process pf-train's, and training leaves the same rows out."""
    args = ("--steps", "12", "--log-every", "4", "--eval-every", "5", "--eval-sequences", "64")
    single = _single(setup, "tiny", "--micro-batches", "4", *args, timeout=120)
    pipelined = _pipeline(setup, 2, "tiny", f"stages=2 schedule={schedule} microbatches=4", *args,
                          timeout=180)
    pattern = r"^eval\s+(\d+)\s+loss\s+(\S+)\s+\((\d+) held-out sequences\)$"
    want = re.findall(pattern, single.stdout, re.M)
    assert [step for step, _, _ in want] == ["0", "5", "10", "12"], single.stdout
    assert re.findall(pattern, pipelined.stdout, re.M) == want, pipelined.stdout
    assert _losses(pipelined.stdout) == _losses(single.stdout)
