"""K-FAC pieces of the training step against a NumPy reference: factors A and B,
pi-damping, the damped inverses and the preconditioned gradients of one linear
layer, computed by the compiled step (pf-insert-kfac, pf-build-gradients,
pf-kfac-precondition) and returned by pf-run."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipefisher.tools import run_tool

ROWS, IN, OUT = 6, 4, 5


def _dense(array: np.ndarray) -> str:
    shape = "x".join(map(str, array.shape))
    raw = np.ascontiguousarray(array, dtype="<f4").tobytes().hex().upper()
    return f'dense<"0x{raw}"> : tensor<{shape}xf32>'


def _module(w: np.ndarray, b: np.ndarray) -> str:
    return f'''
pf.param @"bert.encoder.layer.0.dense.weight" : tensor<{OUT}x{IN}xf32> = {_dense(w)}
pf.param @"bert.encoder.layer.0.dense.bias" : tensor<{OUT}xf32> = {_dense(b)}
func.func @main(%x: tensor<{ROWS}x{IN}xf32> {{pf.name = "x"}},
                %probe: tensor<{ROWS}x{OUT}xf32> {{pf.name = "probe"}})
    -> (tensor<f32> {{pf.name = "objective"}}) {{
  %w = pf.param_ref @"bert.encoder.layer.0.dense.weight" : tensor<{OUT}x{IN}xf32>
  %b = pf.param_ref @"bert.encoder.layer.0.dense.bias" : tensor<{OUT}xf32>
  %y = pf.linear %x, %w, %b {{transpose_weight}} : (tensor<{ROWS}x{IN}xf32>, tensor<{OUT}x{IN}xf32>, tensor<{OUT}xf32>) -> tensor<{ROWS}x{OUT}xf32>
  %p = pf.mul %y, %probe : (tensor<{ROWS}x{OUT}xf32>, tensor<{ROWS}x{OUT}xf32>) -> tensor<{ROWS}x{OUT}xf32>
  %s = pf.reduce_sum %p {{keepdims = false}} : (tensor<{ROWS}x{OUT}xf32>) -> tensor<f32>
  return %s : tensor<f32>
}}
'''


def _preconditioned(x, probe, damping):
    """NumPy, float64: the layer's gradients and their π-damped K-FAC
    preconditioning at step 1 (objective sum(y * probe), so dObj/dy = probe)."""
    x64, g = x.astype(np.float64), probe.astype(np.float64)
    A = x64.T @ x64 / ROWS
    B = ROWS * (g.T @ g)
    pi = np.sqrt((np.trace(A) / IN) / (np.trace(B) / OUT))
    A_inv = np.linalg.inv(A + np.sqrt(damping) * pi * np.eye(IN))
    B_inv = np.linalg.inv(B + np.sqrt(damping) / pi * np.eye(OUT))
    grad_w, grad_b = g.T @ x64, g.sum(axis=0)
    return grad_w, grad_b, B_inv @ grad_w @ A_inv, B_inv @ grad_b


@pytest.mark.parametrize("damping", [1e-2, 1.0])
def test_kfac_step_matches_numpy(tmp_path, damping):
    rng = np.random.default_rng(7)
    w = rng.normal(size=(OUT, IN)).astype(np.float32)
    b = rng.normal(size=OUT).astype(np.float32)
    x = rng.normal(size=(ROWS, IN)).astype(np.float32)
    probe = rng.normal(size=(ROWS, OUT)).astype(np.float32)
    (tmp_path / "m.mlir").write_text(_module(w, b))
    run_tool("pf-opt", str(tmp_path / "m.mlir"), "--pf-insert-kfac", "--pf-build-gradients",
             f"--pf-kfac-precondition=damping={damping} kl-clip=0 graft=none export-factors=true",
             "-o", str(tmp_path / "step.mlir"))
    np.savez(tmp_path / "in.npz", x=x, probe=probe, step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    got = dict(np.load(tmp_path / "out.npz"))
    name = "bert.encoder.layer.0.dense.weight"

    # Reference, in float64. The objective is sum(y * probe): g = dObj/dy = probe.
    x64, g = x.astype(np.float64), probe.astype(np.float64)
    A = x64.T @ x64 / ROWS
    B = ROWS**2 * (g.T @ g) / ROWS  # scaled by rows^2 (gradients of a mean)
    pi = np.sqrt((np.trace(A) / IN) / (np.trace(B) / OUT))
    A_inv = np.linalg.inv(A + np.sqrt(damping) * pi * np.eye(IN))
    B_inv = np.linalg.inv(B + np.sqrt(damping) / pi * np.eye(OUT))
    grad_w = g.T @ x64
    grad_b = g.sum(axis=0)

    np.testing.assert_allclose(got[f"kfac/A/{name}"], A, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[f"kfac/B/{name}"], B, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[f"kfac/A_inv/{name}"], A_inv, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[f"kfac/B_inv/{name}"], B_inv, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[f"grad/{name}"], B_inv @ grad_w @ A_inv, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["grad/bert.encoder.layer.0.dense.bias"], B_inv @ grad_b,
                               rtol=1e-4, atol=1e-6)
    assert int(got["kfac/issues"]) == 0
    np.testing.assert_allclose(got["objective"], ((x64 @ w.T + b) * g).sum(), rtol=1e-5)


def test_singular_factor_falls_back(tmp_path):
    """A zero input makes A singular: with no damping the refresh must raise it
    (outcome 1), never fail the step."""
    w = np.ones((OUT, IN), np.float32)
    b = np.zeros(OUT, np.float32)
    (tmp_path / "m.mlir").write_text(_module(w, b))
    run_tool("pf-opt", str(tmp_path / "m.mlir"), "--pf-insert-kfac", "--pf-build-gradients",
             "--pf-kfac-precondition=damping=0 kl-clip=0 export-factors=true", "-o",
             str(tmp_path / "step.mlir"))
    np.savez(tmp_path / "in.npz", x=np.zeros((ROWS, IN), np.float32),
             probe=np.ones((ROWS, OUT), np.float32), step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    got = dict(np.load(tmp_path / "out.npz"))
    assert int(got["kfac/issues"]) >= 1
    assert np.all(np.isfinite(got["grad/bert.encoder.layer.0.dense.weight"]))


@pytest.mark.parametrize("max_norm", [1e-3, 1e6])
def test_gradient_clipping(tmp_path, max_norm):
    """pf-clip-gradients scales all gradients together to the norm."""
    rng = np.random.default_rng(3)
    w = rng.normal(size=(OUT, IN)).astype(np.float32)
    b = rng.normal(size=OUT).astype(np.float32)
    x = rng.normal(size=(ROWS, IN)).astype(np.float32)
    probe = rng.normal(size=(ROWS, OUT)).astype(np.float32)
    (tmp_path / "m.mlir").write_text(_module(w, b))
    run_tool("pf-opt", str(tmp_path / "m.mlir"), "--pf-build-gradients",
             f"--pf-clip-gradients=max-norm={max_norm}",
             "--pf-add-optimizer=optimizer=sgd momentum=0 keep-gradients=true",
             "-o", str(tmp_path / "step.mlir"))
    np.savez(tmp_path / "in.npz", x=x, probe=probe, lr=np.float64(0.0), step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    got = dict(np.load(tmp_path / "out.npz"))
    grad_w = probe.astype(np.float64).T @ x
    grad_b = probe.astype(np.float64).sum(axis=0)
    norm = np.sqrt((grad_w**2).sum() + (grad_b**2).sum())
    scale = min(1.0, max_norm / (norm + 1e-6))
    np.testing.assert_allclose(got["grad/bert.encoder.layer.0.dense.weight"], grad_w * scale,
                               rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(got["grad/bert.encoder.layer.0.dense.bias"], grad_b * scale,
                               rtol=1e-4, atol=1e-9)


def test_bias_column_preconditions_jointly(tmp_path):
    rng = np.random.default_rng(11)
    w = rng.normal(size=(OUT, IN)).astype(np.float32)
    b = rng.normal(size=OUT).astype(np.float32)
    x = rng.normal(size=(ROWS, IN)).astype(np.float32)
    probe = rng.normal(size=(ROWS, OUT)).astype(np.float32)
    damping = 0.05
    (tmp_path / "m.mlir").write_text(_module(w, b))
    run_tool("pf-opt", str(tmp_path / "m.mlir"), "--pf-insert-kfac=bias-column=true",
             "--pf-build-gradients", f"--pf-kfac-precondition=damping={damping} kl-clip=0 graft=none",
             "-o", str(tmp_path / "step.mlir"))
    np.savez(tmp_path / "in.npz", x=x, probe=probe, step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    got = dict(np.load(tmp_path / "out.npz"))
    x1 = np.hstack([x.astype(np.float64), np.ones((ROWS, 1))])
    g = probe.astype(np.float64)
    A = x1.T @ x1 / ROWS
    B = ROWS * (g.T @ g)
    pi = np.sqrt((np.trace(A) / (IN + 1)) / (np.trace(B) / OUT))
    A_inv = np.linalg.inv(A + np.sqrt(damping) * pi * np.eye(IN + 1))
    B_inv = np.linalg.inv(B + np.sqrt(damping) / pi * np.eye(OUT))
    joint = B_inv @ np.hstack([g.T @ x, g.sum(axis=0)[:, None]]) @ A_inv
    np.testing.assert_allclose(got["grad/bert.encoder.layer.0.dense.weight"], joint[:, :IN],
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["grad/bert.encoder.layer.0.dense.bias"], joint[:, IN],
                               rtol=1e-4, atol=1e-6)


def test_pf_run_training_step_outputs(tmp_path):
    """pf-run --training-step --kfac runs one step of a BERT model and writes the
    loss, every parameter gradient and each K-FAC layer's factors."""
    from pipefisher import make_bert_model, save_model
    from pipefisher.sample_inputs import make_inputs

    save_model(make_bert_model("tiny", vocab_size=50, num_hidden_layers=1), tmp_path / "m.onnx")
    inputs = make_inputs(2, 8, vocab=50)
    labels = np.where(np.arange(8) % 3 == 0, inputs["input_ids"], -100).astype(np.int64)
    np.savez(tmp_path / "in.npz", **inputs, labels=labels, lr=np.float64(1e-3), step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "m.onnx"), "--dim", "batch=2", "--dim", "sequence=8",
             "--training-step", "--kfac", "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    got = dict(np.load(tmp_path / "out.npz"))
    assert 0 < float(got["loss"]) < 10
    query = "bert.encoder.layer.0.attention.self.query.weight"
    assert got[f"grad/{query}"].shape == (128, 128)
    assert got[f"kfac/A/{query}"].shape == (128, 128)
    assert got[f"kfac/B/{query}"].shape == (128, 128)
    # 6 K-FAC layers in the block, each with A, B and both inverses.
    assert sum(k.startswith("kfac/A/") for k in got) == 6
    assert np.allclose(got[f"kfac/A/{query}"], got[f"kfac/A/{query}"].T)
    assert "grad/bert.embeddings.word_embeddings.weight" in got


@pytest.mark.parametrize("kappa", [1e-6, 1e6])
def test_kl_clipping(tmp_path, kappa):
    """kl-clip scales every preconditioned update by
    min(1, sqrt(kappa / (lr^2 * sum <update, gradient>)))."""
    rng = np.random.default_rng(5)
    w = rng.normal(size=(OUT, IN)).astype(np.float32)
    b = rng.normal(size=OUT).astype(np.float32)
    x = rng.normal(size=(ROWS, IN)).astype(np.float32)
    probe = rng.normal(size=(ROWS, OUT)).astype(np.float32)
    damping, lr = 0.1, 0.5
    (tmp_path / "m.mlir").write_text(_module(w, b))
    run_tool("pf-opt", str(tmp_path / "m.mlir"), "--pf-insert-kfac", "--pf-build-gradients",
             f"--pf-kfac-precondition=damping={damping} kl-clip={kappa} graft=none",
             "-o", str(tmp_path / "step.mlir"))
    np.savez(tmp_path / "in.npz", x=x, probe=probe, step=np.int64(1), lr=np.float64(lr))
    run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    got = dict(np.load(tmp_path / "out.npz"))
    grad_w, grad_b, up_w, up_b = _preconditioned(x, probe, damping)
    total = (up_w * grad_w).sum() + (up_b * grad_b).sum()
    nu = min(1.0, np.sqrt(kappa / (lr * lr * total)))
    assert (nu < 1) == (kappa < 1)
    np.testing.assert_allclose(got["grad/bert.encoder.layer.0.dense.weight"], nu * up_w,
                               rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(got["grad/bert.encoder.layer.0.dense.bias"], nu * up_b,
                               rtol=1e-4, atol=1e-9)


@pytest.mark.parametrize("kappa", [0.0, 1e-6])
def test_graft_rescales_each_layer_to_its_gradient_norm(tmp_path, kappa):
    """graft=gradient (the pass's default): the layer's preconditioned update
    (weight and bias together) times ||gradient|| / ||update||, before the
    KL-clip, which then sees the grafted update."""
    rng = np.random.default_rng(9)
    w = rng.normal(size=(OUT, IN)).astype(np.float32)
    b = rng.normal(size=OUT).astype(np.float32)
    x = rng.normal(size=(ROWS, IN)).astype(np.float32)
    probe = rng.normal(size=(ROWS, OUT)).astype(np.float32)
    damping, lr = 0.1, 0.5
    (tmp_path / "m.mlir").write_text(_module(w, b))
    run_tool("pf-opt", str(tmp_path / "m.mlir"), "--pf-insert-kfac", "--pf-build-gradients",
             f"--pf-kfac-precondition=damping={damping} kl-clip={kappa}",
             "-o", str(tmp_path / "step.mlir"))
    assert "pf.kfac.graft" in (tmp_path / "step.mlir").read_text()
    inputs = {"x": x, "probe": probe, "step": np.int64(1)}
    if kappa:  # the KL-clip reads lr
        inputs["lr"] = np.float64(lr)
    np.savez(tmp_path / "in.npz", **inputs)
    run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    got = dict(np.load(tmp_path / "out.npz"))
    grad_w, grad_b, up_w, up_b = _preconditioned(x, probe, damping)
    scale = np.sqrt(((grad_w**2).sum() + (grad_b**2).sum()) / ((up_w**2).sum() + (up_b**2).sum()))
    assert abs(scale - 1) > 0.1  # the test would see a missing graft
    up_w, up_b = scale * up_w, scale * up_b
    if kappa:
        total = (up_w * grad_w).sum() + (up_b * grad_b).sum()
        nu = min(1.0, np.sqrt(kappa / (lr * lr * total)))
        assert nu < 1
        up_w, up_b = nu * up_w, nu * up_b
    np.testing.assert_allclose(got["grad/bert.encoder.layer.0.dense.weight"], up_w,
                               rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(got["grad/bert.encoder.layer.0.dense.bias"], up_b,
                               rtol=1e-4, atol=1e-9)
    got_norm = np.sqrt((got["grad/bert.encoder.layer.0.dense.weight"].astype(np.float64)**2).sum()
                       + (got["grad/bert.encoder.layer.0.dense.bias"].astype(np.float64)**2).sum())
    if not kappa:
        np.testing.assert_allclose(got_norm, np.sqrt((grad_w**2).sum() + (grad_b**2).sum()),
                                   rtol=1e-5)


def test_graft_leaves_a_zero_gradient_zero(tmp_path):
    """A zero gradient gives a zero update (0/0 is taken as scale 1, no NaN)."""
    w = np.ones((OUT, IN), np.float32)
    b = np.zeros(OUT, np.float32)
    (tmp_path / "m.mlir").write_text(_module(w, b))
    run_tool("pf-opt", str(tmp_path / "m.mlir"), "--pf-insert-kfac", "--pf-build-gradients",
             "--pf-kfac-precondition=damping=0.1 kl-clip=0 graft=gradient",
             "-o", str(tmp_path / "step.mlir"))
    np.savez(tmp_path / "in.npz", x=np.ones((ROWS, IN), np.float32),
             probe=np.zeros((ROWS, OUT), np.float32), step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    got = dict(np.load(tmp_path / "out.npz"))
    assert np.all(got["grad/bert.encoder.layer.0.dense.weight"] == 0)
    assert np.all(got["grad/bert.encoder.layer.0.dense.bias"] == 0)


# pf-run --training-step's defaults before they became pf-train's tuned ones.
OLD_STEP_DEFAULTS = ("--kfac-damping", "1e-3", "--kfac-decay", "0.95", "--kfac-refresh-warmup", "0",
                     "--kfac-kl-clip", "0", "--clip-norm", "0")


@pytest.mark.parametrize("step", [1, 2])
def test_micro_batches_accumulate_to_the_whole_batch(tmp_path, step):
    """pf-run --training-step --micro-batches M: the loss, every (preconditioned)
    gradient, the factors A and B (averaged over the micro-batches into one
    running-average update) and their inverses equal the whole batch's. One
    micro-batch has no counted token."""
    from pipefisher import make_bert_model, save_model
    from pipefisher.sample_inputs import make_inputs

    save_model(make_bert_model("tiny", vocab_size=50, num_hidden_layers=1), tmp_path / "m.onnx")
    inputs = make_inputs(8, 8, vocab=50)
    labels = np.where(np.arange(8) % 3 == 0, inputs["input_ids"], -100).astype(np.int64)
    labels[2:4] = -100
    np.savez(tmp_path / "in.npz", **inputs, labels=labels, lr=np.float64(1e-3),
             step=np.int64(step))
    got = {}
    for m in (1, 2, 4):
        # The defaults before the tuned ones (damping 1e-5 would loosen the
        # inverses' agreement to about its float32 conditioning).
        run_tool("pf-run", str(tmp_path / "m.onnx"), "--dim", "batch=8", "--dim", "sequence=8",
                 "--training-step", "--kfac", "--micro-batches", str(m), *OLD_STEP_DEFAULTS,
                 "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / f"out{m}.npz"))
        got[m] = dict(np.load(tmp_path / f"out{m}.npz"))
    whole = got[1]
    assert sum(k.startswith("kfac/B/") for k in whole) == 6
    for m in (2, 4):
        assert whole.keys() == got[m].keys()
        for key, value in whole.items():
            if "key.bias" in key:  # mathematically 0: softmax ignores a key bias
                continue
            scale = np.abs(value).max()
            np.testing.assert_allclose(got[m][key], value, rtol=0, atol=1e-5 * scale + 1e-30,
                                       err_msg=f"{key} with {m} micro-batches")


def test_micro_batches_bad_options(tmp_path):
    from pipefisher import make_bert_model, save_model

    save_model(make_bert_model("tiny", vocab_size=50, num_hidden_layers=1), tmp_path / "m.onnx")
    common = (str(tmp_path / "m.onnx"), "--dim", "batch=8", "--dim", "sequence=8")
    proc = run_tool("pf-run", *common, "--training-step", "--micro-batches", "3", check=False)
    assert proc.returncode == 1
    assert "--micro-batches 3 needs --dim batch=N with N a multiple of it" in proc.stderr
    proc = run_tool("pf-run", *common, "--micro-batches", "2", check=False)
    assert proc.returncode == 1 and "--micro-batches need --training-step" in proc.stderr
    proc = run_tool("pf-run", *common, "--training-step", "--micro-batches", "0", check=False)
    assert proc.returncode == 1 and "--micro-batches must be >= 1" in proc.stderr


def test_micro_batches_shrink_activation_memory(tmp_path):
    """Each micro-batch's backward follows its forward, so the buffer plan of
    the step needs about a micro-batch's activations, not the batch's."""
    import re

    from pipefisher import make_bert_model, save_model

    save_model(make_bert_model("tiny", vocab_size=50, num_hidden_layers=1), tmp_path / "m.onnx")
    arena = {}
    for m in (1, 4):
        proc = run_tool("pf-run", str(tmp_path / "m.onnx"), "--dim", "batch=16", "--dim",
                        "sequence=32", "--training-step", "--kfac", "--micro-batches", str(m),
                        "--describe")
        arena[m] = float(re.search(r"arena ([0-9.]+) MB", proc.stdout).group(1))
    assert arena[4] < 0.5 * arena[1], arena


def test_refresh_warmup(tmp_path):
    """refresh-warmup=2 refresh-every=3: the inverses are refreshed at steps 1
    and 2, then at 4, 7, ...; at step 3 they keep their (here: initial zero)
    values. Each pf-run starts from the module's state, so one step shows
    whether that step refreshed."""
    rng = np.random.default_rng(9)
    w = rng.normal(size=(OUT, IN)).astype(np.float32)
    b = rng.normal(size=OUT).astype(np.float32)
    (tmp_path / "m.mlir").write_text(_module(w, b))
    run_tool("pf-opt", str(tmp_path / "m.mlir"), "--pf-insert-kfac", "--pf-build-gradients",
             "--pf-kfac-precondition=refresh-every=3 refresh-warmup=2 kl-clip=0 export-factors=true",
             "-o", str(tmp_path / "step.mlir"))
    refreshed = {}
    for step in (1, 2, 3, 4, 5):
        np.savez(tmp_path / "in.npz", x=rng.normal(size=(ROWS, IN)).astype(np.float32),
                 probe=rng.normal(size=(ROWS, OUT)).astype(np.float32), step=np.int64(step))
        run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
                 "--outputs", str(tmp_path / "out.npz"))
        got = dict(np.load(tmp_path / "out.npz"))
        refreshed[step] = bool(np.any(got["kfac/A_inv/bert.encoder.layer.0.dense.weight"]))
    assert refreshed == {1: True, 2: True, 3: False, 4: True, 5: False}


@pytest.mark.parametrize("flags,grafted", [
    ((), True),                                      # AdamW: auto grafts
    (("--optimizer", "lamb"), True),
    (("--kfac-optimizer", "sgd"), False),            # SGD: auto leaves the length
    (("--optimizer", "sgd"), False),
    (("--optimizer", "sgd", "--kfac-optimizer", "adamw"), True),
    (("--kfac-optimizer", "sgd", "--kfac-graft", "gradient"), True),
    (("--kfac-graft", "none"), False),
])
def test_graft_auto_follows_the_kfac_layers_optimizer(tmp_path, flags, grafted):
    from pipefisher import make_bert_model, save_model
    from pipefisher.sample_inputs import make_inputs

    save_model(make_bert_model("tiny", vocab_size=50, num_hidden_layers=1), tmp_path / "m.onnx")
    inputs = make_inputs(2, 8, vocab=50)
    labels = np.where(np.arange(8) % 3 == 0, inputs["input_ids"], -100).astype(np.int64)
    np.savez(tmp_path / "in.npz", **inputs, labels=labels, lr=np.float64(1e-3), step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "m.onnx"), "--dim", "batch=2", "--dim", "sequence=8",
             "--training-step", "--kfac", *flags, "--inputs", str(tmp_path / "in.npz"),
             "--emit-step", str(tmp_path / "step.mlir"), "--outputs", str(tmp_path / "out.npz"))
    step = (tmp_path / "step.mlir").read_text()
    # One graft per K-FAC layer (6 linears in the block), or none.
    assert step.count("pf.kfac.graft") == (6 if grafted else 0)


def test_graft_bad_value_is_refused(tmp_path):
    proc = run_tool("pf-train", "m.onnx", "--kfac", "--kfac-graft", "adam", check=False)
    assert proc.returncode != 0 and "adam" in proc.stderr
    assert "gradient" in proc.stderr  # the valid values are listed


@pytest.mark.parametrize("basis", ["inverse", "eigen"])
def test_non_finite_factor_is_named_once(tmp_path, basis):
    """A factor that holds NaN (here from an edited checkpoint) makes its
    layer's refreshes keep the last good inverse; pf-train names the factor,
    the layer and the step once, and training goes on."""
    from pipefisher import make_bert_model, save_model
    from pipefisher.corpus import make_corpus

    corpus = make_corpus(sequences=64, seq_len=16, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp_path / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, seed=2), tmp_path / "m.onnx")
    train = ("pf-train", str(tmp_path / "m.onnx"), "--corpus", str(tmp_path / "corpus.npz"),
             "--batch", "8", "--num-threads", "1", "--kfac", "--kfac-basis", basis)
    run_tool(*train, "--steps", "2", "--checkpoint", str(tmp_path / "c.npz"))
    state = dict(np.load(tmp_path / "c.npz"))
    layer = "bert.encoder.layer.0.attention.self.query.weight"
    state[f"param/{layer}.kfac.B"][1, 1] = np.nan
    np.savez(tmp_path / "nan.npz", **state)
    proc = run_tool(*train, "--steps", "5", "--log-every", "1", "--resume",
                    str(tmp_path / "nan.npz"))
    named = [line for line in proc.stdout.splitlines() if "holds NaN or Inf" in line]
    assert named == [f"step 3: K-FAC: factor B of layer '{layer}' holds NaN or Inf; the layer "
                     "keeps its last good inverse from now on (lower --lr, or resume from an "
                     "earlier checkpoint)"], proc.stdout
    assert re.search(r"^step\s+5\s+loss\s+\d", proc.stdout, re.M), proc.stdout
