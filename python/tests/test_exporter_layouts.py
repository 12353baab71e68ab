"""Models as PyTorch's TorchScript exporter writes them train like the Hugging
Face layout: K-FAC on pre-transposed [in, out] weights, weights named after
their layer, and the folded decoder copy tied back to the word embedding.

The generator's two styles hold the same model (same seed, same values,
weights stored transposed in style pytorch, the decoder a folded copy), so a
training run on either must give the same losses, parameters (up to the
transpose) and K-FAC factors.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.corpus import make_corpus
from pipefisher.tools import run_tool

STEPS = 4


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("layouts")
    corpus = make_corpus(sequences=200, seq_len=16, seed=3)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp / "corpus.npz", **corpus)
    for style in ("transpose", "pytorch"):
        save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=1, seed=4,
                                   style=style), tmp / f"{style}.onnx")
    return tmp


def _train(tmp, style, name, *args):
    checkpoint = tmp / f"{name}.npz"
    proc = run_tool("pf-train", tmp / f"{style}.onnx", "--corpus", tmp / "corpus.npz",
                    "--batch", "8", "--num-threads", "2", "--steps", STEPS, "--log-every", "1",
                    "--lr", "2e-3", "--warmup", "1", "--kfac", "--kfac-refresh", "1",
                    "--checkpoint", checkpoint, *args)
    assert proc.returncode == 0, proc.stderr
    losses = [float(m) for m in re.findall(r"loss\s+([0-9.]+)", proc.stdout)]
    assert len(losses) == STEPS
    data = np.load(checkpoint)
    return proc, losses, {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def runs(models):
    return {style: _train(models, style, style) for style in ("transpose", "pytorch")}


def test_same_losses_in_both_layouts(runs):
    np.testing.assert_allclose(runs["pytorch"][1], runs["transpose"][1], rtol=1e-4)


def test_same_parameters_and_factors_in_both_layouts(runs):
    hf, pt = runs["transpose"][2], runs["pytorch"][2]
    params = [k for k in hf if k.startswith("param/")]
    # The same names: exporter-named weights take their layer's name, the
    # folded decoder copy is gone (tied back), K-FAC state follows the names.
    assert sorted(params) == sorted(k for k in pt if k.startswith("param/"))
    kfac = [k for k in params if k.endswith(".kfac.A")]
    assert len(kfac) == 6, kfac  # q, k, v, output, intermediate, output of the block
    # Weights stored [in, out] (and their optimizer state) are the transpose;
    # K-FAC factors and inverses are the same matrices.
    transposed = {k[len("meta/onnx_name/"):] for k in pt if k.startswith("meta/onnx_name/")}
    assert len(transposed) == 7  # the block's six linears and the head's transform
    for key in params:
        name = key[len("param/"):]
        if ".attention.self.key.bias" in name:
            # Softmax ignores a shift of every key by the same vector: this
            # gradient is rounding noise, which the update normalizes.
            continue
        got, want = pt[key], hf[key]
        if ".kfac." not in name and any(name == w or name.startswith(w + ".")
                                        for w in transposed):
            got = got.T
        # Summation order differs between the layouts' GEMMs, and Adam's
        # normalization turns rounding in a near-zero gradient into up to a
        # learning rate's step: nearly every element agrees to a tolerance
        # relative to the array's scale (inverses reach 1e4), and all to one
        # step of lr 2e-3.
        atol = 2e-6 + 2e-5 * float(np.abs(want).max())
        close = np.isclose(got, want, rtol=2e-3, atol=atol)
        assert close.mean() > 0.999, (key, close.mean())
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=max(atol, 2e-3), err_msg=key)


def test_the_decoder_is_tied_back(runs):
    proc, _, pt = runs["pytorch"]
    assert "'onnx::MatMul_8' equals the transpose of 'bert.embeddings.word_embeddings.weight'" \
        in proc.stderr
    assert "param/onnx::MatMul_8" not in pt
    copy = pt["meta/transposed_copy/onnx::MatMul_8"].astype(np.uint8).tobytes().decode()
    assert copy == "bert.embeddings.word_embeddings.weight"
    query = "bert.encoder.layer.0.attention.self.query.weight"
    assert pt[f"meta/onnx_name/{query}"].astype(np.uint8).tobytes().decode() == "onnx::MatMul_1"


def test_no_retie_keeps_the_copy_apart(models, runs):
    # Trained apart, the embedding misses the decoder's gradient: the first
    # step's loss is the same, the parameters after it are not.
    proc, losses, apart = _train(models, "pytorch", "apart", "--no-retie")
    assert "equals the transpose" not in proc.stderr
    # The copy is a parameter of its own, named after the decoder's bias.
    decoder = "param/cls.predictions.weight"
    assert apart["meta/onnx_name/cls.predictions.weight"].astype(np.uint8).tobytes() \
        == b"onnx::MatMul_8"
    tied = runs["pytorch"]
    assert losses[0] == pytest.approx(tied[1][0], rel=1e-6)
    word = "param/bert.embeddings.word_embeddings.weight"
    assert not np.allclose(apart[word], tied[2][word], rtol=1e-4, atol=1e-7)
    # The copy trained on its own is no longer the embedding's transpose.
    assert not np.allclose(apart[decoder], apart[word].T, rtol=1e-4, atol=1e-7)


def _anonymized(model, out):
    """`model` with every encoder-block initializer (and Identity alias)
    renamed as an exporter that keeps no module paths would: the blocks
    must come from the graph's structure."""
    m = onnx.load(model)
    names = [t.name for t in m.graph.initializer]
    names += [o for n in m.graph.node if n.op_type == "Identity" for o in n.output]
    renamed = {name: f"onnx::Param_{i}" for i, name in enumerate(names)
               if ".encoder.layer." in name}
    for t in m.graph.initializer:
        t.name = renamed.get(t.name, t.name)
    for n in m.graph.node:
        n.input[:] = [renamed.get(i, i) for i in n.input]
        n.output[:] = [renamed.get(o, o) for o in n.output]
    onnx.save(m, out)
    return len(renamed)


def test_blocks_from_structure_when_names_say_nothing(models, runs):
    anonymous = models / "anonymous.onnx"
    assert _anonymized(models / "transpose.onnx", anonymous) > 10
    summary = run_tool("pf-translate", "--import-onnx", anonymous, "--dim", "batch=2",
                       "--dim", "sequence=8", "--summary", "-o", "/dev/null")
    assert summary.returncode == 0, summary.stderr
    assert "found 1 from the graph's structure" in summary.stderr
    assert re.search(r"block\s+0: 6 pf.linear, 2 pf.layer_norm, 1 pf.gelu", summary.stdout)
    # K-FAC finds the block's six linears and trains as with the names.
    proc, losses, state = _train(models, "anonymous", "anonymous")
    assert len([k for k in state if k.endswith(".kfac.A")]) == 6
    np.testing.assert_allclose(losses, runs["transpose"][1], rtol=1e-5)


def test_partition_from_structure(tmp_path):
    # Two blocks found from the structure are cut into two stages.
    save_model(make_bert_model("tiny", vocab_size=64, num_hidden_layers=2, seed=5),
               tmp_path / "named.onnx")
    _anonymized(tmp_path / "named.onnx", tmp_path / "anonymous.onnx")
    proc = run_tool("pf-translate", "--import-onnx", tmp_path / "anonymous.onnx", "--dim",
                    "batch=2", "--dim", "sequence=8",
                    "--pipeline=stages=2 microbatches=2 schedule=1f1b")
    assert proc.returncode == 0, proc.stderr
    assert "found 2 from the graph's structure" in proc.stderr
    assert re.search(r"pf\.stage 0 .*blocks = array<i64: 0>", proc.stdout), proc.stdout[-2000:]
    assert re.search(r"pf\.stage 1 .*blocks = array<i64: 1>", proc.stdout)


def test_pf_run_retie_option(models, tmp_path):
    """pf-run's training step ties the folded decoder copy back too, and
    --no-retie keeps it a parameter of its own: then the embedding's gradient
    misses the decoder's share, which the copy's (transposed) gradient holds
    (unclipped: the two global norms differ)."""
    from pipefisher.sample_inputs import make_inputs

    vocab = int(np.load(models / "corpus.npz")["tokens"].max()) + 1
    inputs = make_inputs(2, 8, vocab=vocab)
    labels = np.where(np.arange(8) % 3 == 0, inputs["input_ids"], -100).astype(np.int64)
    np.savez(tmp_path / "in.npz", **inputs, labels=labels, lr=np.float64(1e-3),
             step=np.int64(1))
    grads = {}
    for name, extra in (("tied", ()), ("apart", ("--no-retie",))):
        out = tmp_path / f"{name}.npz"
        run_tool("pf-run", models / "pytorch.onnx", "--dim", "batch=2", "--dim", "sequence=8",
                 "--training-step", "--clip-norm", "0", "--inputs", tmp_path / "in.npz",
                 "--outputs", out, *extra)
        grads[name] = dict(np.load(out))
    word = "grad/bert.embeddings.word_embeddings.weight"
    copy = "grad/cls.predictions.weight"
    assert copy not in grads["tied"]
    assert copy in grads["apart"]
    assert grads["tied"]["loss"] == pytest.approx(float(grads["apart"]["loss"]), rel=1e-6)
    np.testing.assert_allclose(grads["apart"][word] + grads["apart"][copy].T,
                               grads["tied"][word], rtol=1e-4, atol=1e-6)


def test_merged_biases_are_reported(models, tmp_path):
    """The generator writes an untrained model's equal initializers (zero
    biases) once, read through Identity nodes, as torch's TorchScript
    exporter does; pf unties those. torch's dynamo exporter (optimize=True)
    drops the Identity nodes: every layer reads the one initializer. pf
    cannot tell that from a tie, but no model shares a bias without its
    weight, so the import warns (and still compiles)."""
    model = onnx.load(str(models / "transpose.onnx"))
    initializers = {i.name for i in model.graph.initializer}
    alias = {n.output[0]: n.input[0] for n in model.graph.node
             if n.op_type == "Identity" and n.input[0] in initializers}
    assert len(alias) > 2, "the generator no longer writes Identity copies"
    kept = [n for n in model.graph.node if n.output[0] not in alias]
    for node in kept:
        node.input[:] = [alias.get(name, name) for name in node.input]
    del model.graph.node[:]
    model.graph.node.extend(kept)
    merged = tmp_path / "merged.onnx"
    onnx.save(model, str(merged))
    dims = ("--dim", "batch=2", "--dim", "sequence=16")
    proc = run_tool("pf-translate", "--import-onnx", merged, *dims, "--summary")
    assert re.search(r"warning: pf-check-shared-biases: '[^']+' is the bias of \d+ linear "
                     r"layers with different weights", proc.stderr), proc.stderr
    assert "optimize=False" in proc.stderr
    original = run_tool("pf-translate", "--import-onnx", models / "transpose.onnx", *dims,
                        "--summary")
    assert "pf-check-shared-biases" not in original.stderr
