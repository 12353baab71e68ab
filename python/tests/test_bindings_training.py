"""Training steps through the bindings: one K-FAC step against pf-run
--training-step and against the NumPy reference of test_kfac, the updated
weights, and masked-LM training with pipefisher.Trainer / train (the loss falls,
micro-batches follow the whole batch, records per step)."""

from __future__ import annotations

import numpy as np
import pytest

import bindings_support  # noqa: F401  (skips without the extension)
import pipefisher as pf
from pipefisher import make_bert_model, save_model
from pipefisher.corpus import make_corpus
from pipefisher.tools import run_tool
from test_kfac import IN, OUT, ROWS, _module as kfac_module

BATCH, SEQ = 4, 8


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bind-train")
    corpus = make_corpus(sequences=600, seq_len=24, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=1, seed=2),
               tmp / "model.onnx")
    save_model(make_bert_model("tiny", vocab_size=100, num_hidden_layers=2, seed=4),
               tmp / "step.onnx")
    return tmp


def _step_inputs(vocab: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    labels = np.full((BATCH, SEQ), -100, np.int64)
    labels[:, ::3] = rng.integers(5, vocab, size=labels[:, ::3].shape)
    return {"input_ids": rng.integers(5, vocab, size=(BATCH, SEQ)).astype(np.int64),
            "token_type_ids": np.zeros((BATCH, SEQ), np.int64),
            "attention_mask": np.ones((BATCH, SEQ), np.int64),
            "labels": labels, "step": np.int64(1), "lr": np.float64(1e-3)}


@pytest.mark.parametrize("micro_batches", [1, 2])
def test_kfac_step_equals_pf_run(setup, tmp_path, micro_batches):
    """One training step with K-FAC: loss, gradients and K-FAC factors as pf-run
    --training-step --kfac writes them (same pipeline, same inputs)."""
    inputs = _step_inputs(100)
    np.savez(tmp_path / "in.npz", **inputs)
    run_tool("pf-run", str(setup / "step.onnx"), "--dim", f"batch={BATCH}", "--dim",
             f"sequence={SEQ}", "--training-step", "--kfac", "--micro-batches",
             str(micro_batches), "--inputs", str(tmp_path / "in.npz"), "--outputs",
             str(tmp_path / "out.npz"))
    expected = dict(np.load(tmp_path / "out.npz"))

    module = pf.import_onnx(setup / "step.onnx",
                            dims={"batch": BATCH // micro_batches, "sequence": SEQ})
    module.run_pipeline(f"pf-training{{kfac=true micro-batches={micro_batches} "
                        "keep-gradients=true export-factors=true}")
    exe = pf.compile(module)
    assert {s.name for s in exe.inputs} == set(inputs)
    got = exe.run(inputs)
    assert set(got) == set(expected)
    assert any(k.startswith("kfac/A/") for k in got) and any(k.startswith("grad/") for k in got)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=2e-4, atol=1e-5, err_msg=name)
    assert 3.0 < float(got["loss"]) < 6.0  # about ln(100) for an untrained model


def test_kfac_pieces_match_numpy():
    """test_kfac's single linear layer through the bindings: factors, damped
    inverses and preconditioned gradients against NumPy."""
    rng = np.random.default_rng(7)
    w = rng.normal(size=(OUT, IN)).astype(np.float32)
    b = rng.normal(size=OUT).astype(np.float32)
    x = rng.normal(size=(ROWS, IN)).astype(np.float32)
    probe = rng.normal(size=(ROWS, OUT)).astype(np.float32)
    damping = 1e-2
    module = pf.parse_module(kfac_module(w, b))
    module.run_pipeline("pf-insert-kfac,pf-build-gradients,"
                        f"pf-kfac-precondition{{damping={damping} kl-clip=0 graft=none "
                        "export-factors=true}")
    got = pf.compile(module).run({"x": x, "probe": probe, "step": np.int64(1)})
    name = "bert.encoder.layer.0.dense.weight"
    x64, g = x.astype(np.float64), probe.astype(np.float64)
    A = x64.T @ x64 / ROWS
    B = ROWS**2 * (g.T @ g) / ROWS
    pi = np.sqrt((np.trace(A) / IN) / (np.trace(B) / OUT))
    A_inv = np.linalg.inv(A + np.sqrt(damping) * pi * np.eye(IN))
    B_inv = np.linalg.inv(B + np.sqrt(damping) / pi * np.eye(OUT))
    np.testing.assert_allclose(got[f"kfac/A/{name}"], A, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[f"kfac/B/{name}"], B, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[f"grad/{name}"], B_inv @ (g.T @ x64) @ A_inv,
                               rtol=1e-4, atol=1e-6)
    assert int(got["kfac/issues"]) == 0


def test_step_updates_its_own_weights(setup):
    """A training step owns a copy of the weights: parameter_arrays shows it
    change with each run, and the SGD update is lr times the gradient."""
    module = pf.import_onnx(setup / "step.onnx", dims={"batch": BATCH, "sequence": SEQ})
    module.run_pipeline("pf-training{optimizer=sgd momentum=0 weight-decay=0 clip-norm=0 "
                        "keep-gradients=true}")
    exe = pf.compile(module)
    name = "cls.predictions.bias"
    before = exe.parameter_arrays()[name].copy()
    inputs = _step_inputs(100)
    out = exe.run(inputs)
    after = exe.parameter_arrays()[name]
    np.testing.assert_allclose(before - after, 1e-3 * out[f"grad/{name}"], rtol=1e-4, atol=1e-9)
    # Writing into the views sets the weights: back to the start, same loss.
    first_loss = float(out["loss"])
    exe.parameter_arrays()[name][...] = before
    for key, value in pf.compile(module).parameter_arrays().items():
        exe.parameter_arrays()[key][...] = value
    assert float(exe.run(inputs)["loss"]) == pytest.approx(first_loss, rel=1e-6)


@pytest.mark.parametrize("kfac", [False, True])
def test_train_loss_goes_down(setup, kfac):
    records = list(pf.train(setup / "model.onnx", setup / "corpus.npz", steps=60, batch=8,
                            lr=3e-3, warmup=5, kfac=kfac, num_threads=2,
                            options={"kfac-refresh": 5} if kfac else None))
    assert [r.step for r in records] == list(range(1, 61))
    assert all(isinstance(r, pf.StepRecord) and r.time > 0 for r in records)
    assert records[4].lr == pytest.approx(3e-3) and records[0].lr == pytest.approx(6e-4)
    assert records[-1].lr == pytest.approx(3e-3 / 55)
    losses = np.array([r.loss for r in records])
    # Uniform guessing over the vocabulary is ln(84) = 4.43; the grammar is
    # learnable well below that (the pf-train test's bound).
    assert losses[:5].mean() > 3.5
    assert losses[-10:].mean() < losses[:5].mean() - 0.8, losses


def test_micro_batches_follow_the_whole_batch(setup):
    corpus = np.load(setup / "corpus.npz")
    tokens = corpus["tokens"]
    vocab = int(corpus["vocab_size"]) if "vocab_size" in corpus else int(tokens.max()) + 1
    common = dict(steps=6, batch=8, lr=3e-3, warmup=2, kfac=True, num_threads=2,
                  options={"kfac-refresh": 2}, vocab_size=vocab)
    whole = [r.loss for r in pf.train(setup / "model.onnx", tokens, **common)]
    split = [r.loss for r in pf.train(setup / "model.onnx", tokens, micro_batches=4, **common)]
    assert len(whole) == len(split) == 6
    np.testing.assert_allclose(split, whole, rtol=2e-4)


def test_trainer_errors(setup):
    with pytest.raises(ValueError, match="micro_batches"):
        pf.Trainer(setup / "model.onnx", batch=8, seq_len=24, micro_batches=3)
    with pytest.raises(ValueError, match="seq_len"):
        pf.Trainer(setup / "model.onnx", batch=8)
    with pytest.raises(pf.PipelineError, match="optimizer"):
        pf.Trainer(setup / "model.onnx", batch=8, seq_len=24, optimizer="adagrad")
    with pytest.raises(pf.PFError):
        list(pf.train(setup / "model.onnx", setup / "missing.npz", steps=1))


def test_device_buffers_step_and_parameter_copies(setup):
    """compile(device_buffers=True) takes device="cuda"'s path on the CPU:
    the runs update the backend's copy of the weights (the same bits as the
    host path), parameter_arrays() shows them after copy_parameters_to_host(),
    and written arrays take effect after copy_parameters_to_device()."""
    module = pf.import_onnx(setup / "step.onnx", dims={"batch": BATCH, "sequence": SEQ})
    module.run_pipeline("pf-training{kfac=true keep-gradients=true}")
    host, dev = pf.compile(module), pf.compile(module, device_buffers=True)
    inputs = _step_inputs(100)
    start = {k: v.copy() for k, v in dev.parameter_arrays().items()}
    for step in (1, 2):
        inputs["step"] = np.int64(step)
        a, b = host.run(inputs), dev.run(inputs)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    # The host copies still hold the compiled weights until copied back.
    name = "cls.predictions.bias"
    np.testing.assert_array_equal(dev.parameter_arrays()[name], start[name])
    dev.copy_parameters_to_host()
    for key, value in host.parameter_arrays().items():
        np.testing.assert_array_equal(dev.parameter_arrays()[key], value, err_msg=key)
    # Back to the start on both; the next run gives the first run's loss.
    for exe in (host, dev):
        for key, value in start.items():
            exe.parameter_arrays()[key][...] = value
    dev.copy_parameters_to_device()
    inputs["step"] = np.int64(1)
    assert float(dev.run(inputs)["loss"]) == float(host.run(inputs)["loss"])
    with pytest.raises(ValueError, match="device must be one of"):
        pf.compile(module, device="tpu")
    with pytest.raises(ValueError, match="gemm_precision must be one of"):
        pf.compile(module, gemm_precision="fp16")
