"""The word and position embeddings as K-FAC layers (pf-insert-kfac
`embeddings`, `--kfac-embeddings word|word-and-position`): a lookup is a
linear layer on one-hot inputs, so factor A is diagonal (each row's token
count per id), B = E[g gᵀ] of the per-token gradient of the gathered rows
(after the position embedding's broadcast over the batch), and the update
is diag(A⁻¹)·∇W·B⁻¹ of the table's whole gradient (a tied decoder's share
included). Checked against NumPy in float64, in a BERT step against the raw
gradients with every other output bit for bit the step's without the
option, over micro-batches, and refused by pipelined training."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipefisher.tools import run_tool

from kfac_support import kfac_bert_step, make_tiny_bert

WORD = "bert.embeddings.word_embeddings.weight"
POS = "bert.embeddings.position_embeddings.weight"
LIN = "bert.encoder.layer.0.output.dense.weight"
VOCAB, MAXPOS, HIDDEN, BATCH, SEQ = 10, 8, 4, 2, 3


def _dense(array: np.ndarray) -> str:
    shape = "x".join(map(str, array.shape))
    raw = np.ascontiguousarray(array, dtype="<f4").tobytes().hex().upper()
    return f'dense<"0x{raw}"> : tensor<{shape}xf32>'


def _embedding_module(w, p, lin) -> str:
    """Word and position lookups added, an encoder linear, the tied decoder
    (the word table again); objective sum(logits * probe)."""
    rows = f"tensor<{BATCH}x{SEQ}x{HIDDEN}xf32>"
    logits = f"tensor<{BATCH}x{SEQ}x{VOCAB}xf32>"
    wt, pt = f"tensor<{VOCAB}x{HIDDEN}xf32>", f"tensor<{MAXPOS}x{HIDDEN}xf32>"
    ids = f"tensor<{BATCH}x{SEQ}xi64>"
    positions = ", ".join(map(str, range(SEQ)))
    return f'''
pf.param @"{WORD}" : {wt} = {_dense(w)}
pf.param @"{POS}" : {pt} = {_dense(p)}
pf.param @"{LIN}" : tensor<{HIDDEN}x{HIDDEN}xf32> = {_dense(lin)}
func.func @main(%ids: {ids} {{pf.name = "input_ids"}}, %probe: {logits} {{pf.name = "probe"}})
    -> (tensor<f32> {{pf.name = "objective"}}) {{
  %w = pf.param_ref @"{WORD}" : {wt}
  %x = pf.gather %w, %ids {{axis = 0 : i64}} : ({wt}, {ids}) -> {rows}
  %p = pf.param_ref @"{POS}" : {pt}
  %pid = pf.constant dense<[[{positions}]]> : tensor<1x{SEQ}xi64>
  %pe = pf.gather %p, %pid {{axis = 0 : i64}} : ({pt}, tensor<1x{SEQ}xi64>) -> tensor<1x{SEQ}x{HIDDEN}xf32>
  %s = pf.add %x, %pe : ({rows}, tensor<1x{SEQ}x{HIDDEN}xf32>) -> {rows}
  %l = pf.param_ref @"{LIN}" : tensor<{HIDDEN}x{HIDDEN}xf32>
  %h = pf.linear %s, %l {{transpose_weight}} : ({rows}, tensor<{HIDDEN}x{HIDDEN}xf32>) -> {rows}
  %y = pf.linear %h, %w {{transpose_weight}} : ({rows}, {wt}) -> {logits}
  %m = pf.mul %y, %probe : ({logits}, {logits}) -> {logits}
  %o = pf.reduce_sum %m {{keepdims = false}} : ({logits}) -> tensor<f32>
  return %o : tensor<f32>
}}
'''


def _kfac_step(tmp_path, module, insert_options, damping, inputs):
    """One K-FAC step (no KL-clip or grafting, factors exported): its outputs."""
    (tmp_path / "m.mlir").write_text(module)
    insert = f"--pf-insert-kfac={insert_options}" if insert_options else "--pf-insert-kfac"
    run_tool("pf-opt", str(tmp_path / "m.mlir"), insert,
             "--pf-build-gradients",
             f"--pf-kfac-precondition=damping={damping} kl-clip=0 graft=none export-factors=true",
             "-o", str(tmp_path / "step.mlir"))
    np.savez(tmp_path / "in.npz", **inputs, step=np.int64(1))
    run_tool("pf-run", str(tmp_path / "step.mlir"), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    return dict(np.load(tmp_path / "out.npz"))


def _inverses(A, B, damping):
    """π-damped inverses of a diagonal A (1-D) and a square B."""
    pi = np.sqrt((A.sum() / A.size) / (np.trace(B) / B.shape[0]))
    A_inv = 1.0 / (A + np.sqrt(damping) * pi)
    B_inv = np.linalg.inv(B + np.sqrt(damping) / pi * np.eye(B.shape[0]))
    return A_inv, B_inv


def test_embeddings_match_numpy(tmp_path):
    rng = np.random.default_rng(23)
    w = rng.normal(size=(VOCAB, HIDDEN)).astype(np.float32)
    p = rng.normal(size=(MAXPOS, HIDDEN)).astype(np.float32)
    lin = rng.normal(size=(HIDDEN, HIDDEN)).astype(np.float32)
    ids = np.array([[1, 4, 4], [7, 1, 4]], np.int64)
    probe = rng.normal(size=(BATCH, SEQ, VOCAB)).astype(np.float32)
    damping = 0.05
    module = _embedding_module(w, p, lin)
    inputs = dict(input_ids=ids, probe=probe)
    got = _kfac_step(tmp_path, module, "embeddings=word-and-position", damping, inputs)
    (tmp_path / "plain").mkdir()
    plain = _kfac_step(tmp_path / "plain", module, "", damping, inputs)

    # Forward and backward in float64: logits = ((x + pe) Lᵀ) Wᵀ.
    W, P, L, pr = (a.astype(np.float64) for a in (w, p, lin, probe))
    n = BATCH * SEQ
    s = W[ids] + P[np.arange(SEQ)][None]
    h = s @ L.T
    g = (pr @ W @ L).reshape(n, HIDDEN)  # d objective / d s, per token
    # The word table's gradient: the lookup's rows scattered, plus the tied
    # decoder's share; the position table's: its rows summed over the batch.
    grad_w = np.zeros((VOCAB, HIDDEN))
    np.add.at(grad_w, ids.reshape(-1), g)
    grad_w += pr.reshape(n, VOCAB).T @ h.reshape(n, HIDDEN)
    grad_p = np.zeros((MAXPOS, HIDDEN))
    grad_p[:SEQ] = g.reshape(BATCH, SEQ, HIDDEN).sum(0)
    np.testing.assert_allclose(plain[f"grad/{WORD}"], grad_w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(plain[f"grad/{POS}"], grad_p, rtol=1e-4, atol=1e-4)

    # B = rows · gᵀg (rows² · gᵀg / rows: the objective is no masked-LM loss),
    # the same per-token gradient for both tables.
    B = n * g.T @ g
    for table, A, grad in ((WORD, np.bincount(ids.reshape(-1), minlength=VOCAB) / n, grad_w),
                           (POS, np.bincount(np.arange(SEQ), minlength=MAXPOS) / SEQ, grad_p)):
        np.testing.assert_allclose(got[f"kfac/A/{table}"], A, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(got[f"kfac/B/{table}"], B, rtol=1e-4, atol=1e-3)
        A_inv, B_inv = _inverses(A, B, damping)
        np.testing.assert_allclose(got[f"kfac/A_inv/{table}"], A_inv, rtol=1e-4)
        np.testing.assert_allclose(got[f"kfac/B_inv/{table}"], B_inv, rtol=1e-3,
                                   atol=1e-4 * np.abs(B_inv).max())
        want = A_inv[:, None] * grad @ B_inv
        np.testing.assert_allclose(got[f"grad/{table}"], want, rtol=1e-3,
                                   atol=1e-4 * np.abs(want).max(), err_msg=table)
    # Every other output is the step's without the option, bit for bit.
    for key in plain:
        if key not in (f"grad/{WORD}", f"grad/{POS}"):
            np.testing.assert_array_equal(plain[key], got[key], err_msg=key)


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("kfac_embeddings"))


_step = kfac_bert_step


def test_bert_embeddings(bert):
    """In a BERT step (tied decoder) the word and position tables get a
    diagonal A from the ids' counts, a symmetric B, the π-damped inverses,
    and diag(A⁻¹)·∇W·B⁻¹ of the step's whole raw gradient; every other
    output is bitwise the step's without the option."""
    plain = _step(bert, "plain")
    ids = np.load(bert / "in.npz")["input_ids"]
    n = ids.size
    for option, tables in (("word", [WORD]), ("word-and-position", [WORD, POS])):
        got = _step(bert, option, "--kfac-embeddings", option)
        assert sorted(k for k in got if k.startswith("kfac/A/") and "embeddings" in k) == \
            sorted(f"kfac/A/{t}" for t in tables)
        for table in tables:
            A = got[f"kfac/A/{table}"].astype(np.float64)
            if table == WORD:
                want_A = np.bincount(ids.reshape(-1), minlength=50) / n
            else:
                want_A = np.bincount(np.arange(8), minlength=A.size) / 8
            np.testing.assert_allclose(A, want_A, rtol=1e-6, atol=1e-8)
            B = got[f"kfac/B/{table}"].astype(np.float64)
            assert B.shape == (128, 128)
            np.testing.assert_allclose(B, B.T, rtol=1e-6, atol=1e-9 * np.abs(B).max())
            assert np.linalg.eigvalsh(B).min() > -1e-6 * np.abs(B).max()
            A_inv, B_inv = _inverses(A, B, 1e-3)
            np.testing.assert_allclose(got[f"kfac/A_inv/{table}"], A_inv, rtol=1e-4)
            np.testing.assert_allclose(got[f"kfac/B_inv/{table}"], B_inv, rtol=2e-3,
                                       atol=2e-3 * np.abs(B_inv).max())
            raw = plain[f"grad/{table}"].astype(np.float64)
            want = got[f"kfac/A_inv/{table}"].astype(np.float64)[:, None] * raw @ \
                got[f"kfac/B_inv/{table}"].astype(np.float64)
            np.testing.assert_allclose(got[f"grad/{table}"], want, rtol=1e-3,
                                       atol=1e-4 * np.abs(want).max(), err_msg=table)
        # The position table's B is the word table's: the same per-token
        # gradient of the embeddings' sum.
        if POS in tables:
            np.testing.assert_array_equal(got[f"kfac/B/{POS}"], got[f"kfac/B/{WORD}"])
        for key in plain:
            if key not in (f"grad/{t}" for t in tables):
                np.testing.assert_array_equal(plain[key], got[key], err_msg=f"{option}: {key}")


def test_bert_embeddings_micro_batches(bert):
    """Two micro-batches' factor updates make the whole batch's factors."""
    whole = _step(bert, "emb_whole", "--kfac-embeddings", "word-and-position")
    split = _step(bert, "emb_split", "--kfac-embeddings", "word-and-position",
                  "--micro-batches", "2")
    keys = [k for k in whole if k.startswith("kfac/") and "embeddings" in k]
    assert len(keys) == 8
    for key in keys:
        np.testing.assert_allclose(split[key], whole[key], rtol=1e-4,
                                   atol=1e-5 * np.abs(whole[key]).max(), err_msg=key)


def _corpus_and_model(tmp_path, sequences):
    from pipefisher import make_bert_model, save_model
    from pipefisher.corpus import make_corpus

    corpus = make_corpus(sequences=sequences, seq_len=16, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp_path / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=1, seed=2),
               tmp_path / "model.onnx")
    return str(tmp_path / "model.onnx"), str(tmp_path / "corpus.npz")


@pytest.mark.parametrize("option", ["word", "word-and-position"])
def test_pipelined_training_refuses_embeddings(tmp_path, option):
    model, corpus = _corpus_and_model(tmp_path, 64)
    proc = run_tool("pf-train", model, "--corpus", corpus, "--batch", "8", "--steps", "1",
                    "--kfac", "--kfac-embeddings", option, "--pipeline",
                    "stages=2 schedule=1f1b microbatches=2", check=False)
    assert proc.returncode != 0
    assert f"--kfac-embeddings {option} is single-process K-FAC for now" in proc.stderr, \
        proc.stderr


def test_embeddings_train_and_resume_bitwise(tmp_path):
    """pf-train with embedding K-FAC lowers the loss, and its state resumes
    from a checkpoint bit for bit (3 steps, resumed to 6, against 6)."""
    model, corpus = _corpus_and_model(tmp_path, 200)
    base = (model, "--corpus", corpus, "--batch", "8", "--num-threads", "2", "--kfac",
            "--kfac-embeddings", "word-and-position")
    proc = run_tool("pf-train", *base, "--steps", "30", "--log-every", "10", "--lr", "3e-3",
                    "--warmup", "3")
    losses = [float(m) for m in re.findall(r"loss\s+([0-9.]+)", proc.stdout)]
    assert len(losses) >= 3 and all(np.isfinite(losses)), proc.stdout
    assert losses[-1] < losses[0], losses
    run_tool("pf-train", *base, "--steps", "6", "--checkpoint", str(tmp_path / "full.npz"))
    run_tool("pf-train", *base, "--steps", "3", "--checkpoint", str(tmp_path / "part.npz"))
    run_tool("pf-train", *base, "--steps", "6", "--resume", str(tmp_path / "part.npz"),
             "--checkpoint", str(tmp_path / "resumed.npz"))
    full, resumed = np.load(tmp_path / "full.npz"), np.load(tmp_path / "resumed.npz")
    assert any(WORD in k and k.endswith(".kfac.A") for k in full.files)
    assert sorted(full.files) == sorted(resumed.files)
    for key in full.files:
        np.testing.assert_array_equal(full[key], resumed[key], err_msg=key)
