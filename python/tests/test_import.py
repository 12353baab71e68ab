"""End-to-end import of generated BERT models with pf-translate: op counts per
encoder block after the graph passes, weights carried over bit-exactly, and
shapes-only import of BERT-Large."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.tools import import_summary, run_tool

DIMS = ("--dim", "batch=2", "--dim", "sequence=16")


def _save(tmp_path, name="m.onnx", **kwargs):
    model = make_bert_model(**kwargs)
    path = tmp_path / name
    save_model(model, path)
    return path, model


def _assert_blocks(summary, layers, linear=6, layer_norm=2, gelu=1):
    blocks = summary["blocks"]
    assert [b["block"] for b in blocks] == list(range(layers))
    for b in blocks:
        assert (b["linear"], b["layer_norm"], b["gelu"]) == (linear, layer_norm, gelu), b


@pytest.mark.parametrize("style", ["transpose", "pytorch"])
@pytest.mark.parametrize("gelu", ["erf", "tanh"])
@pytest.mark.parametrize("opset", [14, 18])
def test_tiny_fuses_per_block(tmp_path, style, gelu, opset):
    path, _ = _save(tmp_path, config="tiny", style=style, gelu=gelu, opset=opset,
                    vocab_size=1000)
    summary = import_summary(path, *DIMS)
    _assert_blocks(summary, layers=2)
    # Embeddings, 2 per block, and the head's transform each have a LayerNorm.
    assert summary["ops"]["pf.layer_norm"] == 6
    assert summary["ops"]["pf.gelu"] == 3
    # The head: transform.dense and the tied decoder.
    assert summary["linear_outside_blocks"] == 2
    # Nothing of the decomposed patterns is left.
    for op in ("pf.erf", "pf.tanh", "pf.sqrt", "pf.pow", "pf.reduce_mean", "pf.gemm"):
        assert op not in summary["ops"], op
    assert summary["outputs"] == [{"name": "logits", "type": "tensor<2x16x1000xf32>"}]


def test_layernorm_op_import(tmp_path):
    path, _ = _save(tmp_path, config="tiny", opset=17, layernorm_op=True, vocab_size=1000)
    summary = import_summary(path, *DIMS)
    _assert_blocks(summary, layers=2)
    assert "pf.layer_normalization" not in summary["ops"]


def test_untied_parameters_keep_their_names(tmp_path):
    path, model = _save(tmp_path, config="tiny", vocab_size=1000)
    identities = [n for n in model.graph.node if n.op_type == "Identity"]
    assert identities, "the exporter-style model should de-duplicate initializers"
    summary = import_summary(path, *DIMS)
    # Every initializer except position_ids (a constant) plus every Identity
    # alias becomes its own parameter.
    assert summary["parameters"] == len(model.graph.initializer) - 1 + len(identities)
    assert summary["parameters_with_data"] == summary["parameters"]


def _resource_blobs(ir_text: str) -> dict[str, bytes]:
    blobs = {}
    for key, hexdata in re.findall(r'^\s*"?([\w.]+)"?: "0x([0-9A-F]+)"', ir_text, re.M):
        raw = bytes.fromhex(hexdata)
        blobs[key] = raw[4:]  # the first 4 bytes hold the blob's alignment
    return blobs


@pytest.mark.parametrize("external", [False, True])
def test_weights_are_carried_bit_exactly(tmp_path, external):
    model = make_bert_model("tiny", vocab_size=1000, num_hidden_layers=1, seed=3)
    path = tmp_path / "w.onnx"
    save_model(model, path, external_data=external)
    ir = run_tool("pf-translate", "--import-onnx", str(path), *DIMS).stdout
    blobs = _resource_blobs(ir)
    reference = onnx.load(str(path))
    checked = 0
    for init in reference.graph.initializer:
        array = onnx.numpy_helper.to_array(init, base_dir=str(tmp_path))
        if array.dtype != np.float32 or init.name not in blobs:
            continue
        got = np.frombuffer(blobs[init.name], dtype=np.float32).reshape(array.shape)
        np.testing.assert_array_equal(got, array)
        checked += 1
    assert checked >= 10


def test_large_shapes_only(tmp_path):
    model = make_bert_model("large", weights=False)
    path = tmp_path / "large.onnx"
    save_model(model, path)
    summary = import_summary(path, "--no-weights", "--dim", "batch=8", "--dim", "sequence=128")
    _assert_blocks(summary, layers=24)
    assert summary["parameters_with_data"] == 0
    assert summary["outputs"][0]["type"] == "tensor<8x128x30522xf32>"


def test_missing_file_is_an_error(tmp_path):
    proc = run_tool("pf-translate", "--import-onnx", str(tmp_path / "nope.onnx"), check=False)
    assert proc.returncode != 0
    assert "cannot read" in proc.stderr and "nope.onnx" in proc.stderr


def test_dynamic_dims_must_be_fixed(tmp_path):
    path, _ = _save(tmp_path, config="tiny", vocab_size=1000)
    proc = run_tool("pf-translate", "--import-onnx", str(path), check=False)
    assert proc.returncode != 0
    assert "input_ids" in proc.stderr and "--dim batch=N" in proc.stderr


def _hf_patterns_model(path):
    """The newer ops in the shapes Hugging Face exports use them: position ids
    from Range over the folded sequence length and from a CumSum of the
    attention mask (RoBERTa), a causal mask from Trilu, Clip, ReduceMax/Min,
    Flatten, GatherND, ScatterND and a NaN/inf guard (IsNaN, IsInf)."""
    from onnx import TensorProto, helper

    def const(name, value, dtype=np.int64):
        return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(
            np.array(value, dtype=dtype), name))

    nodes = [
        helper.make_node("Shape", ["ids"], ["shape"]),
        const("one", 1), const("zero", 0), const("axis1", [1]), const("last", [-1]),
        helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
        helper.make_node("CumSum", ["mask", "one"], ["cum"]),
        helper.make_node("Mul", ["cum", "mask"], ["cum_masked"]),
        helper.make_node("Add", ["cum_masked", "pos"], ["positions"]),
        const("square", [8, 8]),
        helper.make_node("ConstantOfShape", ["square"], ["ones"],
                         value=onnx.numpy_helper.from_array(np.array([1.0], np.float32))),
        helper.make_node("Trilu", ["ones"], ["causal"], upper=0),
        helper.make_node("MatMul", ["causal", "x"], ["prefix"]),
        helper.make_node("IsNaN", ["prefix"], ["nan"]),
        helper.make_node("IsInf", ["prefix"], ["inf"]),
        helper.make_node("Or", ["nan", "inf"], ["bad"]),
        const("fzero", 0.0, np.float32),
        helper.make_node("Where", ["bad", "fzero", "prefix"], ["clean"]),
        const("lo", -1.5, np.float32), const("hi", 2.0, np.float32),
        helper.make_node("Clip", ["clean", "lo", "hi"], ["clipped"]),
        helper.make_node("ReduceMax", ["clipped", "last"], ["rmax"], keepdims=1),
        helper.make_node("ReduceMin", ["clipped", "axis1"], ["rmin"], keepdims=0),
        helper.make_node("Sub", ["clipped", "rmax"], ["shifted"]),
        helper.make_node("Flatten", ["shifted"], ["flat"], axis=2),
        const("picks", [[0, 7], [1, 0], [1, 3]]),
        helper.make_node("GatherND", ["shifted", "picks"], ["picked"]),
        const("zero1", [0]), const("two1", [2]),
        helper.make_node("Slice", ["picked", "zero1", "two1"], ["picked2"]),
        const("rows", [[1, 2], [0, 0]]),
        helper.make_node("ScatterND", ["shifted", "rows", "picked2"], ["scattered"],
                         reduction="add"),
    ]
    graph = helper.make_graph(
        nodes, "hf_patterns",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 8]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, [2, 8]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 4])],
        [helper.make_tensor_value_info(name, elem, None) for name, elem in (
            ("positions", TensorProto.INT64), ("rmin", TensorProto.FLOAT),
            ("flat", TensorProto.FLOAT), ("scattered", TensorProto.FLOAT))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    model = onnx.shape_inference.infer_shapes(model)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _pf_run(path, inputs, tmp_path):
    """pf-run's outputs for `inputs` (written to tmp_path/in.npz)."""
    np.savez(tmp_path / "in.npz", **inputs)
    run_tool("pf-run", str(path), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    return np.load(tmp_path / "out.npz")


def test_hf_export_patterns_match_onnxruntime(tmp_path):
    """Range/CumSum/Trilu/Clip/ReduceMax/ReduceMin/Flatten/GatherND/ScatterND/
    IsNaN/IsInf in one graph, against ONNX Runtime."""
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "hf.onnx"
    _hf_patterns_model(path)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 8, 4)).astype(np.float32)
    x[0, 3, 1], x[1, 5, 2] = np.nan, np.inf  # the guard zeroes what they poison
    inputs = {"ids": rng.integers(0, 100, size=(2, 8)).astype(np.int64),
              "mask": np.array([[1] * 8, [1] * 5 + [0] * 3], np.int64), "x": x}
    names = ["positions", "rmin", "flat", "scattered"]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    expected = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(
        names, inputs)
    got = _pf_run(path, inputs, tmp_path)
    for name, want in zip(names, expected):
        assert got[name].shape == want.shape, name
        assert got[name].dtype == want.dtype, name
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5, err_msg=name)
    # Not trivially zero: the positions count the mask, the flat output varies.
    assert got["positions"][1, 4] == 5 + 4 and got["positions"][1, 7] == 7
    assert np.std(got["flat"]) > 0.1


def _roberta_token_types_model(path):
    """RoBERTa's embeddings without token_type_ids, as both torch exporters
    write them (transformers 5): position ids = CumSum(ids != pad) * mask +
    pad; the buffered token types (a [1, max_pos] int64 initializer) are
    Expanded to the batch and picked by position with GatherElements(axis=1),
    then looked up in the token-type table. A float GatherElements (axis 0,
    int32 indices, a negative one) rides along."""
    from onnx import TensorProto, helper

    def const(name, value, dtype=np.int64):
        return helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(
            np.array(value, dtype=dtype), name))

    nodes = [
        const("pad", 1), const("one", 1),
        helper.make_node("Equal", ["ids", "pad"], ["is_pad"]),
        helper.make_node("Not", ["is_pad"], ["real_b"]),
        helper.make_node("Cast", ["real_b"], ["real"], to=TensorProto.INT32),
        helper.make_node("CumSum", ["real", "one"], ["cum"]),
        helper.make_node("Mul", ["cum", "real"], ["cum_real"]),
        helper.make_node("Cast", ["cum_real"], ["cum64"], to=TensorProto.INT64),
        helper.make_node("Add", ["cum64", "pad"], ["positions"]),
        helper.make_node("Shape", ["ids"], ["batch"], end=1),
        const("keep", [1]),
        helper.make_node("Concat", ["batch", "keep"], ["shape"], axis=0),
        helper.make_node("Expand", ["buffered", "shape"], ["expanded"]),  # [batch, 12]
        helper.make_node("GatherElements", ["expanded", "positions"], ["types"], axis=1),
        helper.make_node("Gather", ["table", "types"], ["type_embeddings"]),
        helper.make_node("GatherElements", ["x", "rows"], ["picked"], axis=0),
    ]
    buffered = onnx.numpy_helper.from_array(
        (np.arange(12, dtype=np.int64) % 3).reshape(1, 12), "buffered")
    table = onnx.numpy_helper.from_array(
        np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32), "table")
    graph = helper.make_graph(
        nodes, "roberta_token_types",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 8]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("rows", TensorProto.INT32, [2, 4])],
        [helper.make_tensor_value_info("type_embeddings", TensorProto.FLOAT, [2, 8, 4]),
         helper.make_tensor_value_info("picked", TensorProto.FLOAT, [2, 4])],
        initializer=[buffered, table])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_roberta_token_type_gather_elements_matches_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "roberta.onnx"
    _roberta_token_types_model(path)
    rng = np.random.default_rng(0)
    ids = rng.integers(2, 50, size=(2, 8)).astype(np.int64)
    ids[1, 5:] = 1  # padding: position pad, not counted
    inputs = {"ids": ids, "x": rng.normal(size=(3, 4)).astype(np.float32),
              "rows": np.array([[2, 0, -1, 1], [0, 0, 1, -3]], np.int32)}
    names = ["type_embeddings", "picked"]
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        names, inputs)
    got = _pf_run(path, inputs, tmp_path)
    for name, want in zip(names, expected):
        assert got[name].shape == want.shape, name
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    # The positions pick different token types (not one row everywhere).
    assert len({tuple(r) for r in got["type_embeddings"].reshape(-1, 4)}) == 3


def test_gather_elements_index_out_of_range_is_an_error(tmp_path):
    path = tmp_path / "roberta.onnx"
    _roberta_token_types_model(path)
    inputs = {"ids": np.full((2, 8), 5, np.int64), "x": np.zeros((3, 4), np.float32),
              "rows": np.array([[3, 0, 0, 0], [0, 0, 0, 0]], np.int32)}  # 3 >= 3 rows
    np.savez(tmp_path / "in.npz", **inputs)
    proc = run_tool("pf-run", str(path), "--inputs", str(tmp_path / "in.npz"),
                    "--outputs", str(tmp_path / "out.npz"), check=False)
    assert proc.returncode == 1, proc.stderr
    assert "pfrt_gather_nd: index 3" in proc.stderr and "out of range" in proc.stderr, proc.stderr
