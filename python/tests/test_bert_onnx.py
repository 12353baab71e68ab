"""Tests of pipefisher.bert_onnx: graph structure, ONNX Runtime numerics, CLI."""

from __future__ import annotations

import collections
import functools
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from pipefisher import bert_onnx
from pipefisher.bert_onnx import make_bert_model, save_model
from pipefisher.configs import CONFIGS, get_config

ort = pytest.importorskip("onnxruntime")

SMALL_VOCAB = 1000
BATCH, SEQ = 2, 16
PYTHON_DIR = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- helpers

@functools.lru_cache(maxsize=None)
def _model_bytes(**kw) -> bytes:
    kw.setdefault("vocab_size", SMALL_VOCAB)
    return make_bert_model("tiny", **kw).SerializeToString()


def model(**kw) -> onnx.ModelProto:
    return onnx.load_from_string(_model_bytes(**kw))


def inputs(vocab: int = SMALL_VOCAB, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.ones((BATCH, SEQ), np.int64)
    mask[1, 10:] = 0
    mask[0, 13:] = 0
    return {
        "input_ids": rng.integers(0, vocab, (BATCH, SEQ), dtype=np.int64),
        "token_type_ids": rng.integers(0, 2, (BATCH, SEQ), dtype=np.int64),
        "attention_mask": mask,
    }


def run_ort(m: onnx.ModelProto | str | bytes, feeds=None, optimize: bool = False) -> np.ndarray:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    if not optimize:  # execute the graph as written, not ORT's fused version of it
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    src = m.SerializeToString() if isinstance(m, onnx.ModelProto) else m
    sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    return sess.run(["logits"], feeds if feeds is not None else inputs())[0]


@functools.lru_cache(maxsize=None)
def _logits(**kw) -> np.ndarray:
    return run_ort(_model_bytes(**kw))


def producers(m: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {o: n for n in m.graph.node for o in n.output}


def consumers(m: onnx.ModelProto) -> dict[str, list[onnx.NodeProto]]:
    out = collections.defaultdict(list)
    for n in m.graph.node:
        for i in n.input:
            out[i].append(n)
    return out


def init_names(m: onnx.ModelProto) -> set[str]:
    return {t.name for t in m.graph.initializer}


def block_ops(m: onnx.ModelProto, layer: int) -> collections.Counter:
    prefix = f"/bert/encoder/layer.{layer}/"
    return collections.Counter(n.op_type for n in m.graph.node if n.name.startswith(prefix))


def const_value(m: onnx.ModelProto, name: str) -> np.ndarray:
    node = producers(m)[name]
    assert node.op_type == "Constant", (name, node.op_type)
    return numpy_helper.to_array(node.attribute[0].t)


# --------------------------------------------------------------------------- validity

def test_configs():
    assert [(c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.intermediate_size)
            for c in CONFIGS.values()] == [(2, 128, 2, 512), (4, 256, 4, 1024), (4, 512, 8, 2048),
                                           (8, 512, 8, 2048), (12, 768, 12, 3072),
                                           (24, 1024, 16, 4096)]
    c = get_config("base", vocab_size=100, num_hidden_layers=3)
    assert (c.vocab_size, c.num_hidden_layers, c.hidden_size, c.layer_norm_eps) == (100, 3, 768, 1e-12)
    assert get_config("base").num_parameters() == pytest.approx(110e6, rel=0.02)
    with pytest.raises(ValueError):
        get_config("huge")


@pytest.mark.parametrize("opset", [13, 14, 15, 16, 17, 18])
def test_checker(opset):
    m = model(opset=opset)
    onnx.checker.check_model(m, full_check=True)
    assert m.opset_import[0].version == opset
    names = [n.name for n in m.graph.node]
    assert all(names) and len(set(names)) == len(names), "node names must be unique"
    outs = [o for n in m.graph.node for o in n.output]
    assert len(set(outs)) == len(outs)


def test_interface_full_vocab_runs_in_ort():
    m = make_bert_model("tiny")
    onnx.checker.check_model(m, full_check=True)
    g = m.graph
    assert [i.name for i in g.input] == ["input_ids", "token_type_ids", "attention_mask"]
    for i in g.input:
        assert i.type.tensor_type.elem_type == onnx.TensorProto.INT64
        assert [d.dim_param for d in i.type.tensor_type.shape.dim] == ["batch", "sequence"]
    (o,) = g.output
    assert o.name == "logits" and o.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    dims = o.type.tensor_type.shape.dim
    assert [dims[0].dim_param, dims[1].dim_param, dims[2].dim_value] == ["batch", "sequence", 30522]
    logits = run_ort(m, inputs(vocab=30522))
    assert logits.shape == (BATCH, SEQ, 30522) and logits.dtype == np.float32
    assert np.isfinite(logits).all()
    assert logits.std() > 1e-3


# --------------------------------------------------------------------------- structure

@pytest.mark.parametrize("style", ["transpose", "pytorch"])
def test_block_structure(style):
    m = model(style=style)
    n_t = 6 if style == "transpose" else 0   # one Transpose per linear weight
    for layer in range(2):
        ops = block_ops(m, layer)
        assert ops["MatMul"] == 8              # 6 linears + QK^T + PV
        assert ops["Erf"] == 1
        assert ops["Softmax"] == 1
        assert ops["ReduceMean"] == 4          # 2 LayerNorms
        assert ops["Pow"] == 2 and ops["Sqrt"] == 2
        assert ops["Reshape"] == 4 and ops["Concat"] == 4
        assert ops["Transpose"] == 4 + n_t
        assert ops["Shape"] == 8 and ops["Gather"] == 8
        assert ops["Div"] == 1 + 2 + 1          # scale, 2 LayerNorms, GELU
        assert ops["Tanh"] == 0
    total = collections.Counter(n.op_type for n in m.graph.node)
    assert total["MatMul"] == 2 * 8 + 2         # + head transform + decoder
    assert total["Softmax"] == 2 and total["Erf"] == 3
    assert total["ReduceMean"] == 2 * 4 + 4     # + embeddings and head LayerNorms


def test_embeddings_and_mask_ops():
    m = model()
    prod, cons = producers(m), consumers(m)
    gathers = {n.input[0]: n for n in m.graph.node if n.op_type == "Gather"}
    assert gathers["bert.embeddings.word_embeddings.weight"].input[1] == "input_ids"
    assert gathers["bert.embeddings.token_type_embeddings.weight"].input[1] == "token_type_ids"
    pos = gathers["bert.embeddings.position_embeddings.weight"]
    sl = prod[pos.input[1]]
    assert sl.op_type == "Slice" and sl.input[0] == "bert.embeddings.position_ids"
    assert const_value(m, sl.input[1]).tolist() == [0]
    assert const_value(m, sl.input[3]).tolist() == [1]
    unsq = prod[sl.input[2]]
    assert unsq.op_type == "Unsqueeze" and const_value(m, unsq.input[1]).tolist() == [0]
    seq = prod[unsq.input[0]]
    assert seq.op_type == "Gather" and const_value(m, seq.input[1]).shape == ()
    assert int(const_value(m, seq.input[1])) == 1
    assert prod[seq.input[0]].op_type == "Shape" and prod[seq.input[0]].input[0] == "input_ids"
    pid = numpy_helper.to_array(next(t for t in m.graph.initializer
                                     if t.name == "bert.embeddings.position_ids"))
    assert pid.dtype == np.int64 and pid.tolist() == [list(range(512))]

    # Add(Add(word, token_type), position) -> LayerNorm
    add2 = cons[pos.output[0]][0]
    add1 = prod[add2.input[0]]
    assert add2.op_type == add1.op_type == "Add"
    assert list(add1.input) == [gathers["bert.embeddings.word_embeddings.weight"].output[0],
                                gathers["bert.embeddings.token_type_embeddings.weight"].output[0]]
    assert [n.op_type for n in cons[add2.output[0]]] == ["ReduceMean", "Sub"]

    # extended mask chain
    chain, x = [], "attention_mask"
    while len(cons[x]) == 1 and not cons[x][0].name.startswith("/bert/encoder"):
        n = cons[x][0]
        chain.append(n)
        x = n.output[0]
    assert [n.op_type for n in chain] == ["Unsqueeze", "Unsqueeze", "Cast", "Sub", "Mul"]
    assert const_value(m, chain[0].input[1]).tolist() == [1]
    assert const_value(m, chain[1].input[1]).tolist() == [2]
    assert chain[2].attribute[0].i == onnx.TensorProto.FLOAT
    assert float(const_value(m, chain[3].input[0])) == 1.0 and chain[3].input[1] == chain[2].output[0]
    assert float(const_value(m, chain[4].input[1])) == -10000.0
    assert {n.op_type for n in cons[x]} == {"Add"} and len(cons[x]) == 2   # one per layer
    mmin = model(mask_value="min")
    muls = [n for n in mmin.graph.node if n.name == chain[4].name]
    assert float(const_value(mmin, muls[0].input[1])) == np.finfo(np.float32).min


@pytest.mark.parametrize("opset", [14, 18])
def test_layernorm_decomposition(opset):
    m = model(opset=opset)
    scope = "/bert/encoder/layer.0/output/LayerNorm/"
    nodes = [n for n in m.graph.node if n.name.startswith(scope) and n.op_type != "Constant"]
    assert [n.op_type for n in nodes] == ["ReduceMean", "Sub", "Pow", "ReduceMean", "Add",
                                          "Sqrt", "Div", "Mul", "Add"]
    rm1, sub, pw, rm2, add, sq, div, mul, add2 = nodes
    x = rm1.input[0]
    assert list(sub.input) == [x, rm1.output[0]] and pw.input[0] == sub.output[0]
    assert float(const_value(m, pw.input[1])) == 2.0
    assert rm2.input[0] == pw.output[0] and add.input[0] == rm2.output[0]
    assert const_value(m, add.input[1]).dtype == np.float32
    assert float(const_value(m, add.input[1])) == pytest.approx(1e-12)
    assert sq.input[0] == add.output[0] and list(div.input) == [sub.output[0], sq.output[0]]
    # the weight is the output of an Identity (deduped) or an initializer, by HF name
    assert list(mul.input) == [div.output[0], "bert.encoder.layer.0.output.LayerNorm.weight"]
    assert list(add2.input) == [mul.output[0], "bert.encoder.layer.0.output.LayerNorm.bias"]
    for rm in (rm1, rm2):
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in rm.attribute}
        assert attrs["keepdims"] == 1
        if opset >= 18:
            assert "axes" not in attrs and const_value(m, rm.input[1]).tolist() == [-1]
        else:
            assert attrs["axes"] == [-1] and len(rm.input) == 1


def test_layernorm_op():
    m = model(opset=17, layernorm_op=True)
    ops = collections.Counter(n.op_type for n in m.graph.node)
    assert ops["LayerNormalization"] == 2 + 2 * 2 and ops["ReduceMean"] == 0
    ln = next(n for n in m.graph.node if n.op_type == "LayerNormalization")
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in ln.attribute}
    assert attrs["axis"] == -1 and attrs["epsilon"] == pytest.approx(1e-12)
    with pytest.raises(ValueError):
        make_bert_model("tiny", opset=16, layernorm_op=True, weights=False)


@pytest.mark.parametrize("gelu", ["erf", "tanh"])
def test_gelu_ops(gelu):
    m = model(gelu=gelu)
    scope = "/bert/encoder/layer.1/intermediate/intermediate_act_fn/"
    nodes = [n for n in m.graph.node if n.name.startswith(scope) and n.op_type != "Constant"]
    x = "/bert/encoder/layer.1/intermediate/dense/Add_output_0"
    if gelu == "erf":
        assert [n.op_type for n in nodes] == ["Div", "Erf", "Add", "Mul", "Mul"]
        div, erf, add, mul1, mul2 = nodes
        assert div.input[0] == x and float(const_value(m, div.input[1])) == np.float32(1.4142135)
        assert float(const_value(m, add.input[1])) == 1.0
        assert list(mul1.input) == [x, add.output[0]]
        assert mul2.input[0] == mul1.output[0] and float(const_value(m, mul2.input[1])) == 0.5
    else:
        assert [n.op_type for n in nodes] == ["Mul", "Pow", "Mul", "Add", "Mul", "Tanh", "Add",
                                              "Mul"]
        half, pw = nodes[0], nodes[1]
        assert half.input[0] == x and pw.input[0] == x
        assert float(const_value(m, pw.input[1])) == 3.0
        assert float(const_value(m, nodes[2].input[1])) == np.float32(0.044715)
        assert list(nodes[3].input) == [x, nodes[2].output[0]]
        assert float(const_value(m, nodes[4].input[1])) == np.float32(np.sqrt(2 / np.pi))
        assert list(nodes[7].input) == [half.output[0], nodes[6].output[0]]
        assert collections.Counter(n.op_type for n in m.graph.node)["Erf"] == 0


def test_attention_ops():
    m = model()
    prod, cons = producers(m), consumers(m)
    sc = "/bert/encoder/layer.0/attention/self"
    sm = next(n for n in m.graph.node if n.op_type == "Softmax" and n.name.startswith(sc))
    assert onnx.helper.get_attribute_value(sm.attribute[0]) == -1
    add = prod[sm.input[0]]
    div = prod[add.input[0]]
    qk = prod[div.input[0]]
    assert (add.op_type, div.op_type, qk.op_type) == ("Add", "Div", "MatMul")
    assert prod[add.input[1]].name == "/bert/Mul"
    assert float(const_value(m, div.input[1])) == 8.0   # sqrt(128 / 2)
    perms = []
    for t in qk.input:
        tr = prod[t]
        assert tr.op_type == "Transpose"
        perms.append(list(tr.attribute[0].ints))
        rs = prod[tr.input[0]]
        assert rs.op_type == "Reshape"
        cat = prod[rs.input[1]]
        assert cat.op_type == "Concat"
        assert const_value(m, cat.input[2]).tolist() == [2]
        assert const_value(m, cat.input[3]).tolist() == [64]
        for k, u in enumerate(cat.input[:2]):
            g = prod[prod[u].input[0]]
            assert g.op_type == "Gather" and int(const_value(m, g.input[1])) == k
            assert prod[g.input[0]].op_type == "Shape"
            assert prod[g.input[0]].input[0] == rs.input[0]
    assert perms == [[0, 2, 1, 3], [0, 2, 3, 1]]
    pv = cons[sm.output[0]][0]
    assert pv.op_type == "MatMul"
    assert list(prod[pv.input[1]].attribute[0].ints) == [0, 2, 1, 3]
    tr = cons[pv.output[0]][0]
    assert tr.op_type == "Transpose" and list(tr.attribute[0].ints) == [0, 2, 1, 3]
    rs = next(n for n in cons[tr.output[0]] if n.op_type == "Reshape")
    assert const_value(m, prod[rs.input[1]].input[2]).tolist() == [128]
    dense = cons[rs.output[0]][0]
    assert dense.op_type == "MatMul" and dense.name.startswith(
        "/bert/encoder/layer.0/attention/output/dense/")


def test_linear_styles():
    mt, mp = model(), model(style="pytorch")
    prod = producers(mt)
    mm = next(n for n in mt.graph.node if n.name == "/bert/encoder/layer.0/attention/self/query/MatMul")
    tr = prod[mm.input[1]]
    assert tr.op_type == "Transpose" and list(tr.attribute[0].ints) == [1, 0]
    assert tr.input[0] == "bert.encoder.layer.0.attention.self.query.weight"
    add = consumers(mt)[mm.output[0]][0]
    assert list(add.input) == [mm.output[0], "bert.encoder.layer.0.attention.self.query.bias"]
    w = {t.name: tuple(t.dims) for t in mt.graph.initializer}
    assert w["bert.encoder.layer.0.intermediate.dense.weight"] == (512, 128)

    names = init_names(mp)
    assert not any(n.endswith(".dense.weight") or n.endswith("query.weight") for n in names)
    mm_inits = sorted((t.name, tuple(t.dims)) for t in mp.graph.initializer
                      if t.name.startswith("onnx::MatMul_"))
    # Two blocks of six linears, the head's transform, the folded decoder.
    assert len(mm_inits) == 2 * 6 + 2
    nums = sorted(int(n.rsplit("_", 1)[1]) for n, _ in mm_inits)
    assert nums == list(range(nums[0], nums[0] + 14))
    mm = next(n for n in mp.graph.node if n.name == "/bert/encoder/layer.0/intermediate/dense/MatMul")
    assert mm.input[1].startswith("onnx::MatMul_") and mm.input[1] in names
    assert dict(mm_inits)[mm.input[1]] == (128, 512)
    add = consumers(mp)[mm.output[0]][0]
    assert list(add.input) == ["bert.encoder.layer.0.intermediate.dense.bias", mm.output[0]]
    assert not any(n.op_type == "Transpose" and n.input[0].startswith("onnx::")
                   for n in mp.graph.node)


def test_tied_decoder():
    m = model()
    prod = producers(m)
    assert not any("decoder" in t.name for t in m.graph.initializer)
    vh = [t.name for t in m.graph.initializer if tuple(t.dims) == (SMALL_VOCAB, 128)]
    assert vh == ["bert.embeddings.word_embeddings.weight"]
    add = prod["logits"]
    assert add.op_type == "Add" and "cls.predictions.bias" in add.input
    mm = prod[next(i for i in add.input if i != "cls.predictions.bias")]
    assert mm.op_type == "MatMul"
    tr = prod[mm.input[1]]
    assert tr.op_type == "Transpose" and list(tr.attribute[0].ints) == [1, 0]
    assert tr.input[0] == "bert.embeddings.word_embeddings.weight"
    ln_add = prod[mm.input[0]]
    assert ln_add.name.startswith("/cls/predictions/transform/LayerNorm/")
    bias = next(t for t in m.graph.initializer if t.name == "cls.predictions.bias")
    assert tuple(bias.dims) == (SMALL_VOCAB,)


def test_folded_decoder_in_pytorch_style():
    # As torch.onnx.export's constant folding leaves it: the decoder reads
    # its own [hidden, vocab] initializer, the embedding's transpose.
    m = model(style="pytorch")
    prod = producers(m)
    add = prod["logits"]
    assert list(add.input)[0] == "cls.predictions.bias"
    mm = prod[add.input[1]]
    assert mm.op_type == "MatMul" and mm.input[1].startswith("onnx::MatMul_")
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    decoder, word = inits[mm.input[1]], inits["bert.embeddings.word_embeddings.weight"]
    assert decoder.shape == (128, SMALL_VOCAB)
    np.testing.assert_array_equal(decoder, word.T)


# --------------------------------------------------------------------------- dedupe

def test_dedupe_identity_nodes():
    m = model()
    names = init_names(m)
    ids = [n for n in m.graph.node if n.op_type == "Identity"]
    assert ids and m.graph.node[:len(ids)] == ids     # Identity nodes come first
    for n in ids:
        assert n.input[0] in names and n.output[0] not in names
    alias = {n.output[0]: n.input[0] for n in ids}
    assert alias["bert.encoder.layer.1.output.LayerNorm.weight"] == "bert.embeddings.LayerNorm.weight"
    assert alias["cls.predictions.transform.LayerNorm.bias"] == "bert.embeddings.LayerNorm.bias"
    assert alias["bert.encoder.layer.0.attention.self.query.bias"] == "bert.embeddings.LayerNorm.bias"
    assert alias["bert.encoder.layer.1.intermediate.dense.bias"] == \
        "bert.encoder.layer.0.intermediate.dense.bias"
    assert "bert.encoder.layer.0.attention.self.key.weight" in names
    # every HF name is still present as an initializer or an Identity output
    nd = model(dedupe=False)
    assert not any(n.op_type == "Identity" for n in nd.graph.node)
    assert init_names(nd) == names | set(alias)
    assert len(m.graph.initializer) + len(ids) == len(nd.graph.initializer)
    # still runs, same numbers (also covered by test_variants_same_logits)
    np.testing.assert_array_equal(_logits(), _logits(dedupe=False))


def test_shapes_only_matches_weights_structure():
    full, shapes = model(), model(weights=False)
    assert [(n.op_type, n.name, list(n.input), list(n.output)) for n in full.graph.node] == \
        [(n.op_type, n.name, list(n.input), list(n.output)) for n in shapes.graph.node]
    assert [(t.name, t.data_type, list(t.dims)) for t in full.graph.initializer] == \
        [(t.name, t.data_type, list(t.dims)) for t in shapes.graph.initializer]
    for t in shapes.graph.initializer:
        assert t.data_location == onnx.TensorProto.EXTERNAL and not t.raw_data


# --------------------------------------------------------------------------- numerics

def test_weights_seeded():
    a = model(seed=0).graph.initializer
    b = make_bert_model("tiny", seed=0, vocab_size=SMALL_VOCAB).graph.initializer
    c = model(seed=1).graph.initializer
    assert [t.raw_data for t in a] == [t.raw_data for t in b]
    w = {t.name: numpy_helper.to_array(t) for t in a}
    w1 = {t.name: numpy_helper.to_array(t) for t in c}
    q = "bert.encoder.layer.0.attention.self.query.weight"
    assert w[q].dtype == np.float32 and abs(w[q].std() - 0.02) < 0.002
    assert not np.array_equal(w[q], w1[q])
    assert np.array_equal(w["bert.embeddings.LayerNorm.weight"], np.ones(128, np.float32))
    assert np.array_equal(w["bert.embeddings.LayerNorm.bias"], np.zeros(128, np.float32))
    assert not np.array_equal(_logits(seed=0), _logits(seed=1))
    # pytorch style stores the same drawn weight, transposed
    p = {t.name: numpy_helper.to_array(t) for t in model(style="pytorch").graph.initializer}
    assert np.array_equal(p["onnx::MatMul_1"], w[q].T)


VARIANTS = [
    dict(style="pytorch"),
    dict(opset=13),
    dict(opset=18),
    dict(opset=17, layernorm_op=True),
    dict(dedupe=False),
    dict(mask_value="min"),
    dict(style="pytorch", opset=18, dedupe=False),
]


@pytest.mark.parametrize("kw", VARIANTS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_variants_same_logits(kw):
    ref = _logits()
    out = _logits(**kw)
    assert out.shape == (BATCH, SEQ, SMALL_VOCAB) and np.isfinite(out).all()
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-5)


@pytest.mark.parametrize("kw", [dict(gelu="tanh"), dict(gelu="tanh", style="pytorch", opset=18)],
                         ids=["tanh", "tanh-pytorch-18"])
def test_gelu_tanh_logits_close(kw):
    # tanh-GELU is an approximation of erf-GELU (|diff| up to ~3e-4 at |x|~2), so with these
    # weights the logits agree to ~1e-4, not bit for bit; all tanh variants agree with each other.
    ref, out = _logits(), _logits(**kw)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, ref, rtol=0, atol=5e-4)
    assert not np.array_equal(out, ref)
    np.testing.assert_allclose(out, _logits(gelu="tanh"), rtol=0, atol=1e-5)


def test_mask_matters_and_padding_ignored():
    m = model()
    feeds = inputs()
    base = run_ort(m, feeds)
    # changing tokens at masked positions leaves unmasked positions' logits unchanged
    f2 = {k: v.copy() for k, v in feeds.items()}
    f2["input_ids"][1, 10:] = (f2["input_ids"][1, 10:] + 7) % SMALL_VOCAB
    out = run_ort(m, f2)
    np.testing.assert_allclose(out[1, :10], base[1, :10], rtol=0, atol=1e-5)
    assert not np.allclose(out[1, 10:], base[1, 10:])
    f3 = {k: v.copy() for k, v in feeds.items()}
    f3["attention_mask"][:] = 1
    assert not np.allclose(run_ort(m, f3)[1, :10], base[1, :10])


def test_ort_fusions_recognize_patterns(tmp_path):
    # ORT's graph fusions target PyTorch exports: they must find our LayerNorm and GELU.
    for gelu, fused in (("erf", "BiasGelu"), ("tanh", "FastGelu")):
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = str(tmp_path / f"opt_{gelu}.onnx")
        ort.InferenceSession(_model_bytes(gelu=gelu), so, providers=["CPUExecutionProvider"])
        ops = collections.Counter(n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node)
        assert ops["LayerNormalization"] == 6 and ops["ReduceMean"] == 0
        assert ops[fused] == 3 and ops["Erf"] == 0 and ops["Tanh"] == 0


# --------------------------------------------------------------------------- files and CLI

def test_shapes_only_large_fast(tmp_path):
    t0 = time.perf_counter()
    m = make_bert_model("large", weights=False)
    path = tmp_path / "large.onnx"
    save_model(m, path)
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0, f"shapes-only large took {elapsed:.1f}s"
    assert path.stat().st_size < 5 * 2**20
    assert not (tmp_path / "large.weights-not-written").exists()
    with pytest.raises(Exception):
        onnx.load(str(path))                 # the data file deliberately does not exist
    ml = onnx.load(str(path), load_external_data=False)
    with pytest.raises(onnx.checker.ValidationError, match="weights-not-written"):
        onnx.checker.check_model(ml)        # the checker looks for the data file (see docstring)
    dims = {t.name: list(t.dims) for t in ml.graph.initializer}
    assert dims["bert.embeddings.word_embeddings.weight"] == [30522, 1024]
    assert dims["bert.embeddings.position_embeddings.weight"] == [512, 1024]
    assert dims["bert.embeddings.position_ids"] == [1, 512]
    assert dims["bert.encoder.layer.23.attention.self.query.weight"] == [1024, 1024]
    assert dims["bert.encoder.layer.23.intermediate.dense.weight"] == [4096, 1024]
    assert dims["bert.encoder.layer.23.output.dense.weight"] == [1024, 4096]
    assert dims["cls.predictions.bias"] == [30522]
    assert "bert.encoder.layer.24.output.dense.weight" not in dims
    for t in ml.graph.initializer:
        ext = {e.key: e.value for e in t.external_data}
        assert t.data_location == onnx.TensorProto.EXTERNAL
        assert ext["location"] == "large.weights-not-written"
    assert sum(1 for n in ml.graph.node if n.op_type == "Softmax") == 24
    props = {p.key: p.value for p in ml.metadata_props}
    assert props["pf.weights"] == "not-written" and props["pf.hidden_size"] == "1024"
    # shapes are complete: every parameter name is an initializer or Identity output
    alias = {n.output[0] for n in ml.graph.node if n.op_type == "Identity"}
    assert "bert.encoder.layer.23.output.LayerNorm.weight" in alias | set(dims)


def test_cli_module(tmp_path):
    out = tmp_path / "m.onnx"
    env = (dict(os.environ) if os.environ.get("PF_TEST_INSTALLED") == "1"  # the installed package
           else dict(os.environ, PYTHONPATH=str(PYTHON_DIR)))
    r = subprocess.run([sys.executable, "-m", "pipefisher.bert_onnx", "--config", "mini",
                        "--out", str(out), "--no-weights", "--style", "pytorch", "--gelu", "tanh",
                        "--opset", "18", "--layers", "3", "--vocab", "100"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip().splitlines()) == 1 and "mini" in r.stdout
    assert "Warning" not in r.stderr
    m = onnx.load(str(out), load_external_data=False)
    assert m.opset_import[0].version == 18
    assert sum(1 for n in m.graph.node if n.op_type == "Softmax") == 3
    assert sum(1 for n in m.graph.node if n.op_type == "Tanh") == 4
    dims = {t.name: list(t.dims) for t in m.graph.initializer}
    assert dims["bert.embeddings.word_embeddings.weight"] == [100, 256]
    r = subprocess.run([sys.executable, "-m", "pipefisher.bert_onnx", "--out", str(out),
                        "--opset", "12"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "opset" in r.stderr


def test_cli_external_data_runs(tmp_path, capsys):
    out = tmp_path / "ext.onnx"
    assert bert_onnx.main(["--config", "tiny", "--vocab", str(SMALL_VOCAB), "--out", str(out),
                           "--external-data"]) == 0
    assert "tiny" in capsys.readouterr().out
    data = tmp_path / "ext.data"
    assert data.exists() and data.stat().st_size > 2**20 > out.stat().st_size
    # rerunning replaces (does not append to) the data file
    size = data.stat().st_size
    assert bert_onnx.main(["--config", "tiny", "--vocab", str(SMALL_VOCAB), "--out", str(out),
                           "--external-data"]) == 0
    assert data.stat().st_size == size
    np.testing.assert_array_equal(run_ort(str(out)), _logits())
    m = onnx.load(str(out))
    onnx.checker.check_model(str(out))
    w = next(t for t in m.graph.initializer if t.name == "bert.embeddings.word_embeddings.weight")
    assert numpy_helper.to_array(w).shape == (SMALL_VOCAB, 128)


def test_save_plain(tmp_path):
    path = tmp_path / "sub" / "plain.onnx"
    save_model(model(), path)
    np.testing.assert_array_equal(run_ort(str(path)), _logits())
    onnx.checker.check_model(str(path), full_check=True)


def test_bad_arguments():
    for kw in (dict(opset=12), dict(style="keras"), dict(gelu="relu")):
        with pytest.raises(ValueError):
            make_bert_model("tiny", weights=False, **kw)
    with pytest.raises(ValueError):
        save_model(make_bert_model("tiny", weights=False), "unused.onnx", external_data=True)
