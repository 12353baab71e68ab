"""K-FAC in the factors' eigenbasis (pf-kfac-precondition basis=eigen,
pf-train --kfac-basis eigen) against a NumPy reference: the eigenvalues and
eigenvectors of factors A and B, and the preconditioned gradients
(B (x) A + damping I)^-1 vec(grad) of one linear layer, computed by the
compiled step and returned by pf-run; both weight layouts, with a separate
bias and with a bias column; the fallback on a non-finite factor; bad
options."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipefisher.tools import run_tool

ROWS, IN, OUT = 6, 4, 5
WEIGHT = "bert.encoder.layer.0.dense.weight"
BIAS = "bert.encoder.layer.0.dense.bias"


def _dense(array: np.ndarray) -> str:
    shape = "x".join(map(str, array.shape))
    raw = np.ascontiguousarray(array, dtype="<f4").tobytes().hex().upper()
    return f'dense<"0x{raw}"> : tensor<{shape}xf32>'


def _module(w: np.ndarray, b: np.ndarray, in_out: bool) -> str:
    """One linear layer y = x W^T + b (w [out, in]) or, with `in_out`, y = x W
    + b (w [in, out], as PyTorch's exporter folds it); objective sum(y * probe)."""
    wt = f"tensor<{IN}x{OUT}xf32>" if in_out else f"tensor<{OUT}x{IN}xf32>"
    attrs = "" if in_out else " {transpose_weight}"
    return f'''
pf.param @"{WEIGHT}" : {wt} = {_dense(w)}
pf.param @"{BIAS}" : tensor<{OUT}xf32> = {_dense(b)}
func.func @main(%x: tensor<{ROWS}x{IN}xf32> {{pf.name = "x"}},
                %probe: tensor<{ROWS}x{OUT}xf32> {{pf.name = "probe"}})
    -> (tensor<f32> {{pf.name = "objective"}}) {{
  %w = pf.param_ref @"{WEIGHT}" : {wt}
  %b = pf.param_ref @"{BIAS}" : tensor<{OUT}xf32>
  %y = pf.linear %x, %w, %b{attrs} : (tensor<{ROWS}x{IN}xf32>, {wt}, tensor<{OUT}xf32>) -> tensor<{ROWS}x{OUT}xf32>
  %p = pf.mul %y, %probe : (tensor<{ROWS}x{OUT}xf32>, tensor<{ROWS}x{OUT}xf32>) -> tensor<{ROWS}x{OUT}xf32>
  %s = pf.reduce_sum %p {{keepdims = false}} : (tensor<{ROWS}x{OUT}xf32>) -> tensor<f32>
  return %s : tensor<f32>
}}
'''


def _kron_solve(A, B, grad, damping):
    """(B (x) A + damping I)^-1 applied to grad [out, in'] (row-major vec:
    vec(B G A) = (B (x) A) vec(G) for symmetric A, B), by a dense solve."""
    n = grad.size
    return np.linalg.solve(np.kron(B, A) + damping * np.eye(n), grad.reshape(-1)).reshape(
        grad.shape)


def _step(tmp_path, w, b, x, probe, in_out, options, insert="--pf-insert-kfac"):
    (tmp_path / "m.mlir").write_text(_module(w, b, in_out))
    run_tool("pf-opt", str(tmp_path / "m.mlir"), insert, "--pf-build-gradients",
             f"--pf-kfac-precondition=basis=eigen kl-clip=0 graft=none export-factors=true "
             f"{options}", "-o", str(tmp_path / "step.mlir"))
    np.savez(tmp_path / "in.npz", x=x, probe=probe, step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    return dict(np.load(tmp_path / "out.npz"))


def _assert_eigen(values, vectors, factor):
    """Ascending eigenvalues of `factor` (>= 0) and orthonormal eigenvectors
    that rebuild it (signs are the solver's choice)."""
    want = np.clip(np.linalg.eigvalsh(factor), 0, None)
    scale = np.abs(factor).max()
    np.testing.assert_allclose(values, want, atol=2e-6 * scale)
    assert np.all(np.diff(values) >= 0) and np.all(values >= 0)
    v = vectors.astype(np.float64)
    np.testing.assert_allclose(v.T @ v, np.eye(len(values)), atol=1e-5)
    np.testing.assert_allclose(v @ np.diag(values) @ v.T, factor, atol=1e-5 * scale)


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(ROWS, IN)).astype(np.float32),
            rng.normal(size=(ROWS, OUT)).astype(np.float32), rng)


@pytest.mark.parametrize("in_out", [False, True], ids=["out-in", "in-out"])
@pytest.mark.parametrize("damping", [1e-2, 1.0])
def test_eigen_step_matches_numpy(tmp_path, in_out, damping):
    x, probe, rng = _inputs(5)
    w = rng.normal(size=(IN, OUT) if in_out else (OUT, IN)).astype(np.float32)
    b = rng.normal(size=OUT).astype(np.float32)
    got = _step(tmp_path, w, b, x, probe, in_out, f"damping={damping}")
    x64, g = x.astype(np.float64), probe.astype(np.float64)
    A = x64.T @ x64 / ROWS
    B = ROWS * (g.T @ g)  # scaled by rows^2 (gradients of a mean)
    np.testing.assert_allclose(got[f"kfac/A/{WEIGHT}"], A, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[f"kfac/B/{WEIGHT}"], B, rtol=1e-5, atol=1e-5)
    _assert_eigen(got[f"kfac/A_values/{WEIGHT}"], got[f"kfac/A_vectors/{WEIGHT}"], A)
    _assert_eigen(got[f"kfac/B_values/{WEIGHT}"], got[f"kfac/B_vectors/{WEIGHT}"], B)
    grad_w, grad_b = g.T @ x64, g.sum(axis=0)
    want_w = _kron_solve(A, B, grad_w, damping)
    # A separate bias has the scalar factor A = 1.
    want_b = np.linalg.solve(B + damping * np.eye(OUT), grad_b)
    np.testing.assert_allclose(got[f"grad/{WEIGHT}"], want_w.T if in_out else want_w,
                               rtol=1e-3, atol=1e-6 * np.abs(want_w).max())
    np.testing.assert_allclose(got[f"grad/{BIAS}"], want_b, rtol=1e-3,
                               atol=1e-6 * np.abs(want_b).max())
    assert int(got["kfac/issues"]) == 0
    # Not the inverse basis: the damping sits on the product, not on each factor.
    pi = np.sqrt((np.trace(A) / IN) / (np.trace(B) / OUT))
    factored = (np.linalg.inv(B + np.sqrt(damping) / pi * np.eye(OUT)) @ grad_w
                @ np.linalg.inv(A + np.sqrt(damping) * pi * np.eye(IN)))
    assert not np.allclose(want_w, factored, rtol=1e-2)


@pytest.mark.parametrize("in_out", [False, True], ids=["out-in", "in-out"])
def test_eigen_bias_column_preconditions_jointly(tmp_path, in_out):
    x, probe, rng = _inputs(11)
    w = rng.normal(size=(IN, OUT) if in_out else (OUT, IN)).astype(np.float32)
    b = rng.normal(size=OUT).astype(np.float32)
    damping = 0.05
    got = _step(tmp_path, w, b, x, probe, in_out, f"damping={damping}",
                insert="--pf-insert-kfac=bias-column=true")
    x1 = np.hstack([x.astype(np.float64), np.ones((ROWS, 1))])
    g = probe.astype(np.float64)
    A, B = x1.T @ x1 / ROWS, ROWS * (g.T @ g)
    _assert_eigen(got[f"kfac/A_values/{WEIGHT}"], got[f"kfac/A_vectors/{WEIGHT}"], A)
    joint = _kron_solve(A, B, np.hstack([g.T @ x1[:, :IN], g.sum(axis=0)[:, None]]), damping)
    grad_w = got[f"grad/{WEIGHT}"]
    np.testing.assert_allclose(grad_w.T if in_out else grad_w, joint[:, :IN], rtol=1e-3,
                               atol=1e-6 * np.abs(joint).max())
    np.testing.assert_allclose(got[f"grad/{BIAS}"], joint[:, IN], rtol=1e-3,
                               atol=1e-6 * np.abs(joint).max())


def test_non_finite_factor_keeps_the_previous_decomposition(tmp_path):
    """A NaN input makes factor A non-finite: the refresh keeps the previous
    eigenvectors and eigenvalues (zero at step 1) and says so (outcome 2)."""
    x, probe, rng = _inputs(3)
    x[0, 0] = np.nan
    w = rng.normal(size=(OUT, IN)).astype(np.float32)
    got = _step(tmp_path, w, np.zeros(OUT, np.float32), x, probe, False, "damping=0.1")
    assert int(got["kfac/issues"]) == 2
    assert not np.any(got[f"kfac/A_vectors/{WEIGHT}"])
    assert not np.any(got[f"kfac/A_values/{WEIGHT}"])
    # B is finite (the probe is): decomposed as usual.
    B = ROWS * (probe.astype(np.float64).T @ probe)
    _assert_eigen(got[f"kfac/B_values/{WEIGHT}"], got[f"kfac/B_vectors/{WEIGHT}"], B)


@pytest.mark.parametrize("options,message", [
    ("basis=eigen damping=0", "basis=eigen needs damping > 0"),
    ("basis=cholesky", "basis"),
])
def test_bad_eigen_options_are_refused(tmp_path, options, message):
    x, probe, rng = _inputs(1)
    (tmp_path / "m.mlir").write_text(
        _module(rng.normal(size=(OUT, IN)).astype(np.float32), np.zeros(OUT, np.float32), False))
    proc = run_tool("pf-opt", str(tmp_path / "m.mlir"), "--pf-insert-kfac",
                    "--pf-build-gradients", f"--pf-kfac-precondition={options}", check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from pipefisher import make_bert_model, save_model
    from pipefisher.corpus import make_corpus

    tmp = tmp_path_factory.mktemp("eigen_train")
    corpus = make_corpus(sequences=64, seq_len=16, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, seed=2), tmp / "m.onnx")
    return tmp


def _train(tiny, *args, check=True):
    return run_tool("pf-train", str(tiny / "m.onnx"), "--corpus", str(tiny / "corpus.npz"),
                    "--batch", "8", "--log-every", "1", "--num-threads", "1", "--kfac", *args,
                    check=check)


def test_pf_train_eigen_basis(tiny, tmp_path):
    """pf-train --kfac --kfac-basis eigen: the step preconditions every K-FAC
    layer in the eigenbasis, trains (the loss falls), and the checkpoint
    holds the eigenvectors and eigenvalues instead of inverses."""
    proc = _train(tiny, "--steps", "12", "--kfac-basis", "eigen", "--checkpoint",
                  tmp_path / "c.npz", "--emit-step", tmp_path / "step.mlir")
    losses = [float(v) for v in re.findall(r"^step\s+\d+\s+loss\s+(\S+)", proc.stdout, re.M)]
    assert len(losses) == 12 and losses[-1] < losses[0], proc.stdout
    step = (tmp_path / "step.mlir").read_text()
    assert step.count("pf.kfac.precondition_eigen") > 0 and "pf.kfac.precondition " not in step
    with np.load(tmp_path / "c.npz") as c:
        keys = c.files
        values = [c[k] for k in keys if k.endswith(".kfac.A_values")]
    assert values and all(v.ndim == 1 and (v >= 0).all() and v.max() > 0 for v in values)
    assert not any(k.endswith("_inv") for k in keys)


def test_pf_train_bad_basis_is_refused():
    proc = run_tool("pf-train", "m.onnx", "--kfac", "--kfac-basis", "cholesky", check=False)
    assert proc.returncode != 0 and "cholesky" in proc.stderr
    assert "eigen" in proc.stderr  # the valid values are listed


@pytest.mark.parametrize("saved,resumed", [("inverse", "eigen"), ("eigen", "inverse")])
def test_resume_with_the_other_basis_is_refused(tiny, tmp_path, saved, resumed):
    _train(tiny, "--steps", "2", "--kfac-basis", saved, "--checkpoint", tmp_path / "c.npz")
    before = (tmp_path / "c.npz").read_bytes()
    proc = _train(tiny, "--steps", "4", "--kfac-basis", resumed, "--resume", tmp_path / "c.npz",
                  "--checkpoint", tmp_path / "c.npz", check=False)
    assert proc.returncode == 1, proc.stdout
    assert f"it was trained with --kfac-basis {saved} (give the same --kfac-basis)" in proc.stderr
    assert (tmp_path / "c.npz").read_bytes() == before
