"""pf-train: the masked-LM loss falls, and a run resumed from a checkpoint
continues bit for bit."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.corpus import make_corpus
from pipefisher.tools import run_tool


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train")
    corpus = make_corpus(sequences=600, seq_len=24, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=1, seed=2),
               tmp / "model.onnx")
    return tmp


def _train(setup, *args, check=True):
    proc = run_tool("pf-train", str(setup / "model.onnx"), "--corpus", str(setup / "corpus.npz"),
                    "--batch", "8", "--num-threads", "2", *args, check=check)
    losses = [float(m) for m in re.findall(r"loss\s+([0-9.]+)", proc.stdout)]
    return proc, losses


@pytest.mark.parametrize("optimizer,lr", [("adamw", "3e-3"), ("lamb", "1e-2"), ("sgd", "0.1")])
def test_loss_goes_down(setup, optimizer, lr):
    _, losses = _train(setup, "--steps", "60", "--log-every", "10", "--optimizer", optimizer,
                       "--lr", lr, "--warmup", "5")
    assert len(losses) >= 6
    # Uniform guessing over the vocabulary is ln(84) = 4.43; the grammar is
    # learnable well below that.
    assert losses[0] > 3.5
    assert np.mean(losses[-3:]) < losses[0] - 0.8, losses


def _checkpoint(path):
    data = np.load(path)
    return {k: data[k] for k in data.files}


def test_resume_is_bitwise_identical(setup):
    straight = setup / "straight.npz"
    first = setup / "first.npz"
    resumed = setup / "resumed.npz"
    common = ("--lr", "2e-3", "--warmup", "2", "--log-every", "1")
    _train(setup, "--steps", "6", "--checkpoint", str(straight), *common)
    _train(setup, "--steps", "3", "--checkpoint", str(first), *common)
    proc, _ = _train(setup, "--steps", "6", "--resume", str(first), "--checkpoint", str(resumed),
                     *common)
    assert "resumed from" in proc.stdout and "after step 3" in proc.stdout
    a, b = _checkpoint(straight), _checkpoint(resumed)
    assert a.keys() == b.keys()
    assert int(b["meta/step"]) == 6
    # Optimizer state is in the checkpoint too.
    assert any(k.endswith(".exp_avg") for k in a)
    for key in a:
        assert np.array_equal(a[key], b[key]), key
    # ... and the run did change the weights.
    c = _checkpoint(first)
    assert any(not np.array_equal(a[k], c[k]) for k in a if k.startswith("param/"))


def test_bad_inputs(setup, tmp_path):
    proc = run_tool("pf-train", str(setup / "model.onnx"), "--corpus", str(tmp_path / "no.npz"),
                    check=False)
    assert proc.returncode != 0 and "no.npz" in proc.stderr
    proc = run_tool("pf-train", str(setup / "model.onnx"), "--corpus", str(setup / "corpus.npz"),
                    "--optimizer", "adagrad", "--steps", "1", check=False)
    assert proc.returncode != 0 and "optimizer must be sgd, adamw or lamb" in proc.stderr
    proc = run_tool("pf-train", str(setup / "model.onnx"), "--corpus", str(setup / "corpus.npz"),
                    "--resume", str(setup / "corpus.npz"), "--steps", "1", check=False)
    assert proc.returncode != 0 and "not a pf-train checkpoint" in proc.stderr
    proc = run_tool("pf-train", str(setup / "model.onnx"), "--corpus", str(setup / "corpus.npz"),
                    "--batch", "0", check=False)
    assert proc.returncode != 0 and "must be positive" in proc.stderr
    proc = run_tool("pf-train", str(setup / "model.onnx"), "--corpus", str(setup / "corpus.npz"),
                    "--batch", "8", "--micro-batches", "3", check=False)
    assert proc.returncode != 0 and "--micro-batches must be >= 1 and divide --batch (8)" \
        in proc.stderr


def test_outputs_never_replace_inputs_and_are_checked_first(setup, tmp_path):
    """An output over an input or over another output, a destination that is
    a directory or whose directory is missing: refused before the first step
    (no progress line), the input untouched (issue 39, classes 2 and 3)."""
    model, corpus = setup / "model.onnx", setup / "corpus.npz"
    before = corpus.read_bytes()
    link = tmp_path / "corpus-link.npz"
    link.symlink_to(corpus)
    cases = [
        (("--checkpoint", corpus), f"--checkpoint {corpus} is the --corpus file"),
        (("--checkpoint", link), f"--checkpoint {link} is the --corpus file"),
        (("--checkpoint", model), f"--checkpoint {model} is the model file"),
        (("--emit-step", tmp_path / "x", "--checkpoint", tmp_path / "x"),
         "--emit-step and --checkpoint name one file"),
        (("--checkpoint", tmp_path), f"--checkpoint {tmp_path} is a directory"),
        (("--checkpoint", tmp_path / "missing" / "c.npz"),
         f"--checkpoint {tmp_path / 'missing' / 'c.npz'}: cannot write into "
         f"{tmp_path / 'missing'}: No such file or directory"),
    ]
    for args, message in cases:
        proc, losses = _train(setup, "--steps", "2", "--log-every", "1", *map(str, args),
                              check=False)
        assert proc.returncode == 1, (args, proc.stdout)
        assert message in proc.stderr, (args, proc.stderr)
        assert losses == [], (args, proc.stdout)
    assert corpus.read_bytes() == before
    assert not list(tmp_path.glob(".pf-write-probe-*"))
    # A good destination is probed and left as it was: the run writes it.
    proc, losses = _train(setup, "--steps", "1", "--checkpoint", str(tmp_path / "ok.npz"))
    assert (tmp_path / "ok.npz").exists() and len(losses) == 1
    assert not list(tmp_path.glob(".pf-write-probe-*"))


def test_micro_batches_follow_the_whole_batch(setup):
    """Splitting each step's batch into micro-batches (gradients and K-FAC
    factors accumulated over them) trains like the whole batch: same losses,
    up to float rounding, step after step."""
    common = ("--steps", "8", "--log-every", "1", "--lr", "3e-3", "--warmup", "2", "--kfac",
              "--kfac-refresh", "2")
    _, whole = _train(setup, *common)
    _, split = _train(setup, "--micro-batches", "4", *common)
    assert len(whole) == len(split) == 8
    np.testing.assert_allclose(split, whole, rtol=2e-4)


def test_kfac_trains_and_resumes_bitwise(setup):
    _, losses = _train(setup, "--steps", "60", "--log-every", "10", "--lr", "3e-3",
                       "--warmup", "5", "--kfac", "--kfac-refresh", "5")
    assert np.mean(losses[-3:]) < losses[0] - 0.8, losses
    straight, first, resumed = (setup / f"kfac-{n}.npz" for n in ("straight", "first", "resumed"))
    common = ("--lr", "2e-3", "--warmup", "2", "--kfac", "--kfac-refresh", "2")
    _train(setup, "--steps", "5", "--checkpoint", str(straight), *common)
    _train(setup, "--steps", "3", "--checkpoint", str(first), *common)
    _train(setup, "--steps", "5", "--resume", str(first), "--checkpoint", str(resumed), *common)
    a, b = _checkpoint(straight), _checkpoint(resumed)
    # Factors and inverses are part of the state that is saved and restored.
    assert any(k.endswith(".kfac.A_inv") for k in a)
    for key in a:
        assert np.array_equal(a[key], b[key]), key


def _start_long_run(setup, checkpoint, *args):
    """pf-train for (practically) unbounded steps, its output piped."""
    import subprocess

    from pipefisher.tools import tool

    return subprocess.Popen([str(tool("pf-train")), str(setup / "model.onnx"), "--corpus",
                             str(setup / "corpus.npz"), "--batch", "8", "--steps", "100000",
                             "--checkpoint", str(checkpoint), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_ctrl_c_saves_a_checkpoint(setup, tmp_path, sig):
    import signal

    checkpoint = tmp_path / "interrupted.npz"
    proc = _start_long_run(setup, checkpoint, "--log-every", "1")
    # Wait for the first progress lines, then interrupt.
    for line in proc.stdout:
        if line.startswith("step") and int(line.split()[1]) >= 3:
            break
    proc.send_signal(getattr(signal, sig))
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "checkpoint after step" in out
    data = np.load(checkpoint)
    assert 3 <= int(data["meta/step"]) < 100000
    # Every float initializer (weight) of the model is saved with its shape,
    # and the saved values are trained ones (the interrupted run took at
    # least 3 steps).
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(setup / "model.onnx"))
    for init in model.graph.initializer:
        initial = numpy_helper.to_array(init)
        if initial.dtype != np.float32:
            continue
        key = "param/" + init.name
        assert key in data.files, key
        assert data[key].shape == initial.shape, key
        assert np.isfinite(data[key]).all(), key
    embedding = "bert.embeddings.word_embeddings.weight"
    initial = numpy_helper.to_array(
        next(i for i in model.graph.initializer if i.name == embedding))
    assert not np.array_equal(data["param/" + embedding], initial)


def test_a_signal_before_training_ends_the_run(setup, tmp_path):
    """Before the first step SIGTERM has its default effect (pf-train's
    watcher thread re-raises it): no checkpoint, no progress line."""
    import signal

    checkpoint = tmp_path / "never.npz"
    proc = _start_long_run(setup, checkpoint)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM, out
    assert not re.search(r"^step\s+\d", out, re.M)
    assert not checkpoint.exists()


def _evals(stdout):
    return [(int(step), float(loss))
            for step, loss in re.findall(r"eval\s+(\d+)\s+loss\s+([0-9.]+)", stdout)]


def test_held_out_evaluation(setup):
    """--eval-every prints the loss on the held-out sequences (fixed masks)
    before training, every N steps and after the last step; it falls as the
    model trains and is the same in two identical runs."""
    args = ("--steps", "30", "--log-every", "10", "--lr", "3e-3", "--warmup", "5",
            "--eval-every", "10", "--eval-sequences", "64")
    proc, _ = _train(setup, *args)
    evals = _evals(proc.stdout)
    assert [step for step, _ in evals] == [0, 10, 20, 30]
    assert "(64 held-out sequences)" in proc.stdout
    assert evals[-1][1] < evals[0][1] - 0.8, evals
    again, _ = _train(setup, *args)
    assert _evals(again.stdout) == evals


def test_resume_needs_the_same_hold_out(setup, tmp_path):
    checkpoint = tmp_path / "held.npz"
    _train(setup, "--steps", "2", "--eval-every", "2", "--eval-sequences", "64", "--checkpoint",
           str(checkpoint))
    proc = run_tool("pf-train", str(setup / "model.onnx"), "--corpus", str(setup / "corpus.npz"),
                    "--batch", "8", "--steps", "4", "--resume", str(checkpoint), check=False)
    assert proc.returncode == 1
    assert "was trained on 536 corpus sequences, this run on 600" in proc.stderr


def test_held_out_evaluation_bad_options(setup):
    corpus = ("--corpus", str(setup / "corpus.npz"))
    proc = run_tool("pf-train", str(setup / "model.onnx"), *corpus, "--batch", "8",
                    "--eval-every", "5", "--eval-sequences", "4", check=False)
    assert proc.returncode == 1
    assert "--eval-sequences 4 must hold at least one batch (8)" in proc.stderr
    proc = run_tool("pf-train", str(setup / "model.onnx"), *corpus, "--batch", "8",
                    "--eval-every", "5", "--eval-sequences", "600", check=False)
    assert proc.returncode == 1 and "of the corpus' 600 sequences to train on" in proc.stderr
    proc = run_tool("pf-train", str(setup / "model.onnx"), *corpus, "--eval-every", "-1",
                    check=False)
    assert proc.returncode == 1 and "--eval-every must be >= 0" in proc.stderr


def test_device_buffers_train_evaluate_and_resume_like_the_host_path(setup):
    """--device-buffers runs pf-train's --device cuda path on the CPU backend:
    the step's parameters and optimizer and K-FAC state live in backend
    memory, copied back for checkpoints and evaluation and in after a resume.
    Losses, held-out losses and checkpoints equal the host path's bits."""
    common = ("--steps", "6", "--log-every", "1", "--lr", "2e-3", "--warmup", "2", "--kfac",
              "--kfac-refresh", "2", "--eval-every", "3", "--eval-sequences", "64")
    host_ckpt, dev_ckpt, first, resumed = (
        setup / f"dev-{n}.npz" for n in ("host", "device", "first", "resumed"))
    host, host_losses = _train(setup, *common, "--checkpoint", str(host_ckpt))
    dev, dev_losses = _train(setup, *common, "--checkpoint", str(dev_ckpt), "--device-buffers")
    assert dev_losses == host_losses and len(dev_losses) >= 6
    assert _evals(dev.stdout) == _evals(host.stdout) and len(_evals(host.stdout)) == 3
    a, b = _checkpoint(host_ckpt), _checkpoint(dev_ckpt)
    assert any(k.endswith(".kfac.A_inv") for k in a)
    for key in a:
        assert np.array_equal(a[key], b[key]), key
    # Stop after 3 steps and resume on the device path: the state goes back in.
    _train(setup, *common[:1], "3", *common[2:], "--checkpoint", str(first), "--device-buffers")
    _train(setup, *common, "--resume", str(first), "--checkpoint", str(resumed),
           "--device-buffers")
    c = _checkpoint(resumed)
    for key in a:
        assert np.array_equal(a[key], c[key]), key


def test_kfac_interval_schedule_step(setup):
    """--kfac-interval-schedule step: after the refresh warm-up both
    intervals double every 2 steps (growth 2, every 2, max 4). Warm-up 2,
    K = F = 1: steps 1-4 refresh the inverses (warm-up, then K 1), K is 2 at
    steps 5-6 (step 5 is 1 after step 4: no; 6: yes) and 4 from step 7 (7, 8,
    9: no; 10: yes). The inverses and factors in the checkpoints change
    exactly at those steps; the progress line shows the intervals."""
    # A constant learning rate: runs of different lengths share their steps.
    args = ("--lr", "2e-3", "--warmup", "2", "--schedule", "constant", "--kfac",
            "--kfac-refresh", "1", "--kfac-refresh-warmup", "2", "--kfac-interval-schedule", "step",
            "--kfac-interval-growth", "2", "--kfac-interval-every", "2",
            "--kfac-interval-max", "4", "--log-every", "1")
    inverses = {}
    for steps in range(4, 11):
        path = setup / f"interval-{steps}.npz"
        proc, _ = _train(setup, "--steps", str(steps), "--checkpoint", str(path), *args)
        state = _checkpoint(path)
        inverses[steps] = {k: v for k, v in state.items()
                           if k.endswith(".kfac.A_inv") or k.endswith(".kfac.A")}
    assert inverses[4]

    def changed(suffix):
        return [t for t in range(5, 11)
                if any(not np.array_equal(inverses[t][k], inverses[t - 1][k])
                       for k in inverses[t] if k.endswith(suffix))]
    assert changed(".kfac.A_inv") == [6, 10]
    # The factor updates follow the same schedule (F = 1 grows alike).
    assert changed(".kfac.A") == [6, 10]
    lines = {int(m.group(1)): m.group(2) for m in
             re.finditer(r"step\s+(\d+)\s.*intervals (F \d+ K \d+)", proc.stdout)}
    assert lines[2] == "F 1 K 1" and lines[4] == "F 1 K 1"
    assert lines[5] == "F 2 K 2" and lines[7] == "F 4 K 4" and lines[10] == "F 4 K 4"


def test_kfac_interval_schedule_errors(setup):
    def fails(*args):
        proc = run_tool("pf-train", str(setup / "model.onnx"), "--corpus",
                        str(setup / "corpus.npz"), "--batch", "8", "--steps", "1", *args,
                        check=False)
        assert proc.returncode != 0 and "Segmentation" not in proc.stderr
        return proc.stderr
    assert "needs --kfac" in fails("--kfac-interval-schedule", "step")
    assert "not with --kfac-window" in fails("--kfac", "--kfac-window", "2",
                                             "--kfac-interval-schedule", "step")
    assert "must be >= 1" in fails("--kfac", "--kfac-interval-schedule", "step",
                                   "--kfac-interval-growth", "0")


def test_sequences_longer_than_the_models_positions_are_named(setup, tmp_path):
    """A corpus of 600-token sequences for a model of 512 positions: the
    importer sees shapes that do not broadcast; pf-train says why."""
    corpus = make_corpus(8, 600)
    corpus.pop("vocab")
    np.savez(tmp_path / "long.npz", **corpus)
    proc = run_tool("pf-train", str(setup / "model.onnx"), "--corpus", str(tmp_path / "long.npz"),
                    "--batch", "4", "--steps", "1", check=False)
    assert proc.returncode == 1, proc.stderr
    assert ("the corpus' sequences have 600 tokens but the model has 512 positions "
            "('bert.embeddings.position_embeddings.weight' is 512x") in proc.stderr, proc.stderr
    assert "build the corpus with --seq-len 512 or less" in proc.stderr
