"""Writes small binary .onnx models for the importer tests.

    python3 make_onnx.py KIND OUT.onnx

KIND:
  named-nodes  MatMul + Add + Sqrt whose nodes carry names
               ("/layer/MatMul", "/layer/Add"), one left unnamed
  dedupe       two equal weights stored once: the second name is the output
               of an Identity node, as PyTorch's exporter writes them
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def named_nodes():
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "layer.weight")
    b = numpy_helper.from_array(np.full(3, 0.5, dtype=np.float32), "layer.bias")
    nodes = [
        helper.make_node("MatMul", ["X", "layer.weight"], ["mm"], name="/layer/MatMul"),
        helper.make_node("Add", ["mm", "layer.bias"], ["sum"], name="/layer/Add"),
        helper.make_node("Sqrt", ["sum"], ["Y"]),  # no name: the output names it
    ]
    graph = helper.make_graph(
        nodes, "named",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])],
        initializer=[w, b])
    return graph


def dedupe():
    w = numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "enc.layer.0.weight")
    nodes = [
        helper.make_node("Identity", ["enc.layer.0.weight"], ["enc.layer.1.weight"],
                         name="/Identity"),
        helper.make_node("MatMul", ["X", "enc.layer.0.weight"], ["h"], name="/l0/MatMul"),
        helper.make_node("MatMul", ["h", "enc.layer.1.weight"], ["Y"], name="/l1/MatMul"),
    ]
    graph = helper.make_graph(
        nodes, "dedupe",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])],
        initializer=[w])
    return graph


def main():
    kind, out = sys.argv[1], sys.argv[2]
    graph = {"named-nodes": named_nodes, "dedupe": dedupe}[kind]()
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                              producer_name="pf-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
