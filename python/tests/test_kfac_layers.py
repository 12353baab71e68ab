"""More layer kinds as K-FAC candidates: the masked-LM head's transform
(pf-insert-kfac `layers`, `--kfac-layers`) and the LayerNorms' scale and
shift (pf-insert-kfac `layer-norm`, `--kfac-layer-norm blocks|diagonal`),
against NumPy references of their factors and preconditioned gradients, in a
BERT model, and refused by pipelined training."""

from __future__ import annotations

import numpy as np
import pytest

from pipefisher.tools import run_tool

from kfac_support import kfac_bert_step, make_tiny_bert

ROWS, HIDDEN = 6, 4
HEAD = "cls.predictions.transform.dense"


def _dense(array: np.ndarray) -> str:
    shape = "x".join(map(str, array.shape))
    raw = np.ascontiguousarray(array, dtype="<f4").tobytes().hex().upper()
    return f'dense<"0x{raw}"> : tensor<{shape}xf32>'


def _head_module(w: np.ndarray, b: np.ndarray) -> str:
    """The head's transform alone, objective sum(y * probe)."""
    t = f"tensor<{ROWS}x{HIDDEN}xf32>"
    return f'''
pf.param @"{HEAD}.weight" : tensor<{HIDDEN}x{HIDDEN}xf32> = {_dense(w)}
pf.param @"{HEAD}.bias" : tensor<{HIDDEN}xf32> = {_dense(b)}
func.func @main(%x: {t} {{pf.name = "x"}}, %probe: {t} {{pf.name = "probe"}})
    -> (tensor<f32> {{pf.name = "objective"}}) {{
  %w = pf.param_ref @"{HEAD}.weight" : tensor<{HIDDEN}x{HIDDEN}xf32>
  %b = pf.param_ref @"{HEAD}.bias" : tensor<{HIDDEN}xf32>
  %y = pf.linear %x, %w, %b {{transpose_weight}} : ({t}, tensor<{HIDDEN}x{HIDDEN}xf32>, tensor<{HIDDEN}xf32>) -> {t}
  %p = pf.mul %y, %probe : ({t}, {t}) -> {t}
  %s = pf.reduce_sum %p {{keepdims = false}} : ({t}) -> tensor<f32>
  return %s : tensor<f32>
}}
'''


def _kfac_step(tmp_path, module, insert_options, damping, x, probe):
    """One K-FAC step of `module` (pf-insert-kfac with `insert_options`, no
    KL-clip or grafting, factors exported) run by pf-run on (x, probe): its
    outputs."""
    (tmp_path / "m.mlir").write_text(module)
    run_tool("pf-opt", str(tmp_path / "m.mlir"), f"--pf-insert-kfac={insert_options}",
             "--pf-build-gradients",
             f"--pf-kfac-precondition=damping={damping} kl-clip=0 graft=none export-factors=true",
             "-o", str(tmp_path / "step.mlir"))
    np.savez(tmp_path / "in.npz", x=x, probe=probe, step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    return dict(np.load(tmp_path / "out.npz"))


def test_head_transform_matches_numpy(tmp_path):
    rng = np.random.default_rng(17)
    w = rng.normal(size=(HIDDEN, HIDDEN)).astype(np.float32)
    b = rng.normal(size=HIDDEN).astype(np.float32)
    x = rng.normal(size=(ROWS, HIDDEN)).astype(np.float32)
    probe = rng.normal(size=(ROWS, HIDDEN)).astype(np.float32)
    damping = 0.05
    got = _kfac_step(tmp_path, _head_module(w, b), "layers=encoder-and-head", damping, x, probe)

    x64, g = x.astype(np.float64), probe.astype(np.float64)
    A = x64.T @ x64 / ROWS
    B = ROWS * (g.T @ g)  # rows² · gᵀg / rows: the objective is no masked-LM loss
    pi = np.sqrt((np.trace(A) / HIDDEN) / (np.trace(B) / HIDDEN))
    A_inv = np.linalg.inv(A + np.sqrt(damping) * pi * np.eye(HIDDEN))
    B_inv = np.linalg.inv(B + np.sqrt(damping) / pi * np.eye(HIDDEN))
    name = f"{HEAD}.weight"
    np.testing.assert_allclose(got[f"kfac/A/{name}"], A, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[f"kfac/B/{name}"], B, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[f"kfac/A_inv/{name}"], A_inv, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[f"kfac/B_inv/{name}"], B_inv, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[f"grad/{name}"], B_inv @ (g.T @ x64) @ A_inv, rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(got[f"grad/{HEAD}.bias"], B_inv @ g.sum(axis=0), rtol=1e-4,
                               atol=1e-6)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("kfac_layers"))


_step = kfac_bert_step


def test_bert_head_transform(bert):
    """In a BERT step the head's transform gets factors (not the tied decoder),
    its gradient becomes B⁻¹·∇W·A⁻¹ of the step's own factors, and every
    other output is bitwise the encoder-only step's (kl-clip 0, no grafting:
    the layers do not couple)."""
    plain = _step(bert, "plain")
    default = _step(bert, "encoder", "--kfac-layers", "encoder")
    head = _step(bert, "head", "--kfac-layers", "encoder-and-head")
    assert plain.keys() == default.keys()
    for key in plain:
        np.testing.assert_array_equal(plain[key], default[key], err_msg=key)

    w = f"{HEAD}.weight"
    assert sum(k.startswith("kfac/A/") for k in plain) == 12
    assert sum(k.startswith("kfac/A/") for k in head) == 13
    assert f"kfac/A/{w}" in head and f"kfac/A/{w}" not in plain
    assert not any("word_embeddings" in k or "decoder" in k for k in head if k.startswith("kfac/"))
    for key in plain:
        if key not in (f"grad/{w}", f"grad/{HEAD}.bias", "loss"):
            np.testing.assert_array_equal(plain[key], head[key], err_msg=key)
    np.testing.assert_array_equal(plain["loss"], head["loss"])

    A, B = head[f"kfac/A/{w}"].astype(np.float64), head[f"kfac/B/{w}"].astype(np.float64)
    assert A.shape == B.shape == (128, 128)
    np.testing.assert_allclose(A, A.T, rtol=1e-6, atol=1e-9)
    damping, n = 1e-3, A.shape[0]
    pi = np.sqrt((np.trace(A) / n) / (np.trace(B) / n))
    A_inv = np.linalg.inv(A + np.sqrt(damping) * pi * np.eye(n))
    B_inv = np.linalg.inv(B + np.sqrt(damping) / pi * np.eye(n))
    np.testing.assert_allclose(head[f"kfac/A_inv/{w}"], A_inv, rtol=2e-3,
                               atol=2e-3 * np.abs(A_inv).max())
    np.testing.assert_allclose(head[f"kfac/B_inv/{w}"], B_inv, rtol=2e-3,
                               atol=2e-3 * np.abs(B_inv).max())
    # The raw gradient is the encoder-only step's (preconditioning comes after).
    raw_w = plain[f"grad/{w}"].astype(np.float64)
    raw_b = plain[f"grad/{HEAD}.bias"].astype(np.float64)
    A_inv32 = head[f"kfac/A_inv/{w}"].astype(np.float64)
    B_inv32 = head[f"kfac/B_inv/{w}"].astype(np.float64)
    want_w, want_b = B_inv32 @ raw_w @ A_inv32, B_inv32 @ raw_b
    np.testing.assert_allclose(head[f"grad/{w}"], want_w, rtol=1e-3,
                               atol=1e-4 * np.abs(want_w).max())
    np.testing.assert_allclose(head[f"grad/{HEAD}.bias"], want_b, rtol=1e-3,
                               atol=1e-4 * np.abs(want_b).max())


def test_bert_head_transform_with_predictions(bert):
    """With --predictions P the decoder reads gathered rows; the head's
    transform still runs at every position and is still found."""
    ids = np.load(bert / "in.npz")
    inputs = {k: ids[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    positions = np.array([[0, 3], [0, 3]], np.int64)
    labels = np.take_along_axis(ids["input_ids"], positions, axis=1).astype(np.int64)
    np.savez(bert / "in_p.npz", **inputs, labels=labels, mlm_positions=positions,
             lr=np.float64(1e-3), step=np.int64(1))
    out = bert / "p.npz"
    run_tool("pf-run", str(bert / "m.onnx"), "--dim", "batch=2", "--dim", "sequence=8",
             "--training-step", "--kfac", "--kfac-layers", "encoder-and-head", "--predictions",
             "2", "--inputs", str(bert / "in_p.npz"), "--outputs", str(out))
    got = dict(np.load(out))
    assert f"kfac/A/{HEAD}.weight" in got
    assert np.all(np.isfinite(got[f"grad/{HEAD}.weight"]))

LN = "bert.encoder.layer.0.output.LayerNorm"
LIN = "bert.encoder.layer.0.output.dense"


def _layer_norm_module(w, b, gamma, beta, eps) -> str:
    """A linear of an encoder block, then a LayerNorm; objective sum(z * probe)."""
    t = f"tensor<{ROWS}x{HIDDEN}xf32>"
    v = f"tensor<{HIDDEN}xf32>"
    return f'''
pf.param @"{LIN}.weight" : tensor<{HIDDEN}x{HIDDEN}xf32> = {_dense(w)}
pf.param @"{LIN}.bias" : {v} = {_dense(b)}
pf.param @"{LN}.weight" : {v} = {_dense(gamma)}
pf.param @"{LN}.bias" : {v} = {_dense(beta)}
func.func @main(%x: {t} {{pf.name = "x"}}, %probe: {t} {{pf.name = "probe"}})
    -> (tensor<f32> {{pf.name = "objective"}}) {{
  %w = pf.param_ref @"{LIN}.weight" : tensor<{HIDDEN}x{HIDDEN}xf32>
  %b = pf.param_ref @"{LIN}.bias" : {v}
  %y = pf.linear %x, %w, %b {{transpose_weight}} : ({t}, tensor<{HIDDEN}x{HIDDEN}xf32>, {v}) -> {t}
  %g = pf.param_ref @"{LN}.weight" : {v}
  %be = pf.param_ref @"{LN}.bias" : {v}
  %z = pf.layer_norm %y, %g, %be {{axis = 1 : i64, epsilon = {eps:e} : f32}} : ({t}, {v}, {v}) -> {t}
  %p = pf.mul %z, %probe : ({t}, {t}) -> {t}
  %s = pf.reduce_sum %p {{keepdims = false}} : ({t}) -> tensor<f32>
  return %s : tensor<f32>
}}
'''


def _layer_norm_reference(u, dy, eps):
    """Per feature j: the 2x2 Fisher rows·Σ_t g gᵀ (the objective is no
    masked-LM loss: B's rows² scaling over a mean of rows) with g = (dy·x̂,
    dy), and the gradients (Σ dy·x̂, Σ dy)."""
    mean = u.mean(axis=1, keepdims=True)
    hat = (u - mean) / np.sqrt(u.var(axis=1, keepdims=True) + eps)
    g_scale, g_bias = dy * hat, dy
    F = ROWS * np.stack([(g_scale**2).sum(0), (g_scale * g_bias).sum(0), (g_bias**2).sum(0)], 1)
    return F, g_scale.sum(0), g_bias.sum(0)


def _solve(F, grad_scale, grad_bias, damping, diagonal):
    us, ub = np.empty_like(grad_scale), np.empty_like(grad_bias)
    for j in range(len(grad_scale)):
        ss, sb, bb = F[j]
        block = np.array([[ss, 0 if diagonal else sb], [0 if diagonal else sb, bb]])
        us[j], ub[j] = np.linalg.solve(block + damping * np.eye(2), [grad_scale[j], grad_bias[j]])
    return us, ub


@pytest.mark.parametrize("variant", ["blocks", "diagonal"])
def test_layer_norm_matches_numpy(tmp_path, variant):
    rng = np.random.default_rng(29)
    w = rng.normal(size=(HIDDEN, HIDDEN)).astype(np.float32)
    b = rng.normal(size=HIDDEN).astype(np.float32)
    gamma = rng.normal(1, 0.2, size=HIDDEN).astype(np.float32)
    beta = rng.normal(size=HIDDEN).astype(np.float32)
    x = rng.normal(size=(ROWS, HIDDEN)).astype(np.float32)
    probe = rng.normal(size=(ROWS, HIDDEN)).astype(np.float32)
    eps, damping = 1e-5, 0.05
    got = _kfac_step(tmp_path, _layer_norm_module(w, b, gamma, beta, eps),
                     f"layer-norm={variant}", damping, x, probe)

    u = x.astype(np.float64) @ w.T.astype(np.float64) + b
    # dObj/dz = probe, so dy of the LayerNorm's output is the probe.
    F, grad_scale, grad_bias = _layer_norm_reference(u, probe.astype(np.float64), eps)
    diagonal = variant == "diagonal"
    want_F = F[:, [0, 2]] if diagonal else F
    np.testing.assert_allclose(got[f"kfac/F/{LN}.weight"], want_F, rtol=1e-4, atol=1e-6)
    us, ub = _solve(F, grad_scale, grad_bias, damping, diagonal)
    np.testing.assert_allclose(got[f"grad/{LN}.weight"], us, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[f"grad/{LN}.bias"], ub, rtol=1e-4, atol=1e-6)
    # The linear is preconditioned as always.
    assert f"kfac/A/{LIN}.weight" in got


def test_bert_layer_norm(bert):
    """In a BERT step every LayerNorm (embeddings, blocks, head) gets a
    factor; each update is the damped 2x2 solve of the step's own factor
    and the raw gradient; the linears' outputs are bitwise the step's
    without the option (kl-clip 0, no grafting)."""
    plain = _step(bert, "plain_ln")
    for variant in ("blocks", "diagonal"):
        got = _step(bert, f"ln_{variant}", "--kfac-layer-norm", variant)
        factors = sorted(k for k in got if k.startswith("kfac/F/"))
        assert len(factors) == 6, factors  # embeddings, 2 per block, the head
        assert any("cls.predictions.transform.LayerNorm" in k for k in factors)
        for key in factors:
            scale = key[len("kfac/F/"):]
            bias = scale[: -len("weight")] + "bias"
            F = got[key].astype(np.float64)
            assert F.shape == (128, 3 if variant == "blocks" else 2)
            if variant == "blocks":
                # Each 2x2 block is positive semi-definite.
                assert np.all(F[:, 0] >= 0) and np.all(F[:, 2] >= 0)
                assert np.all(F[:, 1] ** 2 <= F[:, 0] * F[:, 2] * (1 + 1e-4) + 1e-30)
                full = F
            else:
                full = np.stack([F[:, 0], np.zeros(128), F[:, 1]], 1)
            us, ub = _solve(full, plain[f"grad/{scale}"].astype(np.float64),
                            plain[f"grad/{bias}"].astype(np.float64), 1e-3,
                            variant == "diagonal")
            np.testing.assert_allclose(got[f"grad/{scale}"], us, rtol=2e-3,
                                       atol=1e-4 * np.abs(us).max(), err_msg=key)
            np.testing.assert_allclose(got[f"grad/{bias}"], ub, rtol=2e-3,
                                       atol=1e-4 * np.abs(ub).max(), err_msg=key)
        for key in plain:
            if "LayerNorm" not in key:
                np.testing.assert_array_equal(plain[key], got[key], err_msg=key)


def test_bert_layer_norm_micro_batches(bert):
    """Two micro-batches' factor updates make the whole batch's factor."""
    whole = _step(bert, "ln_whole", "--kfac-layer-norm", "blocks")
    split = _step(bert, "ln_split", "--kfac-layer-norm", "blocks", "--micro-batches", "2")
    for key in (k for k in whole if k.startswith("kfac/F/")):
        np.testing.assert_allclose(split[key], whole[key], rtol=1e-4,
                                   atol=1e-5 * np.abs(whole[key]).max(), err_msg=key)


def test_bert_layer_norm_op_axis_minus_one(bert, tmp_path):
    """A model with ONNX LayerNormalization ops (opset 17, axis -1, as torch
    exports them) gets the same LayerNorm factors and updates as the
    decomposed model of the same weights."""
    from pipefisher import make_bert_model, save_model

    save_model(make_bert_model("tiny", vocab_size=50, num_hidden_layers=2, seed=3, opset=17,
                               layernorm_op=True), tmp_path / "m.onnx")
    (tmp_path / "in.npz").write_bytes((bert / "in.npz").read_bytes())
    decomposed = _step(bert, "ln_decomposed", "--kfac-layer-norm", "blocks")
    fused = _step(tmp_path, "ln_op", "--kfac-layer-norm", "blocks")
    factors = sorted(k for k in fused if k.startswith("kfac/F/"))
    assert factors == sorted(k for k in decomposed if k.startswith("kfac/F/"))
    assert len(factors) == 6, factors
    for key in factors + [k for k in fused if k.startswith("grad/") and "LayerNorm" in k]:
        np.testing.assert_allclose(fused[key], decomposed[key], rtol=1e-3,
                                   atol=1e-5 * np.abs(decomposed[key]).max(), err_msg=key)


@pytest.mark.parametrize("args,message", [
    (("--kfac-layers", "encoder-and-head"),
     "--kfac-layers encoder-and-head is single-process K-FAC for now"),
    (("--kfac-layer-norm", "blocks"), "--kfac-layer-norm blocks is single-process K-FAC for now"),
])
def test_pipelined_training_refuses_new_kinds(tmp_path, args, message):
    from pipefisher import make_bert_model, save_model
    from pipefisher.corpus import make_corpus

    corpus = make_corpus(sequences=64, seq_len=16, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp_path / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=2, seed=2),
               tmp_path / "model.onnx")
    proc = run_tool("pf-train", str(tmp_path / "model.onnx"), "--corpus",
                    str(tmp_path / "corpus.npz"), "--batch", "8", "--steps", "1", "--kfac",
                    *args, "--pipeline", "stages=2 schedule=1f1b microbatches=2", check=False)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


def test_layer_norm_trains(tmp_path):
    """pf-train with LayerNorm K-FAC (both variants) runs and lowers the loss."""
    from pipefisher import make_bert_model, save_model
    from pipefisher.corpus import make_corpus
    import re

    corpus = make_corpus(sequences=200, seq_len=16, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp_path / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=1, seed=2),
               tmp_path / "model.onnx")
    for variant in ("blocks", "diagonal"):
        proc = run_tool("pf-train", str(tmp_path / "model.onnx"), "--corpus",
                        str(tmp_path / "corpus.npz"), "--batch", "8", "--steps", "30",
                        "--log-every", "10", "--lr", "3e-3", "--warmup", "3", "--num-threads", "2",
                        "--kfac", "--kfac-layer-norm", variant, "--kfac-layers",
                        "encoder-and-head")
        losses = [float(m) for m in re.findall(r"loss\s+([0-9.]+)", proc.stdout)]
        assert len(losses) >= 3 and all(np.isfinite(losses)), proc.stdout
        assert losses[-1] < losses[0], losses


def test_new_kinds_resume_bitwise(tmp_path):
    """The head's and the LayerNorms' K-FAC state is checkpointed: 3 steps,
    resumed to 6, equal 6 straight steps bit for bit."""
    from pipefisher import make_bert_model, save_model
    from pipefisher.corpus import make_corpus

    corpus = make_corpus(sequences=100, seq_len=16, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp_path / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=1, seed=2),
               tmp_path / "model.onnx")
    base = (str(tmp_path / "model.onnx"), "--corpus", str(tmp_path / "corpus.npz"), "--batch",
            "8", "--num-threads", "2", "--kfac", "--kfac-layer-norm", "blocks", "--kfac-layers",
            "encoder-and-head")
    run_tool("pf-train", *base, "--steps", "6", "--checkpoint", str(tmp_path / "full.npz"))
    run_tool("pf-train", *base, "--steps", "3", "--checkpoint", str(tmp_path / "part.npz"))
    run_tool("pf-train", *base, "--steps", "6", "--resume", str(tmp_path / "part.npz"),
             "--checkpoint", str(tmp_path / "resumed.npz"))
    full, resumed = np.load(tmp_path / "full.npz"), np.load(tmp_path / "resumed.npz")
    assert any(k.endswith(".kfac.F") for k in full.files)
    assert any(HEAD in k and k.endswith(".kfac.A") for k in full.files)
    assert sorted(full.files) == sorted(resumed.files)
    for key in full.files:
        np.testing.assert_array_equal(full[key], resumed[key], err_msg=key)
