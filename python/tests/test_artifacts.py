"""Compile once, train anywhere (docs/artifacts.md): pf-train --compile-only
writes a training artifact, pf-trainer (no MLIR, no LLVM) trains from it,
bit for bit like pf-train's own JIT-compiled run, and refuses a broken or
foreign artifact with a clear error."""

from __future__ import annotations

import hashlib
import json
import re
import shutil

import numpy as np
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.corpus import make_corpus
from pipefisher.tools import run_tool

ADAMW = ["--batch", "8", "--num-threads", "2"]
KFAC = ADAMW + ["--kfac", "--kfac-refresh", "3", "--micro-batches", "2", "--optimizer", "sgd",
                "--lr", "0.05", "--kfac-damping-schedule", "warmup",
                "--kfac-damping-warmup", "5"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("artifacts")
    corpus = make_corpus(sequences=600, seq_len=24, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp / "corpus.npz", **corpus)
    short = make_corpus(sequences=200, seq_len=16, seed=1)
    short.pop("vocab")
    np.savez(tmp / "short.npz", **short)
    save_model(make_bert_model("mini", vocab_size=vocab, seed=2),
               tmp / "model.onnx")
    for name, options in (("adamw", ADAMW), ("kfac", KFAC)):
        proc = run_tool("pf-train", str(tmp / "model.onnx"), "--corpus", str(tmp / "corpus.npz"),
                        *options, "--compile-only", "--artifact", str(tmp / name))
        assert f"train it with: pf-trainer {tmp / name}" in proc.stdout
    return tmp


def _jit(setup, options, *args):
    return run_tool("pf-train", str(setup / "model.onnx"), "--corpus", str(setup / "corpus.npz"),
                    *options, *args)


def _trainer(setup, artifact, *args, check=True, corpus="corpus.npz"):
    return run_tool("pf-trainer", str(setup / artifact), "--corpus", str(setup / corpus), *args,
                    check=check)


def _lines(stdout):
    """The progress and evaluation lines' step and loss (not their timings)."""
    return re.findall(r"^(step|eval)\s+(\d+)\s+loss\s+([0-9.]+)", stdout, re.M)


def _same_state(a, b):
    with np.load(a) as x, np.load(b) as y:
        assert sorted(x.files) == sorted(y.files)
        differ = [k for k in x.files if x[k].tobytes() != y[k].tobytes()]
    assert not differ, differ


def test_artifact_trains_bit_for_bit_like_the_jit_run(setup, tmp_path):
    run = ["--steps", "20", "--eval-every", "10", "--eval-sequences", "16", "--log-every", "5"]
    jit = _jit(setup, ADAMW, *run, "--checkpoint", str(tmp_path / "jit.npz"))
    art = _trainer(setup, "adamw", *run, "--checkpoint", str(tmp_path / "art.npz"))
    assert f"training {setup / 'adamw'}" in art.stdout
    assert _lines(art.stdout) == _lines(jit.stdout) and len(_lines(jit.stdout)) == 8
    _same_state(tmp_path / "jit.npz", tmp_path / "art.npz")
    # The CUDA path's buffers (weights, arena, inputs and outputs in backend
    # memory, copied at the step's edges), run on the CPU backend.
    dev = _trainer(setup, "adamw", *run, "--checkpoint", str(tmp_path / "dev.npz"),
                   "--device-buffers")
    assert _lines(dev.stdout) == _lines(jit.stdout)
    _same_state(tmp_path / "jit.npz", tmp_path / "dev.npz")


def test_kfac_artifact_resumes_a_jit_checkpoint_bit_for_bit(setup, tmp_path):
    """K-FAC with micro-batches and a damping schedule (the step's
    kfac_damping input): pf-trainer's checkpoint after 6 steps, resumed by
    pf-trainer and by pf-train, ends where pf-train's own 12 steps end."""
    _jit(setup, KFAC, "--steps", "12", "--checkpoint", str(tmp_path / "jit.npz"))
    half = tmp_path / "half.npz"
    proc = _trainer(setup, "kfac", "--steps", "6", "--checkpoint", str(half))
    assert "damping" in proc.stdout
    art = _trainer(setup, "kfac", "--steps", "12", "--resume", str(half), "--checkpoint",
                   str(tmp_path / "art.npz"))
    assert f"resumed from {half} after step 6" in art.stdout
    _same_state(tmp_path / "jit.npz", tmp_path / "art.npz")
    back = _jit(setup, KFAC, "--steps", "12", "--resume", str(half), "--checkpoint",
                str(tmp_path / "back.npz"))
    assert "resumed" in back.stdout
    _same_state(tmp_path / "jit.npz", tmp_path / "back.npz")


def test_adaptive_damping_from_an_artifact(setup, tmp_path):
    """--kfac-damping-schedule adaptive: the quadratic model over the K-FAC
    layers the manifest records, the evaluation model's forward pass; the
    adaptations' lines, λ and the checkpoints equal the JIT run's."""
    adaptive = ADAMW + ["--kfac", "--optimizer", "sgd", "--lr", "0.05",
                        "--kfac-damping-schedule", "adaptive", "--kfac-damping-interval", "2",
                        "--log-every", "2"]
    run_tool("pf-train", str(setup / "model.onnx"), "--corpus", str(setup / "corpus.npz"),
             *adaptive, "--compile-only", "--artifact", str(tmp_path / "adaptive"))
    jit = _jit(setup, adaptive, "--steps", "10", "--checkpoint", str(tmp_path / "jit.npz"))
    art = _trainer(tmp_path, "adaptive", "--steps", "10", "--checkpoint",
                   str(tmp_path / "art.npz"), corpus=str(setup / "corpus.npz"))
    damping = re.compile(r"^step\s+\d+: K-FAC damping: .*$|^step .*damping .*rho.*$", re.M)
    lines = [re.sub(r"tokens/s.*ms/step\s+[0-9.]+", "", line)
             for line in damping.findall(art.stdout)]
    assert len(lines) >= 5 and "K-FAC adaptive damping: 5 adaptation(s)" in art.stdout
    assert lines == [re.sub(r"tokens/s.*ms/step\s+[0-9.]+", "", line)
                     for line in damping.findall(jit.stdout)]
    _same_state(tmp_path / "jit.npz", tmp_path / "art.npz")


def _fails(setup, artifact, *args, code=1, corpus="corpus.npz"):
    proc = _trainer(setup, artifact, *args, check=False, corpus=corpus)
    assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Segmentation" not in proc.stderr
    assert "loss" not in proc.stdout
    return proc.stderr


def _copy(setup, tmp_path, name="adamw"):
    target = tmp_path / name
    shutil.copytree(setup / name, target)
    return target


def test_bad_artifacts_are_refused_before_training(setup, tmp_path):
    def broken(edit):
        art = _copy(setup, tmp_path / f"case{len(list(tmp_path.iterdir()))}")
        edit(art)
        return _fails(tmp_path, art, corpus=str(setup / "corpus.npz"))

    def manifest(edit):
        def change(art):
            data = json.loads((art / "manifest.json").read_text())
            edit(data)
            (art / "manifest.json").write_text(json.dumps(data))
        return change

    err = broken(lambda art: (art / "manifest.json").unlink())
    assert "not a training artifact" in err and "--compile-only" in err
    err = broken(lambda art: (art / "manifest.json").write_text("{"))
    assert "not a pf training artifact manifest" in err
    err = broken(manifest(lambda m: m.update(format_version=99)))
    assert "format 99; this trainer reads format 1" in err
    err = broken(manifest(lambda m: m.update(pf_version="0.0.1")))
    assert "compiled by pf 0.0.1; this trainer is pf " in err
    err = broken(manifest(lambda m: m.pop("pf_version")))
    assert "compiled by an earlier pf" in err
    err = broken(manifest(lambda m: m.update(runtime_abi=m["runtime_abi"] + 1)))
    assert "compiled for runtime ABI" in err
    # A single-process manifest claiming ranks: it lacks what they need.
    err = broken(manifest(lambda m: m.update(ranks=2)))
    assert "manifest.json" in err and "pipeline" in err
    err = broken(manifest(lambda m: m.pop("optimizer")))
    assert "manifest.json" in err and "optimizer" in err
    err = broken(lambda art: (art / "step.so").unlink())
    assert "step.so is missing" in err
    err = broken(lambda art: (art / "step.so").write_bytes((art / "step.so").read_bytes()[:4096]))
    assert "step.so has 4096 bytes, the manifest says" in err
    err = broken(lambda art: (art / "eval.weights").write_bytes(b"\0" * 64))
    assert "eval.weights has 64 bytes" in err
    def flip(art):  # one byte of the initial state, the size unchanged
        data = bytearray((art / "step.weights").read_bytes())
        data[len(data) // 2] ^= 1
        (art / "step.weights").write_bytes(bytes(data))
    err = broken(flip)
    assert "step.weights does not match its SHA-256" in err
    # Another compilation's library of the very same size and hash (the
    # manifest edited to agree): its fingerprint names it.
    err = broken(manifest(lambda m: m["step"].update(fingerprint="12345")))
    assert "not the library its manifest describes" in err
    # A library whose size and hash the manifest agrees with but that is cut
    # short.
    def truncated(art):
        lib = (art / "step.so").read_bytes()[:4096]
        (art / "step.so").write_bytes(lib)
        data = json.loads((art / "manifest.json").read_text())
        data["step"].update(library_bytes=4096, library_sha256=hashlib.sha256(lib).hexdigest())
        (art / "manifest.json").write_text(json.dumps(data))
    err = broken(truncated)
    assert "cannot load" in err and "truncated" in err


def test_trainer_options(setup, tmp_path):
    err = _fails(setup, "adamw", corpus="short.npz")
    assert "its sequences have 16 tokens" in err and "compiled for 24" in err
    err = _fails(setup, "adamw", "--batch", "16", code=2)
    assert "unknown option --batch" in err and "--compile-only" in err
    assert "needs a value" in _fails(setup, "adamw", "--steps", code=2)
    assert "'x' is not an integer" in _fails(setup, "adamw", "--steps", "x")
    assert "must be positive" in _fails(setup, "adamw", "--steps", "0")
    assert "unknown --device 'tpu'" in _fails(setup, "adamw", "--device", "tpu", code=2)
    corpus = str(setup / "corpus.npz")
    err = _fails(setup, "adamw", "--checkpoint", corpus)
    assert "--corpus" in err
    # The run options' defaults are the compilation's: its --lr shows.
    proc = _trainer(setup, "kfac", "--steps", "1")
    assert "lr 5.00E-03" in proc.stdout  # 0.05 warmed up over 10 steps
    assert "--eval-every" in run_tool("pf-trainer", "--help").stdout
    # Started under mpirun as several ranks: each would train alone.
    import os
    import subprocess

    from pipefisher.tools import tool
    proc = subprocess.run([str(tool("pf-trainer")), str(setup / "adamw"), "--corpus", corpus],
                          capture_output=True, text=True,
                          env=dict(os.environ, OMPI_COMM_WORLD_SIZE="2"))
    assert proc.returncode == 1 and "started as one of 2 MPI ranks" in proc.stderr


def test_compile_only_options(setup, tmp_path):
    def fails(*args):
        proc = run_tool("pf-train", str(setup / "model.onnx"), "--corpus",
                        str(setup / "corpus.npz"), "--batch", "8", *args, check=False)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        return proc.stderr
    assert "go together" in fails("--compile-only")
    assert "go together" in fails("--artifact", str(tmp_path / "a"))
    assert "give stages=D" in fails(
        "--compile-only", "--artifact", str(tmp_path / "p"), "--pipeline", "schedule=1f1b")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert "--artifact" in fails("--compile-only", "--artifact", str(blocker / "a"))


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_trainer_after_a_checkpoint(setup, tmp_path, sig):
    """As pf-train: SIGINT or SIGTERM during training writes the checkpoint
    after the step in flight and ends with exit status 130."""
    import signal
    import subprocess

    from pipefisher.tools import tool

    checkpoint = tmp_path / "stopped.npz"
    proc = subprocess.Popen([str(tool("pf-trainer")), str(setup / "adamw"), "--corpus",
                             str(setup / "corpus.npz"), "--steps", "100000", "--log-every", "1",
                             "--checkpoint", str(checkpoint)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("step") and int(line.split()[1]) >= 3:
            break
    proc.send_signal(getattr(signal, sig))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "checkpoint after step" in out
    with np.load(checkpoint) as data:
        stopped = int(data["meta/step"])
    assert 3 <= stopped < 100000
    # pf-train takes the stopped run's checkpoint up.
    resumed = _jit(setup, ADAMW, "--steps", str(stopped + 1), "--resume", str(checkpoint))
    assert f"resumed from {checkpoint} after step {stopped}" in resumed.stdout
