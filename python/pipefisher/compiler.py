"""pf's compiler and runtime in the interpreter: import, pass pipelines, compile, run.

These call pf's C API (``include/pf-c``) through the extension
``pipefisher._core``, the same code the tools run (``pf-translate``,
``pf-opt``, ``pf-run``), in this process::

    import numpy as np, pipefisher as pf
    module = pf.import_onnx("bert.onnx", dims={"batch": 8, "sequence": 128})
    print(module)                                       # pf IR
    exe = pf.compile(module)
    out = exe.run({"input_ids": ids, "token_type_ids": types, "attention_mask": mask})
    module.run_pipeline("pf-training{kfac=true micro-batches=4}")   # the training step

Failures raise :mod:`pipefisher.errors` exceptions carrying the diagnostics.
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from .errors import RunError


def _load_mlir_globally() -> None:
    """Loads (or promotes) the extension's libMLIR.so into the global symbol
    scope before the extension itself. pf's libraries and libMLIR.so must
    agree on MLIR's implicit TypeIDs (docs/embedding.md): when another
    package has already loaded libMLIR.so with RTLD_LOCAL, they would not,
    and every import would fail; made global first, they do."""
    import ctypes

    try:
        from ._config import LIBMLIR
    except ImportError:  # not an installed package; the extension will say
        return
    try:
        ctypes.CDLL(LIBMLIR, mode=os.RTLD_GLOBAL)
    except OSError:
        pass  # the extension's own load reports the missing library


_load_mlir_globally()
from . import _core  # noqa: E402

__all__ = ["Module", "Executable", "TensorSpec", "import_onnx", "parse_module", "compile"]

# pf-c/Runtime.h's PF_DTYPE_* codes (ONNX's TensorProto.DataType numbers).
_DTYPES = {1: np.dtype(np.float32), 3: np.dtype(np.int8), 6: np.dtype(np.int32),
           7: np.dtype(np.int64), 9: np.dtype(np.bool_), 10: np.dtype(np.float16),
           11: np.dtype(np.float64)}


class TensorSpec(NamedTuple):
    """An input, output or parameter of an executable: name, NumPy dtype, shape."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]


def _spec(info: tuple[str, int, Sequence[int]]) -> TensorSpec:
    name, code, shape = info
    return TensorSpec(name, _DTYPES[code], tuple(int(d) for d in shape))


class Module:
    """A pf module: MLIR in pf's dialect, with the weights it was imported with.

    ``str(module)`` is the IR as ``pf-opt`` prints it. A module owns its MLIR
    context (where its weights live); executables compiled from it keep that
    context alive.
    """

    def __init__(self, core: _core.Module) -> None:
        self._core = core

    def __str__(self) -> str:
        return self._core.to_string()

    def __repr__(self) -> str:
        return f"<pipefisher.Module at {id(self):#x}; str() is its IR>"

    def to_string(self, elide_weights: bool = False, generic: bool = False) -> str:
        """The IR; ``elide_weights`` prints large constants as ``__elided__``,
        ``generic`` in MLIR's generic op form."""
        return self._core.to_string(elide_weights=elide_weights, generic=generic)

    def run_pipeline(self, pipeline: str) -> "Module":
        """Applies a pass pipeline in place and returns the module.

        ``pipeline`` is what ``pf-opt --pass-pipeline`` takes, with or without
        the ``builtin.module(...)`` around it: a pf pipeline
        (``"pf-training{kfac=true micro-batches=4}"``, ``"pf-pipeline{stages=4
        schedule=chimera}"``, ``"pf-graph-opt"``), pf passes and MLIR's
        (``"canonicalize,cse"``). Raises :class:`~pipefisher.errors.PipelineError`
        with the diagnostics when the text does not parse (unknown pass or
        option; LLVM's option parser also prints the option error on stderr) or
        a pass fails; the module may then be partly transformed.
        """
        if not isinstance(pipeline, str) or not pipeline.strip():
            raise ValueError("run_pipeline expects a non-empty pipeline string")
        self._core.run_pipeline(pipeline)
        return self

    def clone(self) -> "Module":
        """A copy (same context) to transform without touching this one."""
        return Module(self._core.clone())

    def verify(self) -> bool:
        """Whether the module passes MLIR's verifier."""
        return self._core.verify()

    def compile(self, num_threads: int = 0, function: str | None = None, *,
                device: str = "cpu", gemm_precision: str = "fp32",
                device_buffers: bool = False) -> "Executable":
        """Same as :func:`pipefisher.compile` (``compile(self, ...)``)."""
        return compile(self, num_threads=num_threads, function=function, device=device,
                       gemm_precision=gemm_precision, device_buffers=device_buffers)


def import_onnx(path: str | os.PathLike, dims: Mapping[str, int] | None = None,
                weights: bool = True, graph_passes: bool = True, *,
                shapes: Mapping[str, Sequence[int]] | None = None,
                allow_dynamic: bool = False, entry: str = "main") -> Module:
    """Imports an ONNX model (``.onnx`` with external data, or ``.onnxtext``).

    What ``pf-translate --import-onnx`` does: ``dims`` fixes symbolic
    dimensions by name (``{"batch": 8, "sequence": 128}``, ``--dim``),
    ``shapes`` whole input shapes (``{"input_ids": (8, 128)}``, ``--shape``);
    ``weights=False`` imports shapes only (enough to schedule, not to run);
    ``graph_passes=False`` keeps the raw ops (shape inference only).
    Raises :class:`~pipefisher.errors.ONNXImportError` naming the file, node,
    op type and opset on failure.
    """
    path = os.fspath(path)
    dim_list = [f"{name}={int(value)}" for name, value in (dims or {}).items()]
    shape_list = [f"{name}={'x'.join(str(int(d)) for d in shape)}"
                  for name, shape in (shapes or {}).items()]
    return Module(_core.Module.import_onnx(path, dim_list, shape_list, bool(weights),
                                           bool(graph_passes), bool(allow_dynamic), entry))


def parse_module(text: str) -> Module:
    """Parses pf IR (what ``str(module)`` or ``pf-opt`` print) into a new module."""
    return Module(_core.Module.parse(text))


class Executable:
    """A compiled module: ``run`` it on NumPy arrays.

    ``inputs``, ``outputs`` and ``parameters`` describe it
    (:class:`TensorSpec`). A training step (a module after ``pf-training``)
    owns a copy of its weights and updates it at every run;
    :meth:`parameter_arrays` views them.
    """

    def __init__(self, core: _core.Executable) -> None:
        self._core = core
        self.inputs: list[TensorSpec] = [_spec(i) for i in core.inputs]
        self.outputs: list[TensorSpec] = [_spec(o) for o in core.outputs]
        self.parameters: list[TensorSpec] = [_spec(p) for p in core.parameters]
        self._input_index = {spec.name: spec for spec in self.inputs}
        self._output_index = {spec.name: spec for spec in self.outputs}
        #: Names of the inputs the last run had to copy (dtype or layout);
        #: C-contiguous arrays of the model's dtype are passed without a copy.
        self.last_copied: list[str] = []

    def __repr__(self) -> str:
        return (f"<pipefisher.Executable: inputs {[s.name for s in self.inputs]}, "
                f"outputs {[s.name for s in self.outputs]}>")

    def _input_array(self, spec: TensorSpec, value) -> tuple[np.ndarray, bool]:
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
        if array.shape != spec.shape:
            raise RunError(f"input '{spec.name}' has shape {array.shape}, the model takes "
                           f"{spec.shape} ({spec.dtype})")
        if array.dtype != spec.dtype and not np.can_cast(array.dtype, spec.dtype, "same_kind"):
            raise RunError(f"input '{spec.name}' has dtype {array.dtype}, the model takes "
                           f"{spec.dtype} (no same-kind cast)")
        if array.dtype == spec.dtype and array.flags.c_contiguous and array.flags.aligned:
            return array, array is not value  # a list or scalar became an array
        return np.ascontiguousarray(array, dtype=spec.dtype), True

    def run(self, inputs: Mapping[str, "np.typing.ArrayLike"],
            outputs: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """Runs the model once and returns its outputs by name.

        ``inputs`` must hold every input of the model (:attr:`inputs`) by name
        with its shape; C-contiguous arrays of the model's dtype are read in
        place, others are converted (same-kind casts only) and named in
        :attr:`last_copied`. ``outputs`` picks outputs (default: all).
        Raises :class:`~pipefisher.errors.RunError` for missing, unknown or
        mis-shaped tensors and failing kernels.
        """
        missing = [name for name in self._input_index if name not in inputs]
        unknown = [name for name in inputs if name not in self._input_index]
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"missing input(s) {missing}")
            if unknown:
                parts.append(f"unknown input(s) {unknown}")
            raise RunError(f"{'; '.join(parts)}; the model takes "
                           f"{[s.name for s in self.inputs]}")
        wanted = list(self._output_index) if outputs is None else list(outputs)
        for name in wanted:
            if name not in self._output_index:
                raise RunError(f"unknown output '{name}'; the model has "
                               f"{list(self._output_index)}")
        copied = []
        core_inputs = []
        for spec in self.inputs:
            array, was_copied = self._input_array(spec, inputs[spec.name])
            if was_copied:
                copied.append(spec.name)
            core_inputs.append((spec.name, _code(spec.dtype), array))
        results = {name: np.empty(self._output_index[name].shape, self._output_index[name].dtype)
                   for name in wanted}
        core_outputs = [(name, _code(array.dtype), array) for name, array in results.items()]
        self.last_copied = copied
        self._core.run(core_inputs, core_outputs)
        return results

    __call__ = run

    def parameter_arrays(self) -> dict[str, np.ndarray]:
        """The parameters by name, as arrays over the executable's buffers (no
        copies): a training step's current weights, updated by every run.
        Writing into them sets the weights (e.g. to load a checkpoint).

        On a GPU (``device="cuda"``, or ``device_buffers``) the runs use the
        device's copy: call :meth:`copy_parameters_to_host` before reading
        these arrays and :meth:`copy_parameters_to_device` after writing them."""
        return {spec.name: self._core.parameter(i) for i, spec in enumerate(self.parameters)}

    def copy_parameters_to_host(self) -> None:
        """Brings :meth:`parameter_arrays` up to date with the device's copy
        (a no-op on the CPU)."""
        self._core.copy_parameters(True)

    def copy_parameters_to_device(self) -> None:
        """Sends :meth:`parameter_arrays` to the device's copy (a no-op on the
        CPU)."""
        self._core.copy_parameters(False)


def _code(dtype: np.dtype) -> int:
    for code, candidate in _DTYPES.items():
        if candidate == dtype:
            return code
    raise RunError(f"dtype {dtype} has no pf runtime type")


_DEVICES = {"cpu": 0, "cuda": 1}
_GEMM_PRECISIONS = {"fp32": 0, "tf32": 1, "bf16": 2}


def compile(module: Module, num_threads: int = 0, function: str | None = None, *,
            device: str = "cpu", gemm_precision: str = "fp32",
            device_buffers: bool = False) -> Executable:
    """Lowers a copy of ``module`` to the runtime and JIT-compiles it (``pf-run``).

    The module needs static shapes and weights (``import_onnx`` with
    ``weights=True``, possibly after ``run_pipeline("pf-training{...}")``);
    it is left as it is. ``num_threads`` 0 uses the runtime's default (all
    cores); ``function`` picks the function (default: the first with a body).
    ``device="cuda"`` runs it on the GPU (weights copied there once, inputs
    and outputs at every run); ``gemm_precision`` ``"tf32"`` or ``"bf16"``
    puts the model's GEMMs on the tensor cores there (K-FAC stays f32);
    ``device_buffers`` takes the GPU's path on the CPU (a check without a
    GPU). Raises :class:`~pipefisher.errors.CompileError` with the
    diagnostics (an unusable device among them).
    """
    if not isinstance(module, Module):
        raise TypeError(f"compile expects a pipefisher.Module, got {type(module).__name__}")
    if device not in _DEVICES:
        raise ValueError(f"device must be one of {sorted(_DEVICES)}, got {device!r}")
    if gemm_precision not in _GEMM_PRECISIONS:
        raise ValueError(f"gemm_precision must be one of {sorted(_GEMM_PRECISIONS)}, "
                         f"got {gemm_precision!r}")
    return Executable(_core.Executable.compile(module._core, int(num_threads), function or "",
                                               _DEVICES[device], _GEMM_PRECISIONS[gemm_precision],
                                               bool(device_buffers)))
