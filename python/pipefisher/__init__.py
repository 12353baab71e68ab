"""pf, the PipeFisher compiler, from Python.

The compiler and runtime, in this process (the extension ``pipefisher._core``
over pf's C API; ``pip install .`` builds it, docs/python.md):

* :func:`import_onnx` an ONNX model into a :class:`Module` (pf IR,
  ``str(module)``), :meth:`Module.run_pipeline` to apply pass pipelines
  (``"pf-training{kfac=true micro-batches=4}"``);
* :func:`compile` a module into an :class:`Executable` and ``run`` it on
  NumPy arrays;
* :func:`schedule` a pipeline with K-FAC work in its bubbles: a
  :class:`Report` with the figures and the SVG timeline;
* :class:`Trainer` / :func:`train`: masked-LM training, one record per step.

Model export and helpers (no extension needed): :func:`make_bert_model`,
:func:`save_model`, ``pipefisher.configs``, ``pipefisher.corpus``,
``pipefisher.tools`` (drives the command-line tools).
"""

from typing import TYPE_CHECKING

from .configs import CONFIGS, BertConfig, get_config

if TYPE_CHECKING:  # what the lazy attributes below are, for type checkers and IDEs
    from .bert_onnx import make_bert_model, save_model
    from .compiler import Executable, Module, TensorSpec, compile, import_onnx, parse_module
    from .errors import (CompileError, ONNXImportError, ParseError, PFError, PipelineError,
                         RunError, ScheduleError)
    from .scheduling import Report, schedule
    from .training import StepRecord, Trainer, mask_tokens, train

__all__ = ["CONFIGS", "BertConfig", "get_config", "make_bert_model", "save_model",
           # the compiler (pipefisher._core)
           "Module", "Executable", "TensorSpec", "import_onnx", "parse_module", "compile",
           "Report", "schedule", "Trainer", "StepRecord", "train", "mask_tokens",
           "PFError", "ONNXImportError", "ParseError", "PipelineError", "CompileError",
           "RunError", "ScheduleError"]

# Imported lazily: ``python3 -m pipefisher.bert_onnx`` must not import the
# module twice (runpy warns when a package pre-imports the module it runs),
# and the helpers work from a source tree without the compiled extension.
_LAZY = {
    "make_bert_model": "bert_onnx", "save_model": "bert_onnx",
    "Module": "compiler", "Executable": "compiler", "TensorSpec": "compiler",
    "import_onnx": "compiler", "parse_module": "compiler", "compile": "compiler",
    "Report": "scheduling", "schedule": "scheduling",
    "Trainer": "training", "StepRecord": "training", "train": "training",
    "mask_tokens": "training",
    "PFError": "errors", "ONNXImportError": "errors", "ParseError": "errors",
    "PipelineError": "errors", "CompileError": "errors", "RunError": "errors",
    "ScheduleError": "errors",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
