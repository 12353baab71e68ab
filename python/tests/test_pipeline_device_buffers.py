"""`mpirun -np 2 pf-train --pipeline ... --device-buffers`: the ranks' path
for GPUs, run on the CPU. Each rank's stage functions run on backend memory
(one backend copy of every parameter, as `--device cuda` does); the stage
values (activations, the loss, the gradients' micro-batch pieces, running
sums and step gradients up to the update) live in slots of backend memory
that the calls (the once-per-step update and precondition calls included)
read and write in place (counted: no copy through the host), while graph
inputs are copied at each call; the stage values a rank sends or
receives travel from and into backend memory on MPI staged through host
buffers (PFRT_COMM_MPI_STAGED: what MPI does with a CUDA context's tensors,
here with memcpys). None of that may change a bit: losses, held-out losses
and the gathered checkpoint equal the host pipeline's (and with K-FAC, with
blocking transfers, in the bubbles, and after a resume).

Also the refusals of `--comm`: NCCL on the CPU, NCCL without a GPU, and
`--comm` without `--pipeline`.

Every subprocess has a timeout (and is killed with its ranks on expiry), so a
hang fails the test instead of blocking. Both sides run with --num-threads 1.
"""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.corpus import make_corpus
from pipefisher.tools import tool

from pipeline_support import assert_same_checkpoint as _assert_same_checkpoint
from pipeline_support import load_npz as _load
from pipeline_support import losses as _losses
from pipeline_support import run_job as _run

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")

STAGED_LINE = "stage functions on CPU backend memory, stage values over MPI, staged through host"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline_device_buffers")
    corpus = make_corpus(sequences=400, seq_len=16, seed=3)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, seed=4), tmp / "tiny.onnx")
    return tmp


def _train_cmd(setup, *args):
    return [tool("pf-train"), setup / "tiny.onnx", "--corpus", setup / "corpus.npz",
            "--batch", "8", "--num-threads", "1", *args]


def _pipeline(setup, spec, *args, **kwargs):
    return _run([MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "2",
                 *_train_cmd(setup, "--pipeline", spec, *args)], **kwargs)


def _evals(stdout):
    return re.findall(r"^eval\s+(\d+)\s+loss\s+(\S+)", stdout, re.M)


def _host_and_device_runs(setup, tmp_path, spec, *args):
    """The same pipelined run on host buffers and with --device-buffers."""
    runs = {}
    for name, extra in [("host", ()), ("device", ("--device-buffers",))]:
        path = tmp_path / f"{name}.npz"
        proc = _pipeline(setup, spec, *args, "--log-every", "1", "--checkpoint", path, *extra)
        runs[name] = (proc, _load(path))
    return runs


CASES = [
    ("schedule=1f1b microbatches=4", ("--eval-every", "5", "--eval-sequences", "32")),
    ("schedule=1f1b microbatches=4", ("--kfac",)),
    # Blocking send and recv (no posted transfers) through the staging.
    ("schedule=gpipe microbatches=4 overlap=false", ()),
    # K-FAC in the bubbles: the executor promotes the pending inverses on
    # the host (their backend copies come and go around it).
    ("schedule=1f1b microbatches=4 kfac=bubbles refresh=2", ("--kfac", "--kfac-refresh-warmup", "1")),
]


@pytest.mark.parametrize("spec,extra", CASES,
                         ids=["1f1b-eval", "1f1b-kfac", "gpipe-blocking", "1f1b-kfac-bubbles"])
def test_device_buffers_equal_the_host_pipeline_bitwise(setup, tmp_path, spec, extra):
    runs = _host_and_device_runs(setup, tmp_path, spec, "--steps", "8", *extra)
    (host, want), (device, got) = runs["host"], runs["device"]
    # Only the device run stages its stage values, on both ranks.
    assert STAGED_LINE not in host.stdout
    for rank in (0, 1):
        assert f"rank {rank}: {STAGED_LINE}" in device.stdout, device.stdout
        # The slots are in backend memory and the calls bind them in place:
        # no activation, activation gradient or gradient goes through the
        # host, the step's gradients into the update (and K-FAC's
        # precondition calls) included.
        assert f"rank {rank}: stage values copied between host and backend memory by the " \
               f"stage calls: 0" in device.stdout, device.stdout
    assert "stage values copied" not in host.stdout
    losses = _losses(device.stdout)
    assert [int(step) for step, _, _ in losses] == list(range(1, 9)), device.stdout
    assert losses == _losses(host.stdout)
    assert _evals(device.stdout) == _evals(host.stdout)
    if "--eval-every" in extra:
        assert [step for step, _ in _evals(device.stdout)] == ["0", "5", "8"], device.stdout
    assert int(got["meta/step"]) == 8
    if "kfac=bubbles" in spec:
        # Where the inverses run is placed from measured durations (it
        # changes when, not what, is computed): the rest must be equal.
        assert "meta/kfac_placement" in got and "meta/kfac_placement" in want
        got.pop("meta/kfac_placement")
        want = {k: v for k, v in want.items() if k != "meta/kfac_placement"}
    _assert_same_checkpoint(got, want)
    if "--kfac" in extra:
        assert any(".kfac." in key for key in got), sorted(got)
    # The runs train (the losses move), so equal bits are not equal idleness.
    assert len({loss for _, loss, _ in losses}) > 1, losses


def test_device_buffers_resume_is_bitwise(setup, tmp_path):
    """A --device-buffers run resumed from its checkpoint (copied back into
    backend memory) ends where an uninterrupted host run does."""
    args = ("--schedule", "constant", "--lr", "2e-3", "--warmup", "2", "--log-every", "1")
    spec = "schedule=1f1b microbatches=4"
    whole, half, resumed = (tmp_path / f"{n}.npz" for n in ("whole", "half", "resumed"))
    host = _pipeline(setup, spec, "--steps", "8", "--checkpoint", whole, *args)
    _pipeline(setup, spec, "--steps", "4", "--checkpoint", half, "--device-buffers", *args)
    proc = _pipeline(setup, spec, "--steps", "8", "--checkpoint", resumed, "--resume", half,
                     "--device-buffers", *args)
    assert "resumed from" in proc.stdout
    assert _losses(proc.stdout) == [l for l in _losses(host.stdout) if int(l[0]) > 4]
    _assert_same_checkpoint(_load(resumed), _load(whole))


def test_nccl_on_the_cpu_is_refused(setup):
    proc = _run(_train_cmd(setup, "--steps", "1", "--pipeline", "schedule=1f1b microbatches=4",
                           "--comm", "nccl", "--device-buffers"), timeout=60, check=False)
    assert proc.returncode != 0
    assert "--comm nccl moves CUDA device memory between GPUs: it needs --device cuda" in \
        proc.stderr, proc.stderr


def test_nccl_without_a_gpu_is_refused(setup):
    """Without a GPU (or a CUDA backend) --device cuda fails before any rank
    starts, naming why."""
    proc = _run(_train_cmd(setup, "--steps", "1", "--pipeline", "schedule=1f1b microbatches=4",
                           "--device", "cuda", "--comm", "nccl"), timeout=60, check=False)
    if proc.returncode == 0:
        pytest.skip("a GPU is present: the no-GPU refusal cannot be seen here")
    assert "--device cuda: " in proc.stderr, proc.stderr
    assert "CUDA" in proc.stderr.split("--device cuda: ", 1)[1], proc.stderr


def test_comm_needs_the_pipeline(setup):
    proc = _run(_train_cmd(setup, "--steps", "1", "--comm", "mpi"), timeout=60, check=False)
    assert proc.returncode != 0
    assert "--comm chooses how the ranks of --pipeline exchange their stage values: it needs " \
        "--pipeline" in proc.stderr, proc.stderr


def test_help_documents_comm():
    proc = _run([tool("pf-train"), "--help"], timeout=60)
    assert "--comm=<value>" in proc.stdout, proc.stdout
    for value in ("auto", "mpi", "nccl"):
        assert f"={value}" in proc.stdout
