"""pf against real PyTorch / Hugging Face exports (issue 12): forward outputs of
models exported by both torch exporters, and one training step (loss,
gradients with the tied embedding, K-FAC factors) against torch's autograd.

Needs torch and transformers, which are not project dependencies (CI never
installs them): the module skips when either is absent. Run it from a scratch
environment that has them and the project's test requirements
(docs/importing.md, "Checking against PyTorch"):

    PYTHONPATH=python /path/to/venv/bin/python -m pytest python/tests/test_torch_parity.py

Models are random (no downloads) and small: BERT with hidden 64, 2 layers, 4
heads, vocabulary 1000. Every 1-D parameter (biases, LayerNorm) is shifted by
noise, as in a trained model: exporters merge initializers with equal values,
which random init (zero biases, unit LayerNorm weights) would make of them.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import onnx
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from pipefisher.tools import run_tool  # noqa: E402

TOL = 1e-4  # issue 12: outputs within 1e-4 of PyTorch's
SMALL = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=128, max_position_embeddings=64)
NAMES = ["input_ids", "attention_mask", "token_type_ids"]
EXPORT_SHAPE = (2, 16)   # batch, sequence of the example inputs
RUN_SHAPE = (3, 11)      # dynamic-axes exports also run at another shape


def _perturb(model, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn(p.shape, generator=g) * 0.05)
    return model.eval()


class _Outputs(torch.nn.Module):
    """Keyword arguments to the model, its output tensors by position (the
    TorchScript exporter passes positional arguments that BertModel.forward
    of transformers 5 rejects)."""

    def __init__(self, model, outputs, token_types=True):
        super().__init__()
        self.model, self.outputs, self.token_types = model, outputs, token_types
        self.eval()

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        kw = dict(input_ids=input_ids, attention_mask=attention_mask)
        if self.token_types:
            kw["token_type_ids"] = token_type_ids
        out = self.model(**kw)
        return tuple(getattr(out, name) for name in self.outputs)


def _inputs(batch, seq, seed, token_types=True):
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, SMALL["vocab_size"], size=(batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), np.int64)
    mask[-1, seq // 2 + 1:] = 0  # one padded row
    feed = {"input_ids": ids, "attention_mask": mask}
    if token_types:
        types = np.zeros((batch, seq), np.int64)
        types[:, seq // 2:] = 1
        feed["token_type_ids"] = types
    return feed


# name: (model, outputs, dynamo, dynamic axes, extra export options)
def _model(kind):
    T = transformers
    torch.manual_seed(0)
    if kind == "mlm":
        return _Outputs(_perturb(T.BertForMaskedLM(T.BertConfig(**SMALL))), ["logits"])
    if kind == "base":
        return _Outputs(_perturb(T.BertModel(T.BertConfig(**SMALL))),
                        ["last_hidden_state", "pooler_output"])
    if kind == "roberta":
        config = T.RobertaConfig(**{**SMALL, "max_position_embeddings": 80}, type_vocab_size=1)
        return _Outputs(_perturb(T.RobertaForMaskedLM(config)), ["logits"], token_types=False)
    if kind == "mlm-random-init":
        return _Outputs(T.BertForMaskedLM(T.BertConfig(**SMALL)).eval(), ["logits"])
    raise KeyError(kind)


EXPORTS = {
    # TorchScript exporter, opset 14, with and without constant folding.
    "torchscript-folded": ("mlm", False, False, {"do_constant_folding": True}),
    "torchscript-unfolded": ("mlm", False, False, {"do_constant_folding": False}),
    "torchscript-dynamic": ("mlm", False, True, {}),
    "torchscript-dynamic-bertmodel": ("base", False, True, {}),
    "torchscript-dynamic-roberta": ("roberta", False, True, {}),
    # dynamo exporter, opset 18.
    "dynamo": ("mlm", True, False, {}),
    "dynamo-dynamic": ("mlm", True, True, {}),
    "dynamo-dynamic-bertmodel": ("base", True, True, {}),
    "dynamo-dynamic-roberta": ("roberta", True, True, {}),
    # A freshly initialized model: without its optimizer the dynamo exporter
    # keeps equal initializers apart (and writes CastLike).
    "dynamo-unoptimized-random-init": ("mlm-random-init", True, False, {"optimize": False}),
}


def _export(wrapper, path, dynamo, dynamic, options, feed):
    names = [n for n in NAMES if n in feed]
    args = tuple(torch.from_numpy(feed[n]) for n in names)
    kw = dict(input_names=names, output_names=list(wrapper.outputs), **options)
    if dynamic and dynamo:
        from torch.export import Dim
        batch, seq = Dim("batch", min=1, max=64), Dim("sequence", min=2, max=60)
        kw["dynamic_shapes"] = {n: {0: batch, 1: seq} for n in names}
    elif dynamic:
        axes = {n: {0: "batch", 1: "sequence"} for n in names}
        for out in wrapper.outputs:
            axes[out] = {0: "batch"} if out == "pooler_output" else {0: "batch", 1: "sequence"}
        kw["dynamic_axes"] = axes
    opset = 18 if dynamo else 14
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapper, args, str(path), dynamo=dynamo, opset_version=opset, **kw)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("torch_parity")


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_forward_matches_torch(workdir, name):
    kind, dynamo, dynamic, options = EXPORTS[name]
    wrapper = _model(kind)
    feed = _inputs(*EXPORT_SHAPE, seed=0, token_types=wrapper.token_types)
    path = workdir / f"{name}.onnx"
    _export(wrapper, path, dynamo, dynamic, options, feed)
    ops = sorted({n.op_type for n in onnx.load(str(path)).graph.node})
    batch, seq = RUN_SHAPE if dynamic else EXPORT_SHAPE
    run = _inputs(batch, seq, seed=1, token_types=wrapper.token_types)
    # The TorchScript exporter restores the module's mode after exporting; a
    # module left in training mode would run torch's reference with dropout.
    assert not wrapper.training and not wrapper.model.training
    with torch.no_grad():
        want = wrapper(*(torch.from_numpy(run[n]) for n in NAMES if n in run))
    np.savez(workdir / f"{name}.in.npz", **run)
    dims = ["--dim", f"batch={batch}", "--dim", f"sequence={seq}"] if dynamic else []
    run_tool("pf-run", path, "--inputs", workdir / f"{name}.in.npz",
             "--outputs", workdir / f"{name}.out.npz", "--num-threads", "2", *dims)
    got = np.load(workdir / f"{name}.out.npz")
    for out, expected in zip(wrapper.outputs, want):
        expected = expected.numpy()
        assert got[out].shape == expected.shape, out
        diff = float(np.abs(got[out] - expected).max())
        assert diff <= TOL, f"{name} {out}: max abs diff {diff:.3g} (ops {ops})"
    # K-FAC finds both encoder blocks, with their six linears each.
    summary = run_tool("pf-translate", "--import-onnx", path, "--summary", *dims).stdout
    assert re.findall(r"block\s+\d+: (\d+) pf.linear", summary) == ["6", "6"], summary


# --- one training step -------------------------------------------------------

TRAIN_SHAPE = (4, 16)


@pytest.fixture(scope="module")
def trained(workdir):
    """BertForMaskedLM without dropout exported by the TorchScript exporter
    with constant folding (the common case: weights folded to [in, out]
    `onnx::MatMul_N`, the decoder a folded copy of the word embedding), and
    torch's loss, gradients and per-layer K-FAC statistics on one batch."""
    T = transformers
    torch.manual_seed(0)
    config = T.BertConfig(**SMALL, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = _perturb(T.BertForMaskedLM(config))
    feed = _inputs(*TRAIN_SHAPE, seed=2)
    rng = np.random.default_rng(3)
    labels = np.full(TRAIN_SHAPE, -100, np.int64)
    chosen = (rng.random(TRAIN_SHAPE) < 0.25) & (feed["attention_mask"] == 1)
    labels[chosen] = rng.integers(5, SMALL["vocab_size"], size=int(chosen.sum()))
    path = workdir / "train.onnx"
    _export(_Outputs(model, ["logits"]), path, False, True, {"do_constant_folding": True}, feed)

    linears = {n: m for n, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and ".encoder.layer." in n}
    inputs, out_grads, hooks = {}, {}, []
    for n, m in linears.items():
        hooks.append(m.register_forward_hook(
            lambda mod, i, o, n=n: inputs.__setitem__(n, i[0].detach().double())))
        hooks.append(m.register_full_backward_hook(
            lambda mod, gi, go, n=n: out_grads.__setitem__(n, go[0].detach().double())))
    out = model(**{k: torch.from_numpy(v) for k, v in feed.items()},
                labels=torch.from_numpy(labels))
    out.loss.backward()
    for h in hooks:
        h.remove()

    np.savez(workdir / "train.in.npz", **feed, labels=labels, lr=np.array(0.0),
             step=np.array(1, np.int64))

    dims = ("--dim", f"batch={TRAIN_SHAPE[0]}", "--dim", f"sequence={TRAIN_SHAPE[1]}")

    def step(*extra, retie=True):
        dest = workdir / f"step{'-'.join(extra)}{'' if retie else '-no-retie'}.npz"
        model_arg, stderr = path, ""
        if not retie:  # pf-translate imports without retie; pf-run runs its IR
            model_arg = workdir / "untied.mlir"
            stderr = run_tool("pf-translate", "--import-onnx", path, *dims, "--no-retie",
                              "-o", model_arg).stderr
        proc = run_tool("pf-run", model_arg, "--training-step", "--clip-norm", "0",
                        "--inputs", workdir / "train.in.npz", "--outputs", dest,
                        *([] if not retie else dims), "--num-threads", "2", *extra)
        # The exporter named the initializers after the _Outputs wrapper's
        # attribute: "model.bert.…" is the model's "bert.…".
        data = np.load(dest)
        return {re.sub(r"^(grad|kfac/\w+)/model\.", r"\1/", k): data[k] for k in data.files}, \
            stderr + proc.stderr

    return dict(model=model, loss=out.loss.item(), labels=labels, inputs=inputs,
                out_grads=out_grads, step=step, path=path)


def _linear_weights(model):
    return {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}


def test_loss_and_gradients_match_torch(trained):
    got, stderr = trained["step"]()
    assert "tied back to it" in stderr  # pf-retie-weights found the decoder copy
    assert abs(float(got["loss"]) - trained["loss"]) <= 1e-5 * max(1.0, trained["loss"])
    model = trained["model"]
    params = dict(model.named_parameters())  # the tied decoder weight is listed once
    folded = _linear_weights(model)  # the exporter stored these [in, out]
    grads = {k[len("grad/"):]: got[k] for k in got if k.startswith("grad/")}
    assert sorted(grads) == sorted(params)  # pf's names are the model's
    for name, p in params.items():
        want = p.grad.numpy()
        g = grads[name].T if name in folded else grads[name]
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-6, err_msg=name)
    # The decoder's share is in the embedding's gradient: without it the two
    # would differ by far more than the tolerance.
    word = "bert.embeddings.word_embeddings.weight"
    assert np.abs(params[word].grad.numpy()).max() > 1e-2


def test_untied_decoder_copy_carries_the_decoders_share(trained):
    """--no-retie keeps the folded copy apart: its gradient (transposed) plus
    the embedding's equals torch's gradient of the one tied weight."""
    got, stderr = trained["step"](retie=False)
    assert "tied back" not in stderr
    word = "bert.embeddings.word_embeddings.weight"
    # pf-name-weights names the copy after the decoder's bias (cls.predictions.bias).
    copies = [k for k in got if k.startswith("grad/")
              and got[k].shape == (SMALL["hidden_size"], SMALL["vocab_size"])]
    assert copies == ["grad/cls.predictions.weight"], copies
    want = dict(trained["model"].named_parameters())[word].grad.numpy()
    alone = got[f"grad/{word}"]
    assert np.abs(alone - want).max() > 1e-3  # the embedding alone misses the decoder's share
    np.testing.assert_allclose(alone + got[copies[0]].T, want, rtol=1e-4, atol=1e-6)


def test_kfac_factors_match_torch_activations(trained):
    """A = E[a aᵀ] over the tokens of each encoder linear's input and
    B = count² E[g gᵀ] of its output gradient (count: the loss's tokens,
    docs/training.md), from torch's hooks, against the step's first factors."""
    got, _ = trained["step"]("--kfac")
    count = int((trained["labels"] != -100).sum())
    layers = sorted(trained["inputs"])
    assert sorted(k[len("kfac/A/"):] for k in got if k.startswith("kfac/A/")) == \
        sorted(f"{n}.weight" for n in layers)
    for n in layers:
        a = trained["inputs"][n].reshape(-1, trained["inputs"][n].shape[-1]).numpy()
        g = trained["out_grads"][n].reshape(-1, trained["out_grads"][n].shape[-1]).numpy()
        A = a.T @ a / a.shape[0]
        B = count**2 * (g.T @ g) / g.shape[0]
        np.testing.assert_allclose(got[f"kfac/A/{n}.weight"], A, rtol=1e-4,
                                   atol=1e-5 * np.abs(A).max(), err_msg=n)
        np.testing.assert_allclose(got[f"kfac/B/{n}.weight"], B, rtol=1e-4,
                                   atol=1e-4 * np.abs(B).max(), err_msg=n)
