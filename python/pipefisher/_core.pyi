"""Type stubs of pipefisher._core, the nanobind extension over pf's C API.

Use the functions and classes of the pipefisher package (compiler.py,
scheduling.py, training.py); these are their compiled halves.
"""

from typing import Optional

import numpy as np
import numpy.typing as npt

# (name, pf dtype code as in pf-c/Runtime.h, shape)
TensorInfo = tuple[str, int, list[int]]

class Module:
    """A pf module (MLIR) and the context that owns its weights."""

    @staticmethod
    def import_onnx(path: str, dims: list[str], shapes: list[str], weights: bool,
                    graph_passes: bool, allow_dynamic: bool, entry: str) -> Module: ...
    @staticmethod
    def parse(text: str) -> Module: ...
    def to_string(self, elide_weights: bool = False, generic: bool = False) -> str: ...
    def run_pipeline(self, pipeline: str) -> None: ...
    def clone(self) -> Module: ...
    def verify(self) -> bool: ...

class Executable:
    """A compiled pf module."""

    @staticmethod
    def compile(module: Module, threads: int, function: str, backend: int = 0,
                gemm_precision: int = 0, device_buffers: bool = False) -> Executable: ...
    def copy_parameters(self, to_host: bool) -> None: ...
    @property
    def inputs(self) -> list[TensorInfo]: ...
    @property
    def outputs(self) -> list[TensorInfo]: ...
    @property
    def parameters(self) -> list[TensorInfo]: ...
    def parameter(self, pos: int) -> npt.NDArray[np.generic]: ...
    def run(self, inputs: list[tuple[str, int, npt.NDArray[np.generic]]],
            outputs: list[tuple[str, int, npt.NDArray[np.generic]]]) -> None: ...

def schedule_costs(profile_json: str, profile_source: str, device: str, model: str,
                   microbatch_size: int, seq_len: int, precision: str, schedule: str,
                   stages: int, microbatches: int, layers_per_stage: int, chunks: int,
                   policy: str, refresh_steps: int, max_overhead: Optional[float],
                   margin: float, split_pieces: int, steady_state: bool,
                   memory_cap_gb: Optional[float], optimizer_states: float,
                   validate: bool) -> tuple[str, str, str, str, list[str]]: ...
