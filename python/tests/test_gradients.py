"""Reverse-mode gradients (`pf-build-gradients`) checked numerically.

Each case is a small hand-written pf function of one op family (float64, small
shapes). Its objective is sum(op(inputs) * w) with a random weight input `w`;
`pf-opt --pf-build-gradients=wrt=inputs` appends the backward pass and `pf-run`
runs it. The gradients are compared with central finite differences of a NumPy
float64 reference of the forward function (which is first checked against the
forward value pf-run computes). A last test checks sampled encoder-linear
parameter gradients of a generated BERT-tiny (float32) against finite
differences of the model run through pf-run.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from pipefisher.tools import run_tool

_erf = np.vectorize(math.erf)


def _t(shape, dtype="f64"):
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def _gelu_erf(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _layer_norm(x, scale, bias, axis, eps=1e-5):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def _scatter(data, rows, updates, add):
    out = data.copy()
    for r, u in zip(rows, updates):
        out[r] = out[r] + u if add else u
    return out


POS = "pos"  # sampler: positive values (sqrt, div, pow)

# name: (inputs {name: shape or (shape, sampler)}, body lines (define %out), out shape, numpy fn)
CASES = {
    "add_broadcast": ({"x": (2, 3), "y": (3,)},
                      ["%out = pf.add %x, %y : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>"],
                      (2, 3), lambda e: e["x"] + e["y"]),
    "sub_broadcast": ({"x": (2, 3), "y": (2, 1)},
                      ["%out = pf.sub %x, %y : (tensor<2x3xf64>, tensor<2x1xf64>) -> tensor<2x3xf64>"],
                      (2, 3), lambda e: e["x"] - e["y"]),
    "mul_broadcast": ({"x": (2, 3), "y": (1, 3)},
                      ["%out = pf.mul %x, %y : (tensor<2x3xf64>, tensor<1x3xf64>) -> tensor<2x3xf64>"],
                      (2, 3), lambda e: e["x"] * e["y"]),
    "div": ({"x": (2, 3), "y": ((2, 3), POS)},
            ["%out = pf.div %x, %y : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>"],
            (2, 3), lambda e: e["x"] / e["y"]),
    "div_broadcast": ({"x": (3,), "y": ((2, 3), POS)},
                      ["%out = pf.div %x, %y : (tensor<3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>"],
                      (2, 3), lambda e: e["x"] / e["y"]),
    "pow_const": ({"x": ((2, 3), POS)},
                  ["%p = pf.constant dense<3.0> : tensor<f64>",
                   "%out = pf.pow %x, %p : (tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xf64>"],
                  (2, 3), lambda e: e["x"] ** 3),
    "neg": ({"x": (2, 3)}, ["%out = pf.neg %x : (tensor<2x3xf64>) -> tensor<2x3xf64>"],
            (2, 3), lambda e: -e["x"]),
    "sqrt": ({"x": ((2, 3), POS)}, ["%out = pf.sqrt %x : (tensor<2x3xf64>) -> tensor<2x3xf64>"],
             (2, 3), lambda e: np.sqrt(e["x"])),
    "exp": ({"x": (2, 3)}, ["%out = pf.exp %x : (tensor<2x3xf64>) -> tensor<2x3xf64>"],
            (2, 3), lambda e: np.exp(e["x"])),
    "tanh": ({"x": (2, 3)}, ["%out = pf.tanh %x : (tensor<2x3xf64>) -> tensor<2x3xf64>"],
             (2, 3), lambda e: np.tanh(e["x"])),
    "erf": ({"x": (2, 3)}, ["%out = pf.erf %x : (tensor<2x3xf64>) -> tensor<2x3xf64>"],
            (2, 3), lambda e: _erf(e["x"])),
    "matmul_batched_broadcast": (
        {"a": (2, 3, 4), "b": (4, 5)},
        ["%out = pf.matmul %a, %b : (tensor<2x3x4xf64>, tensor<4x5xf64>) -> tensor<2x3x5xf64>"],
        (2, 3, 5), lambda e: e["a"] @ e["b"]),
    "matmul_broadcast_lhs": (
        {"a": (1, 3, 4), "b": (2, 4, 5)},
        ["%out = pf.matmul %a, %b : (tensor<1x3x4xf64>, tensor<2x4x5xf64>) -> tensor<2x3x5xf64>"],
        (2, 3, 5), lambda e: e["a"] @ e["b"]),
    "matmul_vector_lhs": (
        {"a": (4,), "b": (2, 4, 5)},
        ["%out = pf.matmul %a, %b : (tensor<4xf64>, tensor<2x4x5xf64>) -> tensor<2x5xf64>"],
        (2, 5), lambda e: e["a"] @ e["b"]),
    "matmul_vector_rhs": (
        {"a": (2, 3, 4), "b": (4,)},
        ["%out = pf.matmul %a, %b : (tensor<2x3x4xf64>, tensor<4xf64>) -> tensor<2x3xf64>"],
        (2, 3), lambda e: e["a"] @ e["b"]),
    "linear": (
        {"x": (2, 3, 4), "w": (4, 5), "b": (5,)},
        ["%out = pf.linear %x, %w, %b : (tensor<2x3x4xf64>, tensor<4x5xf64>, tensor<5xf64>) -> tensor<2x3x5xf64>"],
        (2, 3, 5), lambda e: e["x"] @ e["w"] + e["b"]),
    "linear_transposed": (
        {"x": (2, 3, 4), "w": (5, 4), "b": (5,)},
        ["%out = pf.linear %x, %w, %b {transpose_weight} : (tensor<2x3x4xf64>, tensor<5x4xf64>, tensor<5xf64>) -> tensor<2x3x5xf64>"],
        (2, 3, 5), lambda e: e["x"] @ e["w"].T + e["b"]),
    "linear_no_bias": (
        {"x": (3, 4), "w": (5, 4)},
        ["%out = pf.linear %x, %w {transpose_weight} : (tensor<3x4xf64>, tensor<5x4xf64>) -> tensor<3x5xf64>"],
        (3, 5), lambda e: e["x"] @ e["w"].T),
    "layer_norm": (
        {"x": (2, 3, 4), "s": (4,), "b": (4,)},
        ["%out = pf.layer_norm %x, %s, %b : (tensor<2x3x4xf64>, tensor<4xf64>, tensor<4xf64>) -> tensor<2x3x4xf64>"],
        (2, 3, 4), lambda e: _layer_norm(e["x"], e["s"], e["b"], -1)),
    "layer_norm_axis1": (
        {"x": (2, 3, 4), "s": (3, 4), "b": (3, 4)},
        ["%out = pf.layer_norm %x, %s, %b {axis = 1 : i64, epsilon = 1.0e-3 : f32} : (tensor<2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>"],
        (2, 3, 4), lambda e: _layer_norm(e["x"], e["s"], e["b"], 1, eps=1e-3)),
    "gelu_erf": ({"x": (2, 5)}, ["%out = pf.gelu %x : (tensor<2x5xf64>) -> tensor<2x5xf64>"],
                 (2, 5), lambda e: _gelu_erf(e["x"])),
    "gelu_tanh": ({"x": (2, 5)},
                  ['%out = pf.gelu %x {approximate = "tanh"} : (tensor<2x5xf64>) -> tensor<2x5xf64>'],
                  (2, 5), lambda e: _gelu_tanh(e["x"])),
    "softmax_last": ({"x": (2, 3, 4)},
                     ["%out = pf.softmax %x : (tensor<2x3x4xf64>) -> tensor<2x3x4xf64>"],
                     (2, 3, 4), lambda e: _softmax(e["x"], -1)),
    "softmax_axis0": ({"x": (2, 3, 4)},
                      ["%out = pf.softmax %x {axis = 0 : i64} : (tensor<2x3x4xf64>) -> tensor<2x3x4xf64>"],
                      (2, 3, 4), lambda e: _softmax(e["x"], 0)),
    "reshape_unsqueeze_squeeze_identity": (
        {"x": (2, 3)},
        ["%s = pf.constant dense<[3, 2]> : tensor<2xi64>",
         "%r = pf.reshape %x, %s : (tensor<2x3xf64>, tensor<2xi64>) -> tensor<3x2xf64>",
         "%u = pf.unsqueeze %r {axes = array<i64: 0>} : (tensor<3x2xf64>) -> tensor<1x3x2xf64>",
         "%q = pf.squeeze %u {axes = array<i64: 0>} : (tensor<1x3x2xf64>) -> tensor<3x2xf64>",
         "%i = pf.identity %q : (tensor<3x2xf64>) -> tensor<3x2xf64>",
         "%out = pf.tanh %i : (tensor<3x2xf64>) -> tensor<3x2xf64>"],
        (3, 2), lambda e: np.tanh(e["x"].reshape(3, 2))),
    "transpose": ({"x": (2, 3, 4)},
                  ["%out = pf.transpose %x {perm = array<i64: 1, 2, 0>} : (tensor<2x3x4xf64>) -> tensor<3x4x2xf64>"],
                  (3, 4, 2), lambda e: e["x"].transpose(1, 2, 0)),
    "expand": ({"x": (1, 3)},
               ["%s = pf.constant dense<[2, 2, 3]> : tensor<3xi64>",
                "%out = pf.expand %x, %s : (tensor<1x3xf64>, tensor<3xi64>) -> tensor<2x2x3xf64>"],
               (2, 2, 3), lambda e: np.broadcast_to(e["x"], (2, 2, 3))),
    "cast": ({"x": (2, 3)},
             ["%c = pf.cast %x {to = f32} : (tensor<2x3xf64>) -> tensor<2x3xf32>",
              "%d = pf.cast %c {to = f64} : (tensor<2x3xf32>) -> tensor<2x3xf64>",
              "%out = pf.mul %d, %d : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>"],
             (2, 3), lambda e: e["x"] ** 2),  # the f32 round trip: within _TOL
    "where": ({"x": (2, 3), "y": (3,)},
              ["%c = pf.constant dense<[[true, false, true], [false, false, true]]> : tensor<2x3xi1>",
               "%out = pf.where %c, %x, %y : (tensor<2x3xi1>, tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>"],
              (2, 3), lambda e: np.where(np.array([[1, 0, 1], [0, 0, 1]], bool), e["x"], e["y"])),
    "min_broadcast": ({"x": (2, 3), "y": (3,)},
                      ["%out = pf.min %x, %y : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>"],
                      (2, 3), lambda e: np.minimum(e["x"], e["y"])),
    "max_broadcast": ({"x": (2, 3), "y": (2, 1)},
                      ["%out = pf.max %x, %y : (tensor<2x3xf64>, tensor<2x1xf64>) -> tensor<2x3xf64>"],
                      (2, 3), lambda e: np.maximum(e["x"], e["y"])),
    "abs": ({"x": (2, 3)}, ["%out = pf.abs %x : (tensor<2x3xf64>) -> tensor<2x3xf64>"],
            (2, 3), lambda e: np.abs(e["x"])),
    "sign": ({"x": (2, 3)},
             ["%s = pf.sign %x : (tensor<2x3xf64>) -> tensor<2x3xf64>",
              "%out = pf.mul %s, %x : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>"],
             (2, 3), lambda e: np.sign(e["x"]) * e["x"]),
    "reciprocal": ({"x": ((2, 3), POS)},
                   ["%out = pf.reciprocal %x : (tensor<2x3xf64>) -> tensor<2x3xf64>"],
                   (2, 3), lambda e: 1 / e["x"]),
    # A mask computed from the inputs themselves: comparison and logic carry
    # no gradient, the select does.
    "mask_select": ({"x": (2, 3), "y": (3,)},
                    ["%c = pf.greater %x, %y : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xi1>",
                     "%z = pf.constant dense<0.0> : tensor<f64>",
                     "%p = pf.less_equal %z, %x : (tensor<f64>, tensor<2x3xf64>) -> tensor<2x3xi1>",
                     "%a = pf.and %c, %p : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>",
                     "%n = pf.not %a : (tensor<2x3xi1>) -> tensor<2x3xi1>",
                     "%out = pf.where %n, %y, %x : (tensor<2x3xi1>, tensor<3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>"],
                    (2, 3), lambda e: np.where(~((e["x"] > e["y"]) & (e["x"] >= 0)), e["y"], e["x"])),
    # Clip as the importer writes it: max with the lower bound, then min
    # with the upper one; dy flows where lo <= x <= hi.
    "clip": ({"x": (2, 3)},
             ["%lo = pf.constant dense<-0.3> : tensor<f64>",
              "%hi = pf.constant dense<0.4> : tensor<f64>",
              "%m = pf.max %x, %lo : (tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xf64>",
              "%out = pf.min %m, %hi : (tensor<2x3xf64>, tensor<f64>) -> tensor<2x3xf64>"],
             (2, 3), lambda e: np.clip(e["x"], -0.3, 0.4)),
    # GatherND: repeated tuples sum their gradients (a scatter-add).
    "gather_nd": ({"d": (3, 4)},
                  ["%i = pf.constant dense<[[2, 1], [0, 3], [2, 1]]> : tensor<3x2xi64>",
                   "%out = pf.gather_nd %d, %i : (tensor<3x4xf64>, tensor<3x2xi64>) -> tensor<3xf64>"],
                  (3,), lambda e: e["d"][[2, 0, 2], [1, 3, 1]]),
    "gather_nd_rows": ({"d": (3, 2)},
                       ["%i = pf.constant dense<[[-1], [0]]> : tensor<2x1xi64>",
                        "%out = pf.gather_nd %d, %i : (tensor<3x2xf64>, tensor<2x1xi64>) -> tensor<2x2xf64>"],
                       (2, 2), lambda e: e["d"][[2, 0]]),
    # batch_dims 1: each batch picks from its own [3, 2] matrix.
    "gather_nd_batch": ({"d": (2, 3, 2)},
                        ["%i = pf.constant dense<[[[2], [0], [2]], [[1], [1], [0]]]> : tensor<2x3x1xi64>",
                         "%out = pf.gather_nd %d, %i {batch_dims = 1 : i64} : (tensor<2x3x2xf64>, tensor<2x3x1xi64>) -> tensor<2x3x2xf64>"],
                        (2, 3, 2), lambda e: np.stack([e["d"][0][[2, 0, 2]], e["d"][1][[1, 1, 0]]])),
    "gather_nd_batch2_i32": ({"d": (2, 2, 3)},
                             ["%i = pf.constant dense<[[[2], [0]], [[1], [-1]]]> : tensor<2x2x1xi32>",
                              "%out = pf.gather_nd %d, %i {batch_dims = 2 : i64} : (tensor<2x2x3xf64>, tensor<2x2x1xi32>) -> tensor<2x2xf64>"],
                             (2, 2), lambda e: np.array([[e["d"][0, 0, 2], e["d"][0, 1, 0]],
                                                         [e["d"][1, 0, 1], e["d"][1, 1, 2]]])),
    # ScatterND without reduction: overwritten rows take no data gradient.
    "scatter_nd": ({"d": (4, 2), "u": (2, 2)},
                   ["%i = pf.constant dense<[[3], [1]]> : tensor<2x1xi64>",
                    "%out = pf.scatter_nd %d, %i, %u : (tensor<4x2xf64>, tensor<2x1xi64>, tensor<2x2xf64>) -> tensor<4x2xf64>"],
                   (4, 2), lambda e: _scatter(e["d"], [3, 1], e["u"], add=False)),
    "scatter_nd_add": ({"d": (4, 2), "u": (3, 2)},
                       ["%i = pf.constant dense<[[3], [1], [3]]> : tensor<3x1xi64>",
                        "%out = pf.scatter_nd %d, %i, %u reduction add : (tensor<4x2xf64>, tensor<3x1xi64>, tensor<3x2xf64>) -> tensor<4x2xf64>"],
                       (4, 2), lambda e: _scatter(e["d"], [3, 1, 3], e["u"], add=True)),
    "cumsum": ({"x": (2, 4)},
               ["%out = pf.cumsum %x {axis = 1 : i64} : (tensor<2x4xf64>) -> tensor<2x4xf64>"],
               (2, 4), lambda e: np.cumsum(e["x"], axis=1)),
    "cumsum_exclusive_reverse": ({"x": (3, 2)},
                                 ["%out = pf.cumsum %x {axis = 0 : i64, exclusive, reverse} : (tensor<3x2xf64>) -> tensor<3x2xf64>"],
                                 (3, 2), lambda e: np.flip(np.cumsum(np.flip(e["x"], 0), 0), 0) - e["x"]),
    "trilu": ({"x": (2, 3, 4)},
              ["%out = pf.trilu %x {k = 1 : i64} : (tensor<2x3x4xf64>) -> tensor<2x3x4xf64>"],
              (2, 3, 4), lambda e: np.triu(e["x"], 1)),
    "trilu_lower": ({"x": (3, 3)},
                    ["%out = pf.trilu %x {k = -1 : i64, upper = false} : (tensor<3x3xf64>) -> tensor<3x3xf64>"],
                    (3, 3), lambda e: np.tril(e["x"], -1)),
    # ReduceMax/Min: dy goes to the arg-extreme.
    "reduce_max": ({"x": (2, 3, 4)},
                   ["%out = pf.reduce_max %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf64>) -> tensor<2x4xf64>"],
                   (2, 4), lambda e: e["x"].max(axis=1)),
    "reduce_min_all": ({"x": (3, 4)},
                       ["%out = pf.reduce_min %x : (tensor<3x4xf64>) -> tensor<1x1xf64>"],
                       (1, 1), lambda e: e["x"].min(keepdims=True)),
    "reduce_max_noop": ({"x": (2, 3)},
                        ["%out = pf.reduce_max %x {noop_with_empty_axes} : (tensor<2x3xf64>) -> tensor<2x3xf64>"],
                        (2, 3), lambda e: e["x"]),
    # A NaN/inf mask carries no gradient; the select does.
    "is_nan_is_inf_mask": ({"x": (2, 3)},
                           ["%n = pf.is_nan %x : (tensor<2x3xf64>) -> tensor<2x3xi1>",
                            "%i = pf.is_inf %x : (tensor<2x3xf64>) -> tensor<2x3xi1>",
                            "%m = pf.or %n, %i : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>",
                            "%z = pf.constant dense<0.0> : tensor<f64>",
                            "%out = pf.where %m, %z, %x : (tensor<2x3xi1>, tensor<f64>, tensor<2x3xf64>) -> tensor<2x3xf64>"],
                           (2, 3), lambda e: e["x"]),
    "gather": ({"d": (5, 3)},
               ["%i = pf.constant dense<[[4, 0], [4, 2]]> : tensor<2x2xi64>",
                "%out = pf.gather %d, %i : (tensor<5x3xf64>, tensor<2x2xi64>) -> tensor<2x2x3xf64>"],
               (2, 2, 3), lambda e: e["d"][np.array([[4, 0], [4, 2]])]),
    "concat": ({"x": (2, 3), "y": (2, 2)},
               ["%out = pf.concat %x, %y {axis = 1 : i64} : (tensor<2x3xf64>, tensor<2x2xf64>) -> tensor<2x5xf64>"],
               (2, 5), lambda e: np.concatenate([e["x"], e["y"]], axis=1)),
    "slice": ({"x": (4, 5)},
              ["%s = pf.constant dense<[1, 0]> : tensor<2xi64>",
               "%e = pf.constant dense<[3, 4]> : tensor<2xi64>",
               "%a = pf.constant dense<[0, 1]> : tensor<2xi64>",
               "%out = pf.slice %x, %s, %e, %a {operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>} : (tensor<4x5xf64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> tensor<2x4xf64>"],
              (2, 4), lambda e: e["x"][1:3, 0:4]),
    "reduce_sum_mean": (
        {"x": (2, 3, 4)},
        ["%s = pf.reduce_sum %x {axes = array<i64: 1>, keepdims = false} : (tensor<2x3x4xf64>) -> tensor<2x4xf64>",
         "%m = pf.reduce_mean %x {axes = array<i64: 2>} : (tensor<2x3x4xf64>) -> tensor<2x3x1xf64>",
         "%ms = pf.reshape %m, %shape : (tensor<2x3x1xf64>, tensor<2xi64>) -> tensor<2x3xf64>",
         "%t = pf.transpose %ms : (tensor<2x3xf64>) -> tensor<3x2xf64>",
         "%out = pf.matmul %t, %s : (tensor<3x2xf64>, tensor<2x4xf64>) -> tensor<3x4xf64>"],
        (3, 4), lambda e: e["x"].mean(axis=2).T @ e["x"].sum(axis=1)),
    "reused_value": (  # one value feeding several ops: gradients accumulate
        {"x": (2, 3)},
        ["%a = pf.mul %x, %x : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>",
         "%b = pf.tanh %x : (tensor<2x3xf64>) -> tensor<2x3xf64>",
         "%out = pf.add %a, %b : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>"],
        (2, 3), lambda e: e["x"] ** 2 + np.tanh(e["x"])),
}


# Cases whose pf function is not exactly the float64 reference (relative tolerance).
_TOL = {"cast": 1e-6}


def _spec(spec):
    return spec if isinstance(spec[0], tuple) else (spec, None)


def _function(inputs, body, out_shape):
    args = [f'%{n}: {_t(_spec(s)[0])} {{pf.name = "{n}"}}' for n, s in inputs.items()]
    args.append(f'%w_obj: {_t(out_shape)} {{pf.name = "w_obj"}}')
    lines = list(body)
    if any("%shape" in line for line in lines):
        lines.insert(0, "%shape = pf.constant dense<[2, 3]> : tensor<2xi64>")
    lines += [
        f"%p_obj = pf.mul %out, %w_obj : ({_t(out_shape)}, {_t(out_shape)}) -> {_t(out_shape)}",
        f"%l_obj = pf.reduce_sum %p_obj {{keepdims = false}} : ({_t(out_shape)}) -> tensor<f64>",
        "return %l_obj : tensor<f64>",
    ]
    text = "\n  ".join(lines)
    return (f"func.func @main({', '.join(args)}) -> (tensor<f64> {{pf.name = \"loss\"}}) {{\n"
            f"  {text}\n}}\n")


def _fd(f, env, name, eps=1e-6):
    x = env[name]
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + eps
        plus = f(env)
        x[idx] = old - eps
        minus = f(env)
        x[idx] = old
        grad[idx] = (plus - minus) / (2 * eps)
    return grad


def _run_gradients(tmp_path, ir, env, wrt="inputs"):
    src = tmp_path / "f.mlir"
    src.write_text(ir)
    grad_ir = tmp_path / "grad.mlir"
    run_tool("pf-opt", str(src), f"--pf-build-gradients=wrt={wrt}", "-o", str(grad_ir))
    np.savez(tmp_path / "in.npz", **env)
    run_tool("pf-run", str(grad_ir), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "out.npz"))
    with np.load(tmp_path / "out.npz") as out:
        return {k: out[k] for k in out.files}


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_gradient(tmp_path, case):
    inputs, body, out_shape, fn = CASES[case]
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    env = {}
    for name, spec in inputs.items():
        shape, sampler = _spec(spec)
        env[name] = (rng.uniform(0.5, 2.0, shape) if sampler == POS
                     else rng.normal(size=shape)).astype(np.float64)
    env["w_obj"] = rng.normal(size=out_shape)

    def objective(e):
        return float(np.sum(fn(e) * e["w_obj"]))

    out = _run_gradients(tmp_path, _function(inputs, body, out_shape), env)
    tol = _TOL.get(case, 1e-9)
    assert np.allclose(out["loss"], objective(env), rtol=tol, atol=tol)
    assert set(out) == {"loss", *(f"grad/{n}" for n in [*inputs, "w_obj"])}
    np.testing.assert_allclose(out["grad/w_obj"], fn(env), rtol=tol, atol=tol)
    for name in inputs:
        got = out[f"grad/{name}"]
        want = _fd(objective, {k: v.copy() for k, v in env.items()}, name)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"grad/{name}")


def test_float32_linear_gelu(tmp_path):
    """The same machinery in float32 (BERT's dtype), against a float64 reference."""
    ir = """
func.func @main(%x: tensor<4x3xf32> {pf.name = "x"}, %w: tensor<5x3xf32> {pf.name = "w"},
                %b: tensor<5xf32> {pf.name = "b"}, %r: tensor<4x5xf32> {pf.name = "r"}) -> (tensor<f32> {pf.name = "loss"}) {
  %h = pf.linear %x, %w, %b {transpose_weight} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %g = pf.gelu %h : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %s = pf.softmax %g : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %p = pf.mul %s, %r : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %l = pf.reduce_sum %p {keepdims = false} : (tensor<4x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
"""
    rng = np.random.default_rng(3)
    env = {"x": rng.normal(size=(4, 3)), "w": rng.normal(size=(5, 3)),
           "b": rng.normal(size=5), "r": rng.normal(size=(4, 5))}

    def objective(e):
        return float(np.sum(_softmax(_gelu_erf(e["x"] @ e["w"].T + e["b"]), -1) * e["r"]))

    out = _run_gradients(tmp_path, ir, {k: v.astype(np.float32) for k, v in env.items()})
    for name in ["x", "w", "b"]:
        want = _fd(objective, {k: v.astype(np.float64) for k, v in env.items()}, name)
        np.testing.assert_allclose(out[f"grad/{name}"], want, rtol=1e-3, atol=1e-4)


def test_params_tied_and_named(tmp_path):
    """wrt=params: gradients named grad/<param>, a parameter read twice gets the sum."""
    ir = """
pf.param @emb : tensor<4x3xf64> = dense<[[0.1, 0.2, 0.3], [0.4, -0.5, 0.6], [-0.7, 0.8, 0.9], [1.0, 1.1, -1.2]]> : tensor<4x3xf64>
pf.param @bias : tensor<4xf64> = dense<[0.5, -0.25, 0.125, 1.0]> : tensor<4xf64>
func.func @main(%x: tensor<2x3xf64> {pf.name = "x"}) -> (tensor<f64> {pf.name = "loss"}) {
  %i = pf.constant dense<[3, 1]> : tensor<2xi64>
  %e1 = pf.param_ref @emb : tensor<4x3xf64>
  %g = pf.gather %e1, %i : (tensor<4x3xf64>, tensor<2xi64>) -> tensor<2x3xf64>
  %h = pf.add %g, %x : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  %e2 = pf.param_ref @emb : tensor<4x3xf64>
  %bb = pf.param_ref @bias : tensor<4xf64>
  %y = pf.linear %h, %e2, %bb {transpose_weight} : (tensor<2x3xf64>, tensor<4x3xf64>, tensor<4xf64>) -> tensor<2x4xf64>
  %t = pf.tanh %y : (tensor<2x4xf64>) -> tensor<2x4xf64>
  %l = pf.reduce_sum %t {keepdims = false} : (tensor<2x4xf64>) -> tensor<f64>
  return %l : tensor<f64>
}
"""
    emb = np.array([[0.1, 0.2, 0.3], [0.4, -0.5, 0.6], [-0.7, 0.8, 0.9], [1.0, 1.1, -1.2]])
    bias = np.array([0.5, -0.25, 0.125, 1.0])
    x = np.random.default_rng(5).normal(size=(2, 3))

    def objective(e):
        h = e["emb"][[3, 1]] + x
        return float(np.tanh(h @ e["emb"].T + e["bias"]).sum())

    out = _run_gradients(tmp_path, ir, {"x": x}, wrt="params")
    assert set(out) == {"loss", "grad/emb", "grad/bias"}
    env = {"emb": emb.copy(), "bias": bias.copy()}
    np.testing.assert_allclose(out["grad/emb"], _fd(objective, env, "emb"), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(out["grad/bias"], _fd(objective, env, "bias"), rtol=1e-5, atol=1e-7)


def test_missing_rule_is_an_error(tmp_path):
    ir = """
func.func @main(%x: tensor<2x3xf32> {pf.name = "x"}) -> tensor<f32> {
  %y = pf.gemm %x, %x {transB} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>
  %l = pf.reduce_sum %y {keepdims = false} : (tensor<2x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
"""
    src = tmp_path / "f.mlir"
    src.write_text(ir)
    proc = run_tool("pf-opt", str(src), "--pf-build-gradients=wrt=inputs", check=False)
    assert proc.returncode != 0
    assert "'pf.gemm' has no gradient rule" in proc.stderr


# --- BERT-tiny -------------------------------------------------------------------

BATCH, SEQ, VOCAB = 2, 8, 100


def _bert_with_objective():
    """BERT-tiny (1 layer, vocab 100) whose only output is sum(logits * probe)."""
    from pipefisher import make_bert_model

    model = make_bert_model("tiny", seed=1, vocab_size=VOCAB, num_hidden_layers=1)
    graph = model.graph
    logits = graph.output[0].name
    graph.input.append(helper.make_tensor_value_info(
        "probe", onnx.TensorProto.FLOAT, ["batch", "sequence", VOCAB]))
    graph.node.append(helper.make_node("Mul", [logits, "probe"], ["weighted"]))
    graph.node.append(helper.make_node("ReduceSum", ["weighted"], ["objective"], keepdims=0))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("objective", onnx.TensorProto.FLOAT, []))
    return model


def _bert_inputs():
    rng = np.random.default_rng(0)
    mask = np.ones((BATCH, SEQ), np.int64)
    mask[1, SEQ - 2:] = 0
    return {
        "input_ids": rng.integers(0, VOCAB, size=(BATCH, SEQ)).astype(np.int64),
        "token_type_ids": rng.integers(0, 2, size=(BATCH, SEQ)).astype(np.int64),
        "attention_mask": mask,
        "probe": rng.normal(size=(BATCH, SEQ, VOCAB)).astype(np.float32),
    }


def _objective_of(tmp_path, model, inputs, tag):
    from pipefisher import save_model

    path = tmp_path / f"{tag}.onnx"
    save_model(model, path)
    run_tool("pf-run", str(path), "--dim", f"batch={BATCH}", "--dim", f"sequence={SEQ}",
             "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / f"{tag}.npz"))
    with np.load(tmp_path / f"{tag}.npz") as out:
        return float(out["objective"])


def test_bert_tiny_encoder_linear_gradients(tmp_path):
    from pipefisher import save_model

    model = _bert_with_objective()
    inputs = _bert_inputs()
    np.savez(tmp_path / "in.npz", **inputs)
    save_model(model, tmp_path / "bert.onnx")
    ir = tmp_path / "bert.mlir"
    run_tool("pf-translate", "--import-onnx", str(tmp_path / "bert.onnx"), "--dim", f"batch={BATCH}",
             "--dim", f"sequence={SEQ}", "-o", str(ir))
    grad_ir = tmp_path / "bert_grad.mlir"
    run_tool("pf-opt", str(ir), "--pf-build-gradients=wrt=params", "-o", str(grad_ir))
    run_tool("pf-run", str(grad_ir), "--inputs", str(tmp_path / "in.npz"),
             "--outputs", str(tmp_path / "grads.npz"))
    with np.load(tmp_path / "grads.npz") as out:
        grads = {k: out[k] for k in out.files}
    base = grads["objective"]
    assert np.isfinite(base)
    # Every initializer that feeds the objective has a gradient of its shape.
    inits = {t.name: t for t in model.graph.initializer}
    linears = [n for n in inits if ".encoder.layer.0." in n and "LayerNorm" not in n]
    assert linears, sorted(inits)
    for name in linears:
        assert grads[f"grad/{name}"].shape == tuple(inits[name].dims), name
    # Finite differences on the largest-gradient coordinate of a few encoder linears.
    picks = [n for n in linears if any(k in n for k in ("query.weight", "attention.output.dense.weight",
                                                         "intermediate.dense.bias", "output.dense.weight"))]
    assert picks
    eps = 1e-2
    # Plus the word embedding: gathered and (tied) the decoder weight, summed.
    tied = [n for n in inits if n.endswith("word_embeddings.weight")]
    for name in picks[:4] + tied:
        g = grads[f"grad/{name}"]
        idx = np.unravel_index(np.argmax(np.abs(g)), g.shape)
        values = {}
        for sign in (1, -1):
            m = onnx.ModelProto()
            m.CopyFrom(model)
            init = next(t for t in m.graph.initializer if t.name == name)
            arr = numpy_helper.to_array(init).copy()
            arr[idx] += sign * eps
            init.CopyFrom(numpy_helper.from_array(arr, name))
            values[sign] = _objective_of(tmp_path, m, inputs, f"fd{sign}")
        fd = (values[1] - values[-1]) / (2 * eps)
        assert abs(fd - g[idx]) <= 2e-2 * abs(g[idx]) + 1e-3, (name, idx, g[idx], fd)
