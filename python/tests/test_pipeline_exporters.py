"""`mpirun -np 2 pf-train --pipeline` on every export layout the import tests
cover (issue 39): the stages find the model's parameters from the graph, not
from names only one exporter writes.

The layouts, all BERT with two encoder blocks and the tied decoder:

- ``transpose``: the Hugging Face layout (transformers' module names, weights
  ``[out, in]`` behind a Transpose), as transformers models export;
- ``pytorch``: PyTorch's TorchScript exporter with constant folding
  (``onnx::MatMul_N`` weights stored ``[in, out]``, the decoder a folded
  transposed copy of the word embedding, equal biases merged behind
  ``Identity``), test_exporter_layouts;
- ``anonymous``: every encoder initializer renamed ``onnx::Param_N`` (blocks
  only from the graph's structure), test_exporter_layouts;
- ``bool-mask``: the ``transpose`` layout with transformers 5's attention
  mask, a boolean one selecting the scores (``Where``) instead of one added
  to them: the backward keeps it, a stage value of i1;
- ``plain``: the ``pytorch`` layout of a BERT written in plain PyTorch
  (``torch.nn`` modules, no transformers): module names such as
  ``tok.weight``, ``blocks.0.attn.query.bias``, ``dense.bias`` that say
  nothing of embeddings or heads;
- ``plain-no-bias``: the same with bias-free attention linears, whose folded
  weights keep the exporter's ``onnx::MatMul_N`` (no bias to name them after);
- ``plain-own-layer-norm``: the same with the hand-written LayerNorm of many
  plain-PyTorch BERTs (``(x - mean) / (sqrt(var) + eps)``), which pf does not
  fuse into ``pf.layer_norm``: no LayerNorm cuts the model into halves;
- ``transformers``: transformers' BertForMaskedLM, and ``torch``,
  ``torch-no-bias``, ``torch-own-layer-norm``: the plain-PyTorch BERTs above,
  each exported by ``torch.onnx.export(do_constant_folding=True)`` itself
  when torch (and transformers) are installed; they are not project
  dependencies, so these are skipped without them.

Before the fix, a parameter whose name gave no encoder block and lacked
"embed" was taken for the head's: on the plain layouts the embeddings (and
with them every block) went to the end of the model and the first stage
kept only the parameter-free ops (attention mask, position ids). With the
hand-written LayerNorm that left the embeddings' ops and the rest as the
only two units, and the 2-rank pipeline failed to build with
"pf-add-optimizer: no result named grad/<parameter>"; with nn.LayerNorm the
cut put both blocks on the last rank (and grain=block or ends, or 3 stages,
failed the same way).

``bool-mask`` and ``transformers`` check another thing: a stage value of
type i1 (the boolean mask each Where's backward keeps) needs its byte per
element in the rank program's activation arena (pf::planStageValues); sized
0 bytes, it shared memory with other values and the pipeline's gradients
differed from single-process training.

Each layout trains 4 steps single-process (`--micro-batches 2`) and as a
2-rank 1F1B pipeline (`deterministic=true`), first-order and with K-FAC:
identical printed losses and bitwise-equal checkpoints, one encoder block on
each rank (the start-up lines), and K-FAC on all 12 encoder linears.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import onnx
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.corpus import make_corpus

from test_exporter_layouts import _anonymized
from test_pipeline_training import (MPIRUN, _assert_same_checkpoint, _load, _losses, _pipeline,
                                    _single)

pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not found")

STEPS = 4
SPEC = "stages=2 schedule=1f1b microbatches=2 deterministic=true"
TRAIN = ("--steps", str(STEPS), "--log-every", "1", "--lr", "2e-3", "--warmup", "1")

# The Hugging Face module paths of the generator's BERT and those of a BERT
# written in plain PyTorch (an nn.Module tree of its own).
PLAIN_NAMES = [
    (r"^bert\.embeddings\.word_embeddings\.", "tok."),
    (r"^bert\.embeddings\.position_embeddings\.", "pos."),
    (r"^bert\.embeddings\.token_type_embeddings\.", "typ."),
    (r"^bert\.embeddings\.LayerNorm\.", "norm."),
    (r"^bert\.embeddings\.position_ids$", "position_ids"),
    (r"^bert\.encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.", r"blocks.\1.attn.\2."),
    (r"^bert\.encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"blocks.\1.attn.out."),
    (r"^bert\.encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"blocks.\1.norm1."),
    (r"^bert\.encoder\.layer\.(\d+)\.intermediate\.dense\.", r"blocks.\1.ff1."),
    (r"^bert\.encoder\.layer\.(\d+)\.output\.dense\.", r"blocks.\1.ff2."),
    (r"^bert\.encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"blocks.\1.norm2."),
    (r"^cls\.predictions\.transform\.dense\.", "dense."),
    (r"^cls\.predictions\.transform\.LayerNorm\.", "head_norm."),
    (r"^cls\.predictions\.bias$", "decoder.bias"),
]


def _plain_name(name):
    for pattern, repl in PLAIN_NAMES:
        new, count = re.subn(pattern, repl, name)
        if count:
            return new
    return name


def _rename(model, rename):
    """Renames initializers and Identity outputs (the names a module tree
    gives them) and every use."""
    for t in model.graph.initializer:
        t.name = rename(t.name)
    for node in model.graph.node:
        node.input[:] = [rename(i) for i in node.input]
        if node.op_type == "Identity":
            node.output[:] = [rename(o) for o in node.output]


def _drop_biases(model, pattern):
    """The linears whose bias name matches `pattern` lose their bias: each
    `Add(bias, MatMul)` goes, its users read the MatMul."""
    biases = {n.output[0] for n in model.graph.node if n.op_type == "Identity"}
    biases |= {t.name for t in model.graph.initializer}
    biases = {b for b in biases if re.search(pattern, b)}
    replaced, kept = {}, []
    for node in model.graph.node:
        if node.op_type == "Add" and any(i in biases for i in node.input):
            (other,) = [i for i in node.input if i not in biases]
            replaced[node.output[0]] = other
        else:
            kept.append(node)
    for node in kept:
        node.input[:] = [replaced.get(i, i) for i in node.input]
    used = {i for node in kept for i in node.input}
    kept = [n for n in kept if n.op_type != "Identity" or n.output[0] in used]
    used = {i for node in kept for i in node.input}
    del model.graph.node[:]
    model.graph.node.extend(kept)
    inits = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(inits)
    assert replaced, pattern


def _eps_outside_the_root(model):
    """Every LayerNorm as a hand-written one computes it: x / (sqrt(var) +
    eps) instead of x / sqrt(var + eps), which pf does not fuse into a
    pf.layer_norm (so no LayerNorm cuts a block or the head in halves)."""
    nodes = list(model.graph.node)
    producer = {o: n for n in nodes for o in n.output}
    swapped = 0
    for root in nodes:
        add = producer.get(root.input[0]) if root.op_type == "Sqrt" else None
        if add is None or add.op_type != "Add":
            continue
        var, eps = add.input
        users = [n for n in nodes if root.output[0] in n.input]
        root.input[:] = [var]
        add.input[:] = [root.output[0], eps]
        for user in users:
            user.input[:] = [add.output[0] if i == root.output[0] else i for i in user.input]
        i, j = nodes.index(add), nodes.index(root)
        nodes[i], nodes[j] = nodes[j], nodes[i]
        swapped += 1
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    assert swapped == 1 + 2 * 2 + 1, swapped  # embeddings, 2 per block, head


def _boolean_mask(model):
    """The attention mask as transformers 5 exports it: a boolean mask and
    `Where(mask, scores, min)` on the scores instead of adding (1 - mask) *
    -10000. The backward of each Where keeps the mask, a stage value of i1."""
    nodes = list(model.graph.node)
    consumers = {}
    for n in nodes:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    (mul,) = [n for n in nodes if n.op_type == "Mul" and n.name.startswith("/bert/")
              and any(c.op_type == "Add" and "/attention/self/" in c.name
                      for c in consumers.get(n.output[0], []))]
    axes = onnx.helper.make_tensor("pf_mask_axes", onnx.TensorProto.INT64, [2], [1, 2])
    low = onnx.helper.make_tensor("pf_mask_min", onnx.TensorProto.FLOAT, [],
                                  [float(np.finfo(np.float32).min)])
    model.graph.initializer.extend([axes, low])
    head = [onnx.helper.make_node("Unsqueeze", ["attention_mask", "pf_mask_axes"],
                                  ["pf_mask_4d"], name="/bert/pf_mask/Unsqueeze"),
            onnx.helper.make_node("Cast", ["pf_mask_4d"], ["pf_mask_bool"],
                                  name="/bert/pf_mask/Cast", to=onnx.TensorProto.BOOL)]
    out = []
    for n in nodes:
        if n.op_type == "Add" and mul.output[0] in n.input:
            (scores,) = [i for i in n.input if i != mul.output[0]]
            n = onnx.helper.make_node("Where", ["pf_mask_bool", scores, "pf_mask_min"],
                                      list(n.output), name=n.name + "_where")
        out.append(n)
    del model.graph.node[:]
    model.graph.node.extend(head + out)


def _export_torch(path, vocab, attn_bias=True, own_layer_norm=False):
    """A BERT in plain PyTorch (torch.nn, no transformers), exported by the
    TorchScript exporter with constant folding."""
    torch = pytest.importorskip("torch")
    nn, F = torch.nn, torch.nn.functional

    class LayerNorm(nn.Module):
        """Hand-written, eps outside the root."""

        def __init__(self, h, eps=1e-6):
            super().__init__()
            self.a_2, self.b_2 = nn.Parameter(torch.ones(h)), nn.Parameter(torch.zeros(h))
            self.eps = eps

        def forward(self, x):
            mean = x.mean(-1, keepdim=True)
            std = ((x - mean) ** 2).mean(-1, keepdim=True).sqrt()
            return self.a_2 * (x - mean) / (std + self.eps) + self.b_2

    def layer_norm(h):
        return LayerNorm(h) if own_layer_norm else nn.LayerNorm(h, eps=1e-12)

    class Attention(nn.Module):
        def __init__(self, h, heads):
            super().__init__()
            self.heads = heads
            self.query, self.key, self.value, self.out = (
                nn.Linear(h, h, bias=attn_bias) for _ in range(4))

        def forward(self, x, mask):
            b, t, h = x.shape

            def split(y):
                return y.view(b, t, self.heads, h // self.heads).transpose(1, 2)

            q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
            att = (q @ k.transpose(-1, -2)) / (h // self.heads) ** 0.5 + mask
            return self.out((att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, h))

    class Block(nn.Module):
        def __init__(self, h, heads, ff):
            super().__init__()
            self.attn, self.norm1 = Attention(h, heads), layer_norm(h)
            self.ff1, self.ff2 = nn.Linear(h, ff), nn.Linear(ff, h)
            self.norm2 = layer_norm(h)

        def forward(self, x, mask):
            x = self.norm1(x + self.attn(x, mask))
            return self.norm2(x + self.ff2(F.gelu(self.ff1(x))))

    class Bert(nn.Module):
        def __init__(self, h=64, layers=2, heads=2, ff=128, positions=64):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, h), nn.Embedding(positions, h)
            self.typ, self.norm = nn.Embedding(2, h), layer_norm(h)
            self.blocks = nn.ModuleList(Block(h, heads, ff) for _ in range(layers))
            self.dense, self.head_norm = nn.Linear(h, h), layer_norm(h)
            self.decoder = nn.Linear(h, vocab)
            self.decoder.weight = self.tok.weight

        def forward(self, input_ids, attention_mask, token_type_ids):
            pos = torch.arange(input_ids.shape[1]).unsqueeze(0)
            x = self.norm(self.tok(input_ids) + self.pos(pos) + self.typ(token_type_ids))
            mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
            for block in self.blocks:
                x = block(x, mask)
            return self.decoder(self.head_norm(F.gelu(self.dense(x))))

    torch.manual_seed(0)
    model = Bert()
    with torch.no_grad():  # trained-looking biases: no equal initializers to merge
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn(p.shape) * 0.05)
    _torch_export(model.eval(), path)


def _torch_export(module, path):
    """torch.onnx.export with folded weights, BERT's three inputs and the
    logits, batch and sequence dynamic: what a user's plain export does."""
    torch = pytest.importorskip("torch")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    args = (torch.zeros(2, 16, dtype=torch.long), torch.ones(2, 16, dtype=torch.long),
            torch.zeros(2, 16, dtype=torch.long))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), dynamo=False, opset_version=14,
                          input_names=names, output_names=["logits"], do_constant_folding=True,
                          dynamic_axes={n: {0: "batch", 1: "sequence"}
                                        for n in [*names, "logits"]})


def _export_transformers(path, vocab):
    """transformers' BertForMaskedLM exported by the TorchScript exporter
    with constant folding (as test_torch_parity's trained model)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

    class Logits(torch.nn.Module):
        # Keyword arguments: BertForMaskedLM.forward of transformers 5 rejects
        # the TorchScript exporter's positional ones.
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).logits

    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)
    model = transformers.BertForMaskedLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn(p.shape) * 0.05)
    _torch_export(Logits(model).eval(), path)


STYLES = ["transpose", "pytorch", "anonymous", "bool-mask", "plain", "plain-no-bias",
          "plain-own-layer-norm", "transformers", "torch", "torch-no-bias",
          "torch-own-layer-norm"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pipeline_exporters")
    corpus = make_corpus(sequences=200, seq_len=16, seed=3)
    (tmp / "vocab_size").write_text(str(len(corpus.pop("vocab"))))
    np.savez(tmp / "corpus.npz", **corpus)
    return tmp


def _vocab(workdir):
    return int((workdir / "vocab_size").read_text())


def _model(workdir, style):
    path = workdir / f"{style}.onnx"
    if path.exists():
        return style
    vocab = _vocab(workdir)
    if style == "transformers":
        _export_transformers(path, vocab)
        return style
    if style.startswith("torch"):
        _export_torch(path, vocab, attn_bias=style != "torch-no-bias",
                      own_layer_norm=style == "torch-own-layer-norm")
        return style
    base = "transpose" if style in ("transpose", "anonymous", "bool-mask") else "pytorch"
    source = workdir / f"{base}-source.onnx"
    if not source.exists():
        save_model(make_bert_model("tiny", vocab_size=vocab, seed=4, style=base), source)
    if style == "anonymous":
        assert _anonymized(source, path) > 10
        return style
    model = onnx.load(str(source))
    if style == "bool-mask":
        _boolean_mask(model)
    if style.startswith("plain"):
        _rename(model, _plain_name)
    if style == "plain-no-bias":
        _drop_biases(model, r"^blocks\.\d+\.attn\.(query|key|value|out)\.bias$")
    if style == "plain-own-layer-norm":
        _eps_outside_the_root(model)
    onnx.save(model, str(path))
    return style


def _state_lines(stdout):
    return dict(re.findall(r"^rank (\d): stage \d+ \(encoder blocks ([\d ]*)\)", stdout, re.M))


@pytest.mark.parametrize("kfac", [False, True], ids=["adamw", "kfac"])
@pytest.mark.parametrize("style", STYLES)
def test_pipeline_equals_single_process_on_every_export_layout(workdir, tmp_path, style, kfac):
    model = _model(workdir, style)
    extra = ("--kfac", "--kfac-refresh", "1") if kfac else ()
    want_path, got_path = tmp_path / "single.npz", tmp_path / "pipeline.npz"
    single = _single(workdir, model, *TRAIN, "--micro-batches", "2", "--checkpoint", want_path,
                     *extra, timeout=180)
    proc = _pipeline(workdir, 2, model, SPEC, *TRAIN, "--checkpoint", got_path, *extra,
                     timeout=180)
    # One encoder block on each rank: the embeddings went to the first stage
    # and the head to the last, whatever their names.
    assert _state_lines(proc.stdout) == {"0": "0", "1": "1"}, proc.stdout
    losses = _losses(proc.stdout)
    assert [int(step) for step, _, _ in losses] == list(range(1, STEPS + 1)), proc.stdout
    assert losses == _losses(single.stdout)
    got, want = _load(got_path), _load(want_path)
    _assert_same_checkpoint(got, want)
    if kfac:
        # Every linear of both blocks is a K-FAC layer, the bias-free ones too
        # (placed in their block from the graph's structure).
        factors = [k for k in want if k.endswith(".kfac.A")]
        assert len(factors) == 12, sorted(factors)


@pytest.mark.parametrize("grain,stages", [("block", 2), ("ends", 2), ("half", 3)])
def test_plain_names_give_every_stage_parameters(workdir, grain, stages):
    """The cuts that failed on the plain layout: every stage updates
    parameters, the first the embeddings' tables."""
    from pipefisher.tools import run_tool

    model = workdir / f"{_model(workdir, 'plain')}.onnx"
    step = workdir / f"plain-{grain}-{stages}.mlir"
    ir = workdir / "plain-import.mlir"
    run_tool("pf-translate", "--import-onnx", model, "--dim", "batch=4", "--dim",
             "sequence=16", "-o", ir)
    run_tool("pf-opt", ir, f"--pf-pipelined-training=stages={stages} schedule=1f1b "
             f"micro-batches=2 grain={grain}", "-o", step)
    text = step.read_text()
    updates = re.findall(r"func\.func @stage(\d+)_update\(([^)]*)\)", text)
    assert [int(s) for s, _ in updates] == list(range(stages))
    for stage, args in updates:
        assert "grad/" in args, (stage, args)
    first = dict(updates)["0"]
    assert "grad/tok.weight" in first and "grad/pos.weight" in first
