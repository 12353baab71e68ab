"""Bad inputs from the fuzzing study of issue 11, one test per class: each is
generated here in a temporary directory, and the tool must exit with status 1
and a message saying what is wrong: never a signal (SIGSEGV, SIGBUS, SIGFPE,
an abort in the allocator), never a silent success. The limits the messages
name are listed in docs/limits.md."""

from __future__ import annotations

import os
import signal

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pipefisher.tools import run_tool


def _refused(proc, *messages):
    """The tool failed cleanly (exit 1, not a signal) and said each message."""
    assert proc.returncode >= 0, (
        f"killed by {signal.Signals(-proc.returncode).name}:\n{proc.stderr}")
    assert proc.returncode == 1, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    for message in messages:
        assert message in proc.stderr, proc.stderr


def _save_model(path, nodes, initializers=(), inputs=None, opset=17):
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])]
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=list(initializers))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]),
              str(path))
    return path


def _import(model, *args):
    return run_tool("pf-translate", "--import-onnx", str(model), *args, check=False)


# --- ONNX external data ------------------------------------------------------

def _external_model(directory, location, offset="0", length="64"):
    """x + w, w a [2, 8] f32 initializer (64 bytes) stored at `location`."""
    w = TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.extend([2, 8])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    return _save_model(directory / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [w])


@pytest.fixture
def model_dir(tmp_path):
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "w.bin").write_bytes(np.arange(16, dtype=np.float32).tobytes())
    (directory / "short.bin").write_bytes(b"\0" * 60)
    (tmp_path / "outside.bin").write_bytes(b"\0" * 64)
    return directory


def test_external_data_inside_the_directory_is_read(model_dir):
    proc = _import(_external_model(model_dir, "w.bin"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("location, message", [
    ("../outside.bin", "leaves the model's directory ('..')"),
    ("sub/../../outside.bin", "leaves the model's directory ('..')"),
    ("/etc/passwd", "is an absolute path"),
    ("link.bin", "resolves outside the model's directory"),
])
def test_external_data_outside_the_model_directory_is_refused(model_dir, location, message):
    os.symlink(model_dir.parent / "outside.bin", model_dir / "link.bin")
    _refused(_import(_external_model(model_dir, location)),
             f"external data location '{location}' {message}")


@pytest.mark.parametrize("location, offset, length, message", [
    # A short overrun used to read zeros, a long one to fault in the mapping.
    ("short.bin", "0", "64", "with length 64 runs past the end of"),
    ("w.bin", "8", "64", "at offset 8 with length 64 runs past the end of"),
    ("w.bin", "100", "64", "offset 100 is past the end of"),
    # The declared length is checked before anything of that size exists.
    ("w.bin", "0", str(1 << 36), f"has {1 << 36} bytes of external data but its shape and "
                                  "type need 64"),
    ("w.bin", "0", "-1", "external data length '-1' is not a non-negative integer"),
])
def test_external_data_past_the_file_is_refused(model_dir, location, offset, length, message):
    _refused(_import(_external_model(model_dir, location, offset, length)), message)


def test_external_data_larger_than_the_file_is_refused_before_allocating(model_dir):
    # 2^34 f32 (64 GiB), within kMaxTensorElements: the file size refuses it.
    w = TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.extend([1 << 34])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("length", str(1 << 36))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    model = _save_model(model_dir / "big.onnx", [helper.make_node("Identity", ["w"], ["y"])], [w])
    _refused(_import(model), "runs past the end of", "(64 bytes)")


# --- Shapes ------------------------------------------------------------------

LIMIT = 1 << 36  # kMaxTensorElements


def test_reshape_whose_product_overflows_is_refused(tmp_path):
    target = helper.make_tensor("s", TensorProto.INT64, [2], [2**60 + 1, 16])
    model = _save_model(tmp_path / "m.onnx", [helper.make_node("Reshape", ["x", "s"], ["y"])],
                        [target])
    _refused(_import(model), f"reshape: target shape [{2**60 + 1}, 16]",
             f"exceeds the limit of {LIMIT} elements (kMaxTensorElements)")


def test_reshape_whose_elements_exceed_the_limit_is_refused(tmp_path):
    target = helper.make_tensor("s", TensorProto.INT64, [2], [2**35, 2**35])
    model = _save_model(tmp_path / "m.onnx", [helper.make_node("Reshape", ["x", "s"], ["y"])],
                        [target])
    _refused(_import(model), f"its {2**35} x {2**35} elements exceed the limit of {LIMIT}")


def _initializer_model(tmp_path, dims, data=None, external=False):
    w = TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.extend(dims)
    if data is not None:
        w.float_data.extend(data)
    if external:
        w.data_location = TensorProto.EXTERNAL
        entry = w.external_data.add()
        entry.key, entry.value = "location", "w.bin"
    return _save_model(tmp_path / "m.onnx", [helper.make_node("Identity", ["w"], ["y"])], [w])


@pytest.mark.parametrize("weights", [[], ["--no-weights"]], ids=["weights", "no-weights"])
@pytest.mark.parametrize("dims, external, message", [
    ([-3, 4], False, "dimension 0 is negative (-3)"),
    ([-3, 4], True, "dimension 0 is negative (-3)"),
    ([2**40, 4], False, f"dimension 0 ({2**40}) exceeds the limit of {LIMIT} elements"),
    ([2**40, 4], True, f"dimension 0 ({2**40}) exceeds the limit of {LIMIT} elements"),
    # 2^64 elements promised, none given.
    ([2**32, 2**32], False, f"its {2**32} x {2**32} elements exceed the limit of {LIMIT}"),
])
def test_initializer_with_bad_dims_is_refused(tmp_path, weights, dims, external, message):
    _refused(_import(_initializer_model(tmp_path, dims, external=external), *weights),
             f"tensor 'w' has shape [{dims[0]}, {dims[1]}]: ", message)


@pytest.mark.parametrize("weights", [[], ["--no-weights"]], ids=["weights", "no-weights"])
def test_initializer_with_too_little_data_is_refused(tmp_path, weights):
    _refused(_import(_initializer_model(tmp_path, [4, 4], data=[1.0, 2.0, 3.0]), *weights),
             "tensor 'w' holds 12 bytes of data but its shape and type need 64")


@pytest.mark.parametrize("dims, args, message", [
    ([-3, 4], [], "graph input 'x' dimension 0 is negative (-3)"),
    ([2**40, 4], [], f"graph input 'x' has shape [{2**40}, 4]: dimension 0 ({2**40}) exceeds"),
    (["batch", 4], ["--dim", f"batch={2**40}"], f"dimension 0 ({2**40}) exceeds the limit"),
])
def test_input_with_bad_dims_is_refused(tmp_path, dims, args, message):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    model = _save_model(tmp_path / "m.onnx", [helper.make_node("Identity", ["x"], ["y"])],
                        inputs=[x])
    _refused(_import(model, *args), message)
