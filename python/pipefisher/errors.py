"""Exceptions of pipefisher's compiler API.

Every failure of the compiler or the runtime raises a :class:`PFError`
subclass; ``str(error)`` is the message followed by the diagnostics, and
``error.diagnostics`` holds the diagnostics alone, one ``LOCATION: error:
MESSAGE`` line each, as the pf tools print them.
"""

from __future__ import annotations


class PFError(RuntimeError):
    """Base class: a pf call failed. ``diagnostics`` is the compiler's text."""

    def __init__(self, message: str, diagnostics: str = "") -> None:
        self.message = message
        self.diagnostics = diagnostics
        text = message if not diagnostics else f"{message}:\n{diagnostics.rstrip()}"
        super().__init__(text)


class ONNXImportError(PFError):
    """An ONNX model could not be read or imported (file, node, op type, opset)."""


class ParseError(PFError, ValueError):
    """Text is not a valid MLIR module."""


class PipelineError(PFError):
    """A pass pipeline did not parse (unknown pass or option) or a pass failed."""


class CompileError(PFError):
    """A module could not be lowered and JIT-compiled."""


class RunError(PFError, ValueError):
    """A run was refused (missing, extra or mis-shaped tensors) or a kernel failed."""


class ScheduleError(PFError, ValueError):
    """A schedule request is impossible or malformed (names what is wrong)."""


__all__ = ["PFError", "ONNXImportError", "ParseError", "PipelineError", "CompileError",
           "RunError", "ScheduleError"]
