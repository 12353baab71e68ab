"""Adaptive (Levenberg-Marquardt) K-FAC damping, pf-train
--kfac-damping-schedule adaptive: every T steps ρ = (L(θ + Δ) - L(θ)) / M(Δ)
with M(Δ) = gᵀΔ + ½ Σ tr(Δᵀ B Δ A) + ½ λ ‖Δ‖² over the K-FAC layers, and λ
divided by ω = decay^T when ρ < 1/4, multiplied by it when ρ > 3/4.

Checked here: the step's raw gradients (pf-kfac-precondition raw-gradients)
against NumPy, before clipping; the curvature and norm terms against a
float64 NumPy reference from the checkpoints before and after the step; ρ
close to 1 on a small step (which checks the gradient term and the loss
after the update) and λ falling by ω then; λ rising by 1/ω on an
overshooting step, and clamped; resume continues with the saved λ bit for
bit; bad options are refused."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipefisher.tools import run_tool

from test_kfac_eigen import BIAS, IN, OUT, ROWS, WEIGHT, _module, tiny  # noqa: F401 (a fixture)

FLOAT = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
DETAIL = re.compile(
    rf"^step (\d+): K-FAC damping: loss {FLOAT} -> {FLOAT}, model {FLOAT} \(gradient {FLOAT}, "
    rf"curvature {FLOAT}, norm2 {FLOAT}\), rho {FLOAT}, damping {FLOAT} -> {FLOAT}$", re.M)
PROGRESS = re.compile(r"^step\s+(\d+)\s+loss\s+(\S+)\s+lr.*damping\s+(\S+)\s+rho\s+(\S+)$", re.M)
DECAY = 0.95


def _train(tiny, *args, check=True):
    return run_tool("pf-train", str(tiny / "m.onnx"), "--corpus", str(tiny / "corpus.npz"),
                    "--batch", "8", "--log-every", "1", "--num-threads", "1", "--kfac",
                    "--kfac-damping-schedule", "adaptive", *map(str, args), check=check)


def _details(proc):
    """Each adaptation's figures by step."""
    rows = {}
    for match in DETAIL.finditer(proc.stdout):
        step, *values = match.groups()
        keys = ("before", "after", "model", "gradient", "curvature", "norm2", "rho", "damping",
                "next")
        rows[int(step)] = dict(zip(keys, map(float, values)))
    return rows


def test_raw_gradients_are_the_unclipped_gradients(tmp_path):
    """kfac/gradient/<w> and <b> are the layer's gradients as autodiff made
    them: the same with and without pf-clip-gradients (which shrinks grad/...
    here), and equal to NumPy's; both weight layouts."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(ROWS, IN)).astype(np.float32)
    probe = rng.normal(size=(ROWS, OUT)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, probe=probe, step=np.int64(1))
    for in_out in (False, True):
        w = rng.normal(size=(IN, OUT) if in_out else (OUT, IN)).astype(np.float32)
        b = rng.normal(size=OUT).astype(np.float32)
        (tmp_path / "m.mlir").write_text(_module(w, b, in_out))
        outputs = {}
        for clip in ("", "--pf-clip-gradients=max-norm=1e-3"):
            passes = ["--pf-insert-kfac", "--pf-build-gradients"] + ([clip] if clip else [])
            run_tool("pf-opt", str(tmp_path / "m.mlir"), *passes,
                     "--pf-kfac-precondition=raw-gradients=true kl-clip=0 graft=none", "-o",
                     str(tmp_path / "step.mlir"))
            run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
                     "--outputs", str(tmp_path / "out.npz"))
            outputs[clip] = dict(np.load(tmp_path / "out.npz"))
        grad_w = probe.astype(np.float64).T @ x.astype(np.float64)  # [out, in]
        if in_out:
            grad_w = grad_w.T
        for got in outputs.values():
            np.testing.assert_allclose(got[f"kfac/gradient/{WEIGHT}"], grad_w, rtol=1e-5,
                                       atol=1e-5)
            np.testing.assert_allclose(got[f"kfac/gradient/{BIAS}"], probe.sum(axis=0),
                                       rtol=1e-5, atol=1e-5)
        # The clip acted (the preconditioned gradients differ), the raw ones did not change.
        clipped = outputs["--pf-clip-gradients=max-norm=1e-3"]
        assert not np.allclose(clipped[f"grad/{WEIGHT}"], outputs[""][f"grad/{WEIGHT}"])
        np.testing.assert_array_equal(clipped[f"kfac/gradient/{WEIGHT}"],
                                      outputs[""][f"kfac/gradient/{WEIGHT}"])


def _kfac_layers(step_ir: str, checkpoint):
    """(factor kind "A" or "F", weight, bias or None, in_out) of each K-FAC
    layer of the step: linears and embeddings (.kfac.A), LayerNorms (.kfac.F)."""
    layers = []
    for match in re.finditer(r'pf\.param @"?([^"\s]+)\.kfac\.([AF])"? : [^\n]*', step_ir):
        weight, kind = match.groups()
        bias = re.search(r'pf\.kfac_bias = "([^"]+)"', match.group(0))
        layers.append((kind, weight, bias.group(1) if bias else None,
                       "pf.kfac_weight_in_out" in match.group(0)))
    assert layers and all(f"param/{w}" in checkpoint for _, w, _, _ in layers)
    return layers


def _numpy_curvature_and_norm(layers, before, after):
    """Σ ΔᵀFΔ and ‖Δ‖² in float64, the factors after the step: tr(Dᵀ B D A)
    (+ Δbᵀ B Δb) for a linear, Σ_v A_v Δ_vᵀ B Δ_v for an embedding's diagonal
    A, the 2x2 blocks (γγ, γβ, ββ) of a LayerNorm."""
    curvature = norm2 = 0.0

    def delta(name):
        return after[f"param/{name}"].astype(np.float64) - before[f"param/{name}"]

    for kind, weight, bias, in_out in layers:
        d = delta(weight)
        norm2 += np.sum(d * d) + (np.sum(delta(bias) ** 2) if bias else 0.0)
        if kind == "F":
            F = after[f"param/{weight}.kfac.F"].astype(np.float64)
            db = delta(bias)
            curvature += np.sum(F[:, 0] * d * d + 2 * F[:, 1] * d * db + F[:, 2] * db * db)
            continue
        A = after[f"param/{weight}.kfac.A"].astype(np.float64)
        B = after[f"param/{weight}.kfac.B"].astype(np.float64)
        if A.ndim == 1:  # an embedding table [vocab, h]: F = diag(A) (x) B
            curvature += np.sum(A * np.einsum("vi,ij,vj->v", d, B, d))
            continue
        if in_out:
            d = d.T
        curvature += np.sum((B @ d) * (d @ A))
        if bias:
            curvature += delta(bias) @ B @ delta(bias)
    return curvature, norm2


@pytest.mark.parametrize("layers", [(), ("--kfac-embeddings", "word-and-position"),
                                    ("--kfac-layer-norm", "blocks")])
def test_quadratic_model_matches_numpy(tiny, tmp_path, layers):
    """The curvature and norm terms at an adapting step against NumPy from the
    checkpoints before and after it (the encoder's linears, and with the
    embedding tables' diagonal-A layers); M and ρ are the formulas of the
    printed terms; the loss before is the step's."""
    common = ("--kfac-damping", "1e-3", "--kfac-damping-interval", 2, "--lr", "1e-3", *layers)
    _train(tiny, *common, "--steps", 1, "--checkpoint", tmp_path / "c1.npz")
    proc = _train(tiny, *common, "--steps", 2, "--checkpoint", tmp_path / "c2.npz",
                  "--emit-step", tmp_path / "step.mlir")
    before, after = dict(np.load(tmp_path / "c1.npz")), dict(np.load(tmp_path / "c2.npz"))
    detail = _details(proc)[2]
    layers = _kfac_layers((tmp_path / "step.mlir").read_text(), after)
    curvature, norm2 = _numpy_curvature_and_norm(layers, before, after)
    np.testing.assert_allclose(detail["curvature"], curvature, rtol=1e-7)
    np.testing.assert_allclose(detail["norm2"], norm2, rtol=1e-7)
    assert curvature > 0 and norm2 > 0
    damping = 1e-3
    model = detail["gradient"] + 0.5 * (detail["curvature"] + damping * detail["norm2"])
    np.testing.assert_allclose(detail["model"], model, rtol=1e-7)
    np.testing.assert_allclose(detail["rho"], (detail["after"] - detail["before"]) / model,
                               rtol=1e-3, atol=1e-4)
    step_loss = {int(s): float(v) for s, v, _, _ in PROGRESS.findall(proc.stdout)}[2]
    assert abs(detail["before"] - step_loss) < 1e-4
    assert detail["damping"] == damping
    # The K-FAC layers' update lowered the batch's loss, as the model said.
    assert detail["gradient"] < 0 and detail["after"] < detail["before"]


def test_small_step_rho_near_one_and_damping_falls(tiny):
    """On a small step the quadratic model is the loss change to first order:
    ρ ≈ 1 (a wrong gradient term or loss after the update would not give
    that), above 3/4, so λ shrinks by ω = 0.95^T at each adaptation."""
    proc = _train(tiny, "--steps", 6, "--lr", "1e-4", "--warmup", 0, "--kfac-damping", "1e-3",
                  "--kfac-damping-interval", 3)
    details = _details(proc)
    assert sorted(details) == [3, 6], proc.stdout
    omega = DECAY ** 3
    for detail in details.values():
        assert detail["model"] < 0
        assert 0.9 < detail["rho"] < 1.1, detail
        np.testing.assert_allclose(detail["next"], detail["damping"] * omega, rtol=1e-9)
    np.testing.assert_allclose(details[6]["damping"], details[3]["next"], rtol=1e-9)
    # The progress lines show the λ each step ran with and the last ρ.
    rows = PROGRESS.findall(proc.stdout)
    assert [r[3] for r in rows[:2]] == ["-", "-"]
    assert float(rows[3][2]) == pytest.approx(1e-3 * omega, rel=1e-2)
    assert "K-FAC adaptive damping: 2 adaptation(s)" in proc.stdout


def test_overshooting_step_raises_damping_within_bounds(tiny):
    """A large learning rate overshoots: the loss rises where the model predicts
    a fall (ρ < 1/4) and λ grows by 1/ω; with --kfac-damping-max it stops there."""
    common = ("--lr", "0.1", "--warmup", 0, "--kfac-damping", "1e-3", "--kfac-damping-interval", 2)
    details = _details(_train(tiny, *common, "--steps", 4))
    assert sorted(details) == [2, 4]
    for step, detail in details.items():
        assert detail["model"] < 0 and detail["rho"] < 0.25, (step, detail)
        np.testing.assert_allclose(detail["next"], detail["damping"] / DECAY ** 2, rtol=1e-9)
    assert details[2]["after"] > details[2]["before"]  # the loss rose
    clamped = _details(_train(tiny, *common, "--steps", 2, "--kfac-damping-max", "1.05e-3"))
    assert clamped[2]["rho"] < 0.25 and clamped[2]["next"] == pytest.approx(1.05e-3, rel=1e-9)


def test_unmeasurable_step_keeps_damping(tiny):
    """A step whose predicted change is below the f32 loss' resolution (lr
    1e-12) measures nothing: ρ is not computed and λ stays."""
    details = _details(_train(tiny, "--steps", 2, "--lr", "1e-12", "--kfac-damping", "1e-3",
                              "--kfac-damping-interval", 2))
    assert abs(details[2]["model"]) < 1e-9 and np.isnan(details[2]["rho"])
    assert details[2]["next"] == details[2]["damping"] == 1e-3


def test_resume_continues_with_the_saved_damping(tiny, tmp_path):
    """The checkpoint holds λ (meta/kfac_damping); 4 steps, then a resume to 8,
    end bit for bit as 8 steps in one run, λ included."""
    common = ("--kfac-damping", "1e-3", "--kfac-damping-interval", 2, "--steps", 8)
    whole = _train(tiny, *common, "--checkpoint", tmp_path / "whole.npz")
    _train(tiny, *common[:-1], 4, "--checkpoint", tmp_path / "half.npz")
    half = dict(np.load(tmp_path / "half.npz"))
    assert half["meta/kfac_damping"] != 1e-3  # it adapted by step 4
    resumed = _train(tiny, *common, "--resume", tmp_path / "half.npz", "--checkpoint",
                     tmp_path / "resumed.npz")
    a, b = dict(np.load(tmp_path / "whole.npz")), dict(np.load(tmp_path / "resumed.npz"))
    assert sorted(a) == sorted(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    line = re.compile(r"^step 8: K-FAC damping: .*$", re.M)
    assert line.findall(whole.stdout) == line.findall(resumed.stdout) != []


@pytest.mark.parametrize("args,message", [
    (("--kfac-damping-interval", 0), "needs --kfac-damping-interval >= 1"),
    (("--kfac-damping-adaptation-decay", 1), "--kfac-damping-adaptation-decay in (0, 1)"),
    (("--kfac-damping-adaptation-decay", 0), "--kfac-damping-adaptation-decay in (0, 1)"),
    (("--kfac-damping-min", "1e-2"), "0 < --kfac-damping-min <= --kfac-damping <= "
                                     "--kfac-damping-max"),
    (("--kfac-damping-max", "1e-9"), "0 < --kfac-damping-min <= --kfac-damping <= "
                                     "--kfac-damping-max"),
    (("--kfac-damping-min", 0), "0 < --kfac-damping-min"),
    (("--kfac-window", 2), "with K-FAC in the bubbles (--kfac-window, kfac=bubbles)"),
    (("--pipeline", "stages=2 schedule=1f1b microbatches=2"),
     "adaptive is single-process K-FAC for now"),
])
def test_bad_options_are_refused(tiny, args, message):
    proc = _train(tiny, "--steps", 2, *args, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_adaptive_needs_kfac(tiny):
    proc = run_tool("pf-train", str(tiny / "m.onnx"), "--corpus", str(tiny / "corpus.npz"),
                    "--steps", "1", "--kfac-damping-schedule", "adaptive", check=False)
    assert proc.returncode != 0 and "it needs --kfac" in proc.stderr, proc.stderr
