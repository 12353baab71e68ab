"""Pipelined training artifacts (docs/artifacts.md): `pf-train --pipeline
"stages=D ..." --compile-only --artifact DIR` writes one library per rank
(the stage functions its program calls and the lowered program), and
`mpirun -np D pf-trainer DIR` trains from them without MLIR or LLVM, bit for
bit like pf-train's own JIT-compiled pipeline; a broken or mismatched
artifact, or ranks started with different ones, stop the job with a clear
error, never a hang."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.corpus import make_corpus
from pipefisher.tools import tool

from pipeline_support import assert_same_checkpoint, load_npz, losses
from pipeline_support import run_job as _run

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")

BATCH = ["--batch", "8", "--num-threads", "1"]
ADAMW_SPEC = "stages=2 schedule=1f1b microbatches=4"
# Chimera's two replicas: the replica factors' all-reduce, the
# preconditioning split between the ranks and broadcast.
KFAC_SPEC = "stages=2 schedule=chimera microbatches=4 kfac=step"
KFAC = ["--kfac", "--kfac-refresh", "3", "--optimizer", "sgd", "--lr", "0.05"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipelined_artifacts")
    corpus = make_corpus(sequences=600, seq_len=16, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp / "corpus.npz", **corpus)
    save_model(make_bert_model("mini", vocab_size=vocab, seed=2), tmp / "mini.onnx")
    for name, spec, options in (("adamw", ADAMW_SPEC, []), ("kfac", KFAC_SPEC, KFAC)):
        proc = _run([tool("pf-train"), tmp / "mini.onnx", "--corpus", tmp / "corpus.npz",
                     *BATCH, *options, "--pipeline", spec, "--compile-only", "--artifact",
                     tmp / name])
        assert f"train it with: mpirun -np 2 pf-trainer {tmp / name}" in proc.stdout
        for r in (0, 1):
            assert (tmp / name / f"rank{r}.so").exists()
    return tmp


def _mpirun(ranks):
    return [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", str(ranks)]


def _jit(setup, spec, options, *args, **kwargs):
    return _run([*_mpirun(2), tool("pf-train"), setup / "mini.onnx", "--corpus",
                 setup / "corpus.npz", *BATCH, *options, "--pipeline", spec, *args], **kwargs)


def _trainer(setup, artifact, *args, ranks=2, **kwargs):
    return _run([*_mpirun(ranks), tool("pf-trainer"), artifact, "--corpus",
                 setup / "corpus.npz", *args], **kwargs)


def _evals(stdout):
    return [line.split()[:4] for line in stdout.splitlines() if line.startswith("eval ")]


def test_pipelined_artifact_trains_bit_for_bit_like_the_jit_pipeline(setup, tmp_path):
    run = ["--steps", "8", "--log-every", "1", "--eval-every", "4", "--eval-sequences", "16"]
    jit = _jit(setup, ADAMW_SPEC, [], *run, "--checkpoint", tmp_path / "jit.npz")
    art = _trainer(setup, setup / "adamw", *run, "--checkpoint", tmp_path / "art.npz")
    assert f"training {setup / 'adamw'} (" in art.stdout and "pipeline of 2 ranks" in art.stdout
    assert losses(art.stdout) == losses(jit.stdout) and len(losses(jit.stdout)) == 8
    assert _evals(art.stdout) == _evals(jit.stdout) and len(_evals(jit.stdout)) == 3
    assert_same_checkpoint(load_npz(tmp_path / "art.npz"), load_npz(tmp_path / "jit.npz"))
    # The program moves its stage values itself: host code reads only the
    # step's loss (4 bytes a step on the last stage's rank).
    assert "rank 1: stage-value bytes read by host code in the steps: 32, of them the step's " \
           "results: 32" in art.stdout
    # The CUDA path's buffers and staged transfers, on the CPU backend.
    dev = _trainer(setup, setup / "adamw", *run, "--device-buffers")
    assert losses(dev.stdout) == losses(jit.stdout)
    assert "stage values over MPI, staged through host buffers" in dev.stdout
    assert "stage values copied between host and backend memory by the stage calls: 0" \
        in dev.stdout


def test_pipelined_kfac_artifact_resumes_across_tools_bitwise(setup, tmp_path):
    """Chimera with K-FAC: the JIT pipeline's checkpoint after step 4,
    resumed by the trainer to step 8, ends where the JIT run of 8 steps
    does."""
    whole = _jit(setup, KFAC_SPEC, KFAC, "--steps", "8", "--log-every", "1", "--checkpoint",
                 tmp_path / "whole.npz")
    _jit(setup, KFAC_SPEC, KFAC, "--steps", "4", "--checkpoint", tmp_path / "half.npz")
    rest = _trainer(setup, setup / "kfac", "--steps", "8", "--log-every", "1", "--resume",
                    tmp_path / "half.npz", "--checkpoint", tmp_path / "rest.npz")
    assert losses(rest.stdout) == losses(whole.stdout)[4:]
    assert_same_checkpoint(load_npz(tmp_path / "rest.npz"), load_npz(tmp_path / "whole.npz"))
    full = _trainer(setup, setup / "kfac", "--steps", "8", "--log-every", "1")
    assert losses(full.stdout) == losses(whole.stdout)


def _broken_copy(setup, tmp_path, name, change):
    copy = tmp_path / name
    shutil.copytree(setup / "adamw", copy)
    change(copy)
    return copy


def test_bad_pipelined_artifacts_stop_the_job(setup, tmp_path):
    def fails(artifact, ranks=2, cmd=None):
        proc = _trainer(setup, artifact, "--steps", "2", ranks=ranks, check=False, timeout=120) \
            if cmd is None else _run(cmd, check=False, timeout=120)
        assert proc.returncode != 0, proc.stdout
        assert "Traceback" not in proc.stderr and "Segmentation" not in proc.stderr
        return proc.stderr

    # Another rank count, or one process.
    err = fails(setup / "adamw", ranks=3)
    assert "compiled for 2 ranks but the job has 3: start it with mpirun -np 2" in err
    proc = _run([tool("pf-trainer"), setup / "adamw", "--corpus", setup / "corpus.npz"],
                check=False)
    assert proc.returncode == 1
    assert "compiled for a pipeline of 2 ranks: start it with mpirun -np 2" in proc.stderr
    # A rank's library missing or cut short; another compilation's.
    missing = _broken_copy(setup, tmp_path, "missing", lambda a: (a / "rank1.so").unlink())
    assert "rank 1: error:" in fails(missing) and "rank1.so is missing" in fails(missing)
    short = _broken_copy(setup, tmp_path, "short", lambda a: (a / "rank0.weights").write_bytes(
        (a / "rank0.weights").read_bytes()[:4096]))
    assert "rank0.weights has 4096 bytes, the manifest says" in fails(short)

    def foreign(art):
        data = json.loads((art / "manifest.json").read_text())
        data["rank_programs"][1]["files"]["fingerprint"] = "12345"
        (art / "manifest.json").write_text(json.dumps(data))
    assert "of another compilation than its manifest" in fails(
        _broken_copy(setup, tmp_path, "foreign", foreign))

    # The ranks started with different artifacts (mpirun's MPMD form): the
    # manifest's digests are compared before anything runs.
    other = _broken_copy(setup, tmp_path, "other", lambda a: None)
    data = json.loads((other / "manifest.json").read_text())
    data["command"].append("--changed")
    (other / "manifest.json").write_text(json.dumps(data))
    mpmd = [MPIRUN, "--oversubscribe", "--allow-run-as-root",
            "-np", "1", tool("pf-trainer"), setup / "adamw", "--corpus", setup / "corpus.npz",
            ":", "-np", "1", tool("pf-trainer"), other, "--corpus", setup / "corpus.npz"]
    err = fails(None, cmd=mpmd)
    assert "rank(s) 1 were started with another artifact than rank 0" in err


def test_pipelined_compile_only_options(setup, tmp_path):
    def fails(spec, *args):
        proc = _run([tool("pf-train"), setup / "mini.onnx", "--corpus", setup / "corpus.npz",
                     *BATCH, *args, "--pipeline", spec, "--compile-only", "--artifact",
                     tmp_path / "a"], check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        return proc.stderr
    assert "give stages=D" in fails("schedule=1f1b")
    assert "kfac=bubbles" in fails("stages=2 kfac=bubbles", *KFAC, "--kfac-refresh-warmup", "2")
    assert not (tmp_path / "a" / "manifest.json").exists()
