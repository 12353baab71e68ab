"""Write Hugging Face-layout ``BertForMaskedLM`` models as ONNX, without torch.

The graph is built node by node with ``onnx.helper`` so that it looks like what
``torch.onnx.export`` (opset 14, dynamic batch/sequence axes) makes of
``transformers.BertForMaskedLM``.  pf's ONNX importer and fusion passes are
tested against these files, so the op sequences below are a contract.

Usage::

    PYTHONPATH=python python3 -m pipefisher.bert_onnx --config tiny --out model.onnx
        [--seed 0] [--no-weights] [--style transpose|pytorch] [--gelu erf|tanh]
        [--opset 14] [--no-dedupe] [--vocab N] [--layers N] [--external-data]
        [--layernorm-op] [--mask-value -10000|min]

or from Python: ``save_model(make_bert_model(get_config("tiny")), "model.onnx")``.

Interface
---------
* inputs ``input_ids``, ``token_type_ids``, ``attention_mask``: int64
  ``[batch, sequence]`` (symbolic dims named ``batch`` and ``sequence``);
* output ``logits``: float32 ``[batch, sequence, vocab]``;
* ``metadata_props`` carry the config (``pf.hidden_size``, ``pf.num_hidden_layers``,
  ...), ``pf.style``, ``pf.gelu``, ``pf.weights`` (``random`` or ``not-written``)
  and ``pf.seed``.

Op sequences (names are ``<scope>/<Op>[_k]``, outputs ``<node name>_output_0``)
--------------------------------------------------------------------------------
Small constants (scalars, axes, shape pieces, Gather indices, Slice starts) are
always ``Constant`` nodes, one per use; initializers hold only model
parameters and ``bert.embeddings.position_ids``.  Scalars are 0-d tensors.

* Embeddings: ``Gather(word_embeddings.weight, input_ids)``;
  ``seq = Gather(Shape(input_ids), 1)`` (0-d index);
  ``Slice(position_ids, starts=[0], ends=Unsqueeze(seq, [0]), axes=[1])`` then
  ``Gather(position_embeddings.weight, .)``; ``Gather(token_type_embeddings.weight,
  token_type_ids)``; ``Add(Add(word, token_type), position)``; LayerNorm.
* LayerNorm (as PyTorch's opset-14 export): ``mean = ReduceMean(x, axes=[-1],
  keepdims=1)``; ``d = Sub(x, mean)``; ``Pow(d, 2.0)``; ``ReduceMean``; ``Add(., eps)``;
  ``Sqrt``; ``Div(d, .)``; ``Mul(., weight)``; ``Add(., bias)``.  For opset >= 18
  ``ReduceMean`` takes ``axes`` as a second input (a Constant ``[-1]``).
  ``layernorm_op=True`` (opset >= 17) emits one ``LayerNormalization(x, weight,
  bias, axis=-1, epsilon=eps)`` instead.
* Extended mask (once, scope ``/bert``): ``Unsqueeze(attention_mask, [1])``,
  ``Unsqueeze(., [2])``, ``Cast(to=FLOAT)``, ``Sub(1.0, .)``, ``Mul(., -10000.0)``
  (``mask_value``; ``"min"`` gives float32's lowest value).  Shape ``[b,1,1,s]``.
* Linear, style ``transpose`` (default): ``Transpose(W[out,in], perm=[1,0])``,
  ``MatMul(x, .)``, ``Add(., bias)``.  Style ``pytorch``: ``MatMul(x, onnx::MatMul_<N>)``
  with a pre-transposed ``[in,out]`` initializer (N counts up from 1 in graph order;
  the HF weight name is lost) and ``Add(bias, .)`` -- bias FIRST.  The bias keeps
  its HF name in both styles.
* Self-attention: q, k, v linears; each is reshaped to ``[b, s, heads, head_dim]``
  by ``Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0), [0]),
  Unsqueeze(Gather(Shape(x), 1), [0]), [heads], [head_dim]))`` (a separate ``Shape``
  node per ``Gather``); ``Transpose`` perm ``[0,2,1,3]`` for q and v, ``[0,2,3,1]``
  for k; ``MatMul(q, k)``; ``Div(., sqrt(head_dim))``; ``Add(., mask)``;
  ``Softmax(axis=-1)``; ``MatMul(., v)``; ``Transpose [0,2,1,3]``;
  ``Reshape(., Concat(Unsqueeze(Gather(Shape(.), 0)), Unsqueeze(Gather(Shape(.), 1)),
  [hidden]))``; ``attention.output.dense`` linear; ``Add(dense, block_input)``;
  LayerNorm.
* FFN: ``intermediate.dense`` linear, GELU, ``output.dense`` linear,
  ``Add(dense, attention_output)``, LayerNorm.
* GELU ``erf``: ``Div(x, 1.4142135)``, ``Erf``, ``Add(., 1.0)``, ``Mul(x, .)``,
  ``Mul(., 0.5)``.  GELU ``tanh`` (HF ``gelu_new``): ``h = Mul(x, 0.5)``;
  ``Pow(x, 3.0)``; ``Mul(., 0.044715)``; ``Add(x, .)``; ``Mul(., sqrt(2/pi))``;
  ``Tanh``; ``Add(., 1.0)``; ``Mul(h, .)``.
* Head: ``cls.predictions.transform.dense`` linear, GELU, LayerNorm, then the
  decoder, whose weight is TIED to the word embeddings: ``MatMul(x,
  Transpose(word_embeddings.weight, perm=[1,0]))`` and ``Add(.,
  cls.predictions.bias)``, whose output is ``logits``.  Style ``pytorch`` has
  what constant folding makes of it: ``MatMul(x, onnx::MatMul_<last>)`` with
  a separate ``[hidden, vocab]`` initializer holding the word embeddings'
  transpose (the tie is no longer visible in the file; pf ties it back), and
  ``Add(cls.predictions.bias, .)``.

Initializers and dedupe
-----------------------
Weights come from ``np.random.default_rng(seed)`` drawn in HF parameter order:
normal(0, 0.02) for embeddings and linear weights (always drawn as
``[out, in]``, so both styles give identical logits), zeros for linear biases
and ``cls.predictions.bias``, ones/zeros for LayerNorm weight/bias;
``position_ids`` is ``arange(max_position)`` as int64 ``[1, max_position]``.

With ``dedupe`` (default, as PyTorch's exporter does) initializers with equal
dtype, shape and contents are stored once, under the first name in parameter
order; each other name becomes the output of an ``Identity`` node (named
``/Identity[_k]``, placed first in the graph) whose input is the kept
initializer.  With random init all LayerNorm weights of size hidden dedupe to
``bert.embeddings.LayerNorm.weight`` and all zero biases of size hidden to
``bert.embeddings.LayerNorm.bias``.

Shapes-only models (``--no-weights``)
-------------------------------------
``weights=False`` generates no data at all (the large config takes well under a
second).  Every initializer keeps its name, data_type and dims but its data is
declared external: ``data_location = EXTERNAL`` with ``location =
"<out stem>.weights-not-written"`` (plus the offset/length it would have in a
contiguous file).  That file is never written, so load such a model with
``onnx.load(path, load_external_data=False)``; a plain ``onnx.load`` fails on the
missing file, which is intended.  ``onnx.checker`` also rejects such a model
(it looks for the data file), so check the graph on a model with weights, which
has the same nodes and initializer names, types and dims.  Dedupe decides by how a tensor would be
filled (ones, zeros, arange; random never matches), which gives the same
initializers and Identity nodes as the model with weights.

``--external-data`` saves the weights in ``<out stem>.data`` next to the model
(needed for base/large with weights, near or past protobuf's 2 GiB limit).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

try:  # package import, or run as a file
    from .configs import CONFIGS, BertConfig, get_config
except ImportError:  # pragma: no cover
    from pipefisher.configs import CONFIGS, BertConfig, get_config

__all__ = ["make_bert_model", "save_model", "summarize", "main",
           "NOT_WRITTEN_SUFFIX", "MIN_OPSET", "STYLES", "GELUS"]

STYLES = ("transpose", "pytorch")
GELUS = ("erf", "tanh")
MIN_OPSET = 13
#: location suffix of the (never written) data file of a shapes-only model
NOT_WRITTEN_SUFFIX = ".weights-not-written"
_DEFAULT_NOT_WRITTEN = "model" + NOT_WRITTEN_SUFFIX
_INIT_STD = 0.02

_F32 = np.float32
_I64 = np.int64


# --------------------------------------------------------------------------- parameters

@dataclass
class _Param:
    name: str                 # initializer name in the graph
    shape: tuple[int, ...]    # stored shape
    dtype: type
    init: str                 # "normal" | "zeros" | "ones" | "arange" | "transposed"
    transpose: bool = False   # drawn as shape[::-1], stored transposed (style pytorch)
    source: str = ""          # init "transposed": the parameter whose transpose it holds


class _Params:
    """Parameter list in HF order plus where each linear's weight went."""

    def __init__(self, cfg: BertConfig, style: str):
        self.style = style
        self.list: list[_Param] = []
        self.linear_weight: dict[str, str] = {}   # HF module prefix -> graph name of weight
        self._matmul_n = 0
        h, i = cfg.hidden_size, cfg.intermediate_size
        e = "bert.embeddings"
        self._add(f"{e}.word_embeddings.weight", (cfg.vocab_size, h), "normal")
        self._add(f"{e}.position_embeddings.weight", (cfg.max_position_embeddings, h), "normal")
        self._add(f"{e}.token_type_embeddings.weight", (cfg.type_vocab_size, h), "normal")
        self._layernorm(f"{e}.LayerNorm", h)
        self._add(f"{e}.position_ids", (1, cfg.max_position_embeddings), "arange", dtype=_I64)
        for l in range(cfg.num_hidden_layers):
            p = f"bert.encoder.layer.{l}"
            for m in ("query", "key", "value"):
                self._linear(f"{p}.attention.self.{m}", h, h)
            self._linear(f"{p}.attention.output.dense", h, h)
            self._layernorm(f"{p}.attention.output.LayerNorm", h)
            self._linear(f"{p}.intermediate.dense", h, i)
            self._linear(f"{p}.output.dense", i, h)
            self._layernorm(f"{p}.output.LayerNorm", h)
        self._linear("cls.predictions.transform.dense", h, h)
        self._layernorm("cls.predictions.transform.LayerNorm", h)
        self._add("cls.predictions.bias", (cfg.vocab_size,), "zeros")
        if style == "pytorch":
            # Constant folding turns the tied decoder's Transpose(word_embeddings)
            # into a copy of its own.
            self._matmul_n += 1
            self.decoder_weight = f"onnx::MatMul_{self._matmul_n}"
            self._add(self.decoder_weight, (h, cfg.vocab_size), "transposed",
                      source=f"{e}.word_embeddings.weight")

    def _add(self, name, shape, init, dtype=_F32, transpose=False, source=""):
        self.list.append(_Param(name, tuple(shape), dtype, init, transpose, source))

    def _layernorm(self, prefix, h):
        self._add(f"{prefix}.weight", (h,), "ones")
        self._add(f"{prefix}.bias", (h,), "zeros")

    def _linear(self, prefix, n_in, n_out):
        if self.style == "transpose":
            name = f"{prefix}.weight"
            self._add(name, (n_out, n_in), "normal")
        else:
            self._matmul_n += 1
            name = f"onnx::MatMul_{self._matmul_n}"
            self._add(name, (n_in, n_out), "normal", transpose=True)
        self.linear_weight[prefix] = name
        self._add(f"{prefix}.bias", (n_out,), "zeros")

    def ordered(self) -> list[_Param]:
        """Initializer order: HF-named first, then ``onnx::`` ones (as PyTorch lists them)."""
        return ([p for p in self.list if not p.name.startswith("onnx::")]
                + [p for p in self.list if p.name.startswith("onnx::")])


#: Length of the repeated tile of ``init="tiled"`` (a prime, so no matrix
#: row lines up with it and rows differ).
TILE = 4093
INITS = ("random", "tiled")


def _generate(params: list[_Param], seed: int, init: str = "random") -> dict[str, np.ndarray]:
    """Arrays for every parameter, drawn in HF order (independent of style).

    ``init="tiled"``: the normal(0, 0.02) weights are consecutive windows of
    one seeded tile of :data:`TILE` values instead of independent draws, so a
    weights file compresses about a thousandfold (the GPU check ships
    BERT-base that way); the values are as large as the random ones."""
    rng = np.random.default_rng(seed)
    tile = rng.standard_normal(TILE, dtype=np.float32) * _F32(_INIT_STD) if init == "tiled" else None
    offset = 0
    out = {}
    for p in params:
        if p.init == "normal":
            drawn = p.shape[::-1] if p.transpose else p.shape
            if init == "tiled":
                n = int(np.prod(drawn))
                a = np.resize(np.roll(tile, -(offset % TILE)), n).reshape(drawn)
                offset += n
            else:
                a = rng.standard_normal(drawn, dtype=np.float32)
                a *= _F32(_INIT_STD)
            if p.transpose:
                a = np.ascontiguousarray(a.T)
        elif p.init == "zeros":
            a = np.zeros(p.shape, p.dtype)
        elif p.init == "ones":
            a = np.ones(p.shape, p.dtype)
        elif p.init == "arange":
            a = np.arange(int(np.prod(p.shape)), dtype=p.dtype).reshape(p.shape)
        elif p.init == "transposed":
            a = np.ascontiguousarray(out[p.source].T)
        else:  # pragma: no cover
            raise AssertionError(p.init)
        out[p.name] = a
    return out


def _dedupe_key(p: _Param, arrays: dict[str, np.ndarray] | None):
    if arrays is not None:
        a = arrays[p.name]
        return (np.dtype(p.dtype).str, p.shape, hashlib.sha1(memoryview(a).cast("B")).digest())
    if p.init in ("normal", "transposed"):
        return ("unique", p.name)
    return (np.dtype(p.dtype).str, p.shape, p.init)


def _nbytes(p: _Param) -> int:
    return int(np.prod(p.shape, dtype=np.int64)) * np.dtype(p.dtype).itemsize


def _external_tensor(p: _Param, location: str, offset: int) -> tuple[TensorProto, int]:
    t = TensorProto()
    t.name = p.name
    t.data_type = helper.np_dtype_to_tensor_dtype(np.dtype(p.dtype))
    t.dims.extend(p.shape)
    t.data_location = TensorProto.EXTERNAL
    length = _nbytes(p)
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t, length


# --------------------------------------------------------------------------- graph building

class _Builder:
    def __init__(self, opset: int):
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self._names: set[str] = set()
        self._next: dict[str, int] = {}

    def _name(self, scope: str, op: str) -> str:
        base = f"{scope}/{op}"
        k = self._next.get(base, 0)
        while True:
            name = base if k == 0 else f"{base}_{k}"
            k += 1
            if name not in self._names:
                break
        self._next[base] = k
        self._names.add(name)
        return name

    def op(self, op_type: str, inputs: list[str], scope: str, output: str | None = None,
           **attrs) -> str:
        name = self._name(scope, op_type)
        out = output if output is not None else f"{name}_output_0"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=name, **attrs))
        return out

    def const(self, scope: str, value, dtype) -> str:
        name = self._name(scope, "Constant")
        out = f"{name}_output_0"
        tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype))
        self.nodes.append(helper.make_node("Constant", [], [out], name=name, value=tensor))
        return out

    def reduce_mean(self, x: str, scope: str) -> str:
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.const(scope, [-1], _I64)], scope, keepdims=1)
        return self.op("ReduceMean", [x], scope, axes=[-1], keepdims=1)

    def unsqueeze(self, x: str, axis: int, scope: str) -> str:
        return self.op("Unsqueeze", [x, self.const(scope, [axis], _I64)], scope)

    def dim(self, x: str, index: int, scope: str) -> str:
        """``Unsqueeze(Gather(Shape(x), index), [0])``: a 1-element int64 tensor."""
        shape = self.op("Shape", [x], scope)
        g = self.op("Gather", [shape, self.const(scope, index, _I64)], scope, axis=0)
        return self.unsqueeze(g, 0, scope)


class _BertGraph:
    def __init__(self, cfg: BertConfig, params: _Params, b: _Builder, *, style: str,
                 gelu: str, layernorm_op: bool, mask_value: float):
        self.cfg, self.params, self.b = cfg, params, b
        self.style, self.gelu_form = style, gelu
        self.layernorm_op, self.mask_value = layernorm_op, mask_value

    # building blocks -----------------------------------------------------------
    def linear(self, x: str, prefix: str, scope: str, output: str | None = None) -> str:
        b = self.b
        w, bias = self.params.linear_weight[prefix], f"{prefix}.bias"
        if self.style == "transpose":
            wt = b.op("Transpose", [w], scope, perm=[1, 0])
            mm = b.op("MatMul", [x, wt], scope)
            return b.op("Add", [mm, bias], scope, output=output)
        mm = b.op("MatMul", [x, w], scope)
        return b.op("Add", [bias, mm], scope, output=output)

    def layer_norm(self, x: str, prefix: str, scope: str) -> str:
        b, w, bias = self.b, f"{prefix}.weight", f"{prefix}.bias"
        eps = self.cfg.layer_norm_eps
        if self.layernorm_op:
            return b.op("LayerNormalization", [x, w, bias], scope, axis=-1, epsilon=float(eps))
        mean = b.reduce_mean(x, scope)
        d = b.op("Sub", [x, mean], scope)
        p = b.op("Pow", [d, b.const(scope, 2.0, _F32)], scope)
        var = b.reduce_mean(p, scope)
        e = b.op("Add", [var, b.const(scope, eps, _F32)], scope)
        s = b.op("Sqrt", [e], scope)
        n = b.op("Div", [d, s], scope)
        m = b.op("Mul", [n, w], scope)
        return b.op("Add", [m, bias], scope)

    def gelu(self, x: str, scope: str) -> str:
        b = self.b
        if self.gelu_form == "erf":
            d = b.op("Div", [x, b.const(scope, math.sqrt(2.0), _F32)], scope)
            e = b.op("Erf", [d], scope)
            a = b.op("Add", [e, b.const(scope, 1.0, _F32)], scope)
            m = b.op("Mul", [x, a], scope)
            return b.op("Mul", [m, b.const(scope, 0.5, _F32)], scope)
        half = b.op("Mul", [x, b.const(scope, 0.5, _F32)], scope)
        cube = b.op("Pow", [x, b.const(scope, 3.0, _F32)], scope)
        c = b.op("Mul", [cube, b.const(scope, 0.044715, _F32)], scope)
        inner = b.op("Add", [x, c], scope)
        scaled = b.op("Mul", [inner, b.const(scope, math.sqrt(2.0 / math.pi), _F32)], scope)
        t = b.op("Tanh", [scaled], scope)
        one_plus = b.op("Add", [t, b.const(scope, 1.0, _F32)], scope)
        return b.op("Mul", [half, one_plus], scope)

    # model parts ---------------------------------------------------------------
    def embeddings(self) -> str:
        b, e = self.b, "/bert/embeddings"
        word = b.op("Gather", ["bert.embeddings.word_embeddings.weight", "input_ids"],
                    f"{e}/word_embeddings")
        shape = b.op("Shape", ["input_ids"], e)
        seq = b.op("Gather", [shape, b.const(e, 1, _I64)], e, axis=0)
        ends = b.unsqueeze(seq, 0, e)
        pos_ids = b.op("Slice", ["bert.embeddings.position_ids", b.const(e, [0], _I64), ends,
                                 b.const(e, [1], _I64)], e)
        tok = b.op("Gather", ["bert.embeddings.token_type_embeddings.weight", "token_type_ids"],
                   f"{e}/token_type_embeddings")
        s = b.op("Add", [word, tok], e)
        pos = b.op("Gather", ["bert.embeddings.position_embeddings.weight", pos_ids],
                   f"{e}/position_embeddings")
        s = b.op("Add", [s, pos], e)
        return self.layer_norm(s, "bert.embeddings.LayerNorm", f"{e}/LayerNorm")

    def extended_mask(self) -> str:
        b, sc = self.b, "/bert"
        m = b.unsqueeze("attention_mask", 1, sc)
        m = b.unsqueeze(m, 2, sc)
        m = b.op("Cast", [m], sc, to=TensorProto.FLOAT)
        m = b.op("Sub", [b.const(sc, 1.0, _F32), m], sc)
        return b.op("Mul", [m, b.const(sc, self.mask_value, _F32)], sc)

    def split_heads(self, x: str, scope: str, perm: list[int]) -> str:
        b, cfg = self.b, self.cfg
        shape = b.op("Concat", [b.dim(x, 0, scope), b.dim(x, 1, scope),
                                b.const(scope, [cfg.num_attention_heads], _I64),
                                b.const(scope, [cfg.head_dim], _I64)], scope, axis=0)
        r = b.op("Reshape", [x, shape], scope)
        return b.op("Transpose", [r], scope, perm=perm)

    def layer(self, x: str, mask: str, l: int) -> str:
        b, cfg = self.b, self.cfg
        p, sc = f"bert.encoder.layer.{l}", f"/bert/encoder/layer.{l}"
        ssc = f"{sc}/attention/self"
        q = self.linear(x, f"{p}.attention.self.query", f"{ssc}/query")
        k = self.linear(x, f"{p}.attention.self.key", f"{ssc}/key")
        v = self.linear(x, f"{p}.attention.self.value", f"{ssc}/value")
        q = self.split_heads(q, ssc, [0, 2, 1, 3])
        k = self.split_heads(k, ssc, [0, 2, 3, 1])
        v = self.split_heads(v, ssc, [0, 2, 1, 3])
        scores = b.op("MatMul", [q, k], ssc)
        scores = b.op("Div", [scores, b.const(ssc, math.sqrt(cfg.head_dim), _F32)], ssc)
        scores = b.op("Add", [scores, mask], ssc)
        probs = b.op("Softmax", [scores], ssc, axis=-1)
        ctx = b.op("MatMul", [probs, v], ssc)
        ctx = b.op("Transpose", [ctx], ssc, perm=[0, 2, 1, 3])
        shape = b.op("Concat", [b.dim(ctx, 0, ssc), b.dim(ctx, 1, ssc),
                                b.const(ssc, [cfg.hidden_size], _I64)], ssc, axis=0)
        ctx = b.op("Reshape", [ctx, shape], ssc)
        osc = f"{sc}/attention/output"
        a = self.linear(ctx, f"{p}.attention.output.dense", f"{osc}/dense")
        a = b.op("Add", [a, x], osc)
        a = self.layer_norm(a, f"{p}.attention.output.LayerNorm", f"{osc}/LayerNorm")
        i = self.linear(a, f"{p}.intermediate.dense", f"{sc}/intermediate/dense")
        i = self.gelu(i, f"{sc}/intermediate/intermediate_act_fn")
        o = self.linear(i, f"{p}.output.dense", f"{sc}/output/dense")
        o = b.op("Add", [o, a], f"{sc}/output")
        return self.layer_norm(o, f"{p}.output.LayerNorm", f"{sc}/output/LayerNorm")

    def head(self, x: str) -> str:
        b, sc = self.b, "/cls/predictions"
        t = self.linear(x, "cls.predictions.transform.dense", f"{sc}/transform/dense")
        t = self.gelu(t, f"{sc}/transform/transform_act_fn")
        t = self.layer_norm(t, "cls.predictions.transform.LayerNorm", f"{sc}/transform/LayerNorm")
        dsc = f"{sc}/decoder"
        if self.style == "transpose":
            wt = b.op("Transpose", ["bert.embeddings.word_embeddings.weight"], dsc, perm=[1, 0])
            mm = b.op("MatMul", [t, wt], dsc)
            return b.op("Add", [mm, "cls.predictions.bias"], dsc, output="logits")
        mm = b.op("MatMul", [t, self.params.decoder_weight], dsc)
        return b.op("Add", ["cls.predictions.bias", mm], dsc, output="logits")

    def build(self) -> None:
        x = self.embeddings()
        mask = self.extended_mask()
        for l in range(self.cfg.num_hidden_layers):
            x = self.layer(x, mask, l)
        self.head(x)


# --------------------------------------------------------------------------- public API

def _mask_value(value) -> float:
    if isinstance(value, str):
        if value.lower() in ("min", "float32min", "finfo"):
            return float(np.finfo(np.float32).min)
        return float(value)
    return float(value)


def make_bert_model(config: BertConfig | str = "tiny", seed: int = 0, weights: bool = True,
                    style: str = "transpose", gelu: str = "erf", opset: int = 14,
                    dedupe: bool = True, *, layernorm_op: bool = False,
                    mask_value: float | str = -10000.0, vocab_size: int | None = None,
                    num_hidden_layers: int | None = None, ir_version: int | None = None,
                    external_location: str = _DEFAULT_NOT_WRITTEN,
                    init: str = "random") -> onnx.ModelProto:
    """Build a BertForMaskedLM ONNX model (see the module docstring for the graph).

    ``config`` is a :class:`BertConfig` or a name from :data:`CONFIGS`;
    ``vocab_size``/``num_hidden_layers`` override it.  ``weights=False`` makes a
    shapes-only model whose initializers point at ``external_location``
    (:func:`save_model` renames it after the output file).  ``init`` is one of
    :data:`INITS` (see :func:`_generate`).
    """
    if isinstance(config, str):
        config = get_config(config)
    config = config.replace(vocab_size=vocab_size, num_hidden_layers=num_hidden_layers)
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}")
    if gelu not in GELUS:
        raise ValueError(f"gelu must be one of {GELUS}, got {gelu!r}")
    max_opset = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= max_opset:
        raise ValueError(f"opset must be in {MIN_OPSET}..{max_opset}, got {opset}")
    if layernorm_op and opset < 17:
        raise ValueError(f"LayerNormalization needs opset >= 17, got {opset}")
    mask = _mask_value(mask_value)
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")

    params = _Params(config, style)
    ordered = params.ordered()
    arrays = _generate(params.list, seed, init) if weights else None

    # dedupe: first name (in initializer order) with a given content is kept
    kept: dict[object, str] = {}
    aliases: list[tuple[str, str]] = []   # (duplicate name, kept name)
    stored: list[_Param] = []
    for p in ordered:
        key = _dedupe_key(p, arrays) if dedupe else ("unique", p.name)
        if key in kept:
            aliases.append((p.name, kept[key]))
        else:
            kept[key] = p.name
            stored.append(p)

    b = _Builder(opset)
    for dup, src in aliases:
        b.op("Identity", [src], "", output=dup)
    _BertGraph(config, params, b, style=style, gelu=gelu, layernorm_op=layernorm_op,
               mask_value=mask).build()

    dims = ["batch", "sequence"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims)
              for n in ("input_ids", "token_type_ids", "attention_mask")]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             dims + [config.vocab_size])]
    graph = helper.make_graph(b.nodes, "main_graph", inputs, outputs)
    opsets = [helper.make_opsetid("", opset)]
    if ir_version is None:
        ir_version = max(7, helper.find_min_ir_version_for(opsets))
    model = helper.make_model(graph, opset_imports=opsets, ir_version=ir_version,
                              producer_name="pipefisher", producer_version="0.1",
                              doc_string=f"BertForMaskedLM ({config.name}) written by "
                                         "pipefisher.bert_onnx")
    # Initializers are added in place: make_graph/make_model would copy every tensor twice.
    offset = 0
    for p in stored:
        t = model.graph.initializer.add()
        if arrays is not None:
            a = arrays.pop(p.name)
            t.name = p.name
            t.data_type = helper.np_dtype_to_tensor_dtype(a.dtype)
            t.dims.extend(a.shape)
            t.raw_data = a.tobytes()   # little-endian hosts only, as numpy_helper assumes
        else:
            ext, length = _external_tensor(p, external_location, offset)
            t.CopyFrom(ext)
            offset += length
    del arrays
    props = {
        "pf.model": "BertForMaskedLM",
        "pf.config": config.name,
        "pf.num_hidden_layers": config.num_hidden_layers,
        "pf.hidden_size": config.hidden_size,
        "pf.num_attention_heads": config.num_attention_heads,
        "pf.intermediate_size": config.intermediate_size,
        "pf.vocab_size": config.vocab_size,
        "pf.max_position_embeddings": config.max_position_embeddings,
        "pf.type_vocab_size": config.type_vocab_size,
        "pf.layer_norm_eps": repr(config.layer_norm_eps),
        "pf.style": style,
        "pf.gelu": gelu,
        "pf.layernorm_op": int(layernorm_op),
        "pf.mask_value": repr(mask),
        "pf.dedupe": int(dedupe),
        "pf.weights": ("tiled" if init == "tiled" else "random") if weights else "not-written",
        "pf.seed": seed,
    }
    helper.set_model_props(model, {k: str(v) for k, v in props.items()})
    return model


def _not_written_tensors(model: onnx.ModelProto):
    for t in model.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            for e in t.external_data:
                if e.key == "location" and e.value.endswith(NOT_WRITTEN_SUFFIX):
                    yield t, e


def save_model(model: onnx.ModelProto, path: str | os.PathLike,
               external_data: bool = False) -> list[Path]:
    """Write ``model`` to ``path``; returns the files written.

    Shapes-only tensors get their location renamed to
    ``<stem>.weights-not-written`` (that file is not written).  With
    ``external_data`` the weights go to ``<stem>.data`` next to the model (an
    existing one is replaced) and, as with ``onnx.save_model``, the in-memory
    ``model`` is left pointing at that file.
    """
    path = Path(path)
    stem = path.stem
    not_written = list(_not_written_tensors(model))
    if external_data and not_written:
        raise ValueError("external_data needs a model with weights (this one is shapes-only)")
    for _, entry in not_written:
        entry.value = stem + NOT_WRITTEN_SUFFIX
    path.parent.mkdir(parents=True, exist_ok=True)
    if external_data:
        data = path.with_name(stem + ".data")
        if data.exists():
            data.unlink()   # onnx appends to an existing file
        onnx.save_model(model, str(path), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data.name, size_threshold=1024)
        return [path, data]
    size = model.ByteSize()
    if size >= 2**31:
        raise ValueError(f"model is {size / 2**30:.2f} GiB, over protobuf's 2 GiB limit: "
                         "use external_data=True (--external-data)")
    path.write_bytes(model.SerializeToString())
    return [path]


def summarize(model: onnx.ModelProto) -> str:
    """One line describing ``model`` (config, opset, node/initializer counts)."""
    props = {p.key: p.value for p in model.metadata_props}
    g = model.graph
    n_params = sum(int(np.prod(t.dims, dtype=np.int64)) for t in g.initializer
                   if t.name != "bert.embeddings.position_ids")
    n_ident = sum(1 for n in g.node if n.op_type == "Identity")
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), "?")
    return (f"BertForMaskedLM {props.get('pf.config', '?')}: "
            f"layers={props.get('pf.num_hidden_layers')} hidden={props.get('pf.hidden_size')} "
            f"heads={props.get('pf.num_attention_heads')} "
            f"inter={props.get('pf.intermediate_size')} vocab={props.get('pf.vocab_size')}; "
            f"opset {opset}, style {props.get('pf.style')}, gelu {props.get('pf.gelu')}; "
            f"{len(g.node)} nodes, {len(g.initializer)} initializers "
            f"({n_ident} deduped via Identity), {n_params / 1e6:.2f}M params stored; "
            f"weights {props.get('pf.weights')} (seed {props.get('pf.seed')})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python3 -m pipefisher.bert_onnx",
        description="Write a Hugging Face-layout BertForMaskedLM as ONNX (no torch).")
    ap.add_argument("--config", default="tiny", choices=sorted(CONFIGS, key=list(CONFIGS).index))
    ap.add_argument("--out", required=True, help="output .onnx path")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", choices=INITS, default="random",
                    help="tiled: the normal weights repeat one seeded %d-value tile, so the "
                         "weights compress ~1000:1 (benchmark bundles; use --no-dedupe)" % TILE)
    ap.add_argument("--no-weights", action="store_true",
                    help="shapes only: initializers declared external in "
                         "<stem>.weights-not-written, which is not written")
    ap.add_argument("--style", choices=STYLES, default="transpose")
    ap.add_argument("--gelu", choices=GELUS, default="erf")
    ap.add_argument("--opset", type=int, default=14)
    ap.add_argument("--no-dedupe", action="store_true",
                    help="store equal initializers separately (no Identity nodes)")
    ap.add_argument("--vocab", type=int, default=None, help="override vocab_size")
    ap.add_argument("--layers", type=int, default=None, help="override num_hidden_layers")
    ap.add_argument("--external-data", action="store_true",
                    help="save weights to <stem>.data next to the model")
    ap.add_argument("--layernorm-op", action="store_true",
                    help="emit LayerNormalization (opset >= 17) instead of the decomposition")
    ap.add_argument("--mask-value", default="-10000",
                    help="attention mask fill: a number or 'min' (float32 lowest)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        model = make_bert_model(args.config, seed=args.seed, weights=not args.no_weights,
                                style=args.style, gelu=args.gelu, opset=args.opset,
                                dedupe=not args.no_dedupe, layernorm_op=args.layernorm_op,
                                mask_value=args.mask_value, vocab_size=args.vocab,
                                num_hidden_layers=args.layers, init=args.init)
        line = summarize(model)
        files = save_model(model, args.out, external_data=args.external_data)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in files)
    print(f"wrote {', '.join(map(str, files))} ({size / 2**20:.1f} MiB, "
          f"{time.perf_counter() - t0:.1f}s): {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
