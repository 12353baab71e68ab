"""Check a tool's outputs before its work (the rule of pf-train's
``driver::checkOutputs``, include/pf/Driver/OutputFiles.h).

Nothing the user made is lost, and a bad destination fails at once, not after
the work: no output may be one of the inputs or another output (compared as
files, so links and other spellings of a path resolve), none may be a
directory, and each one's directory must take a new file (it is created if
missing, then a probe file is created beside the output and removed).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass


class OutputError(Exception):
    """An output that would replace an input or another output, or that
    cannot be written: the message is one line naming the paths."""


@dataclass(frozen=True)
class NamedPath:
    """A file a tool reads or writes, with what names it (e.g. "--out",
    "CHECKPOINT.npz", "OUT.vocab.txt")."""

    what: str
    path: str | os.PathLike


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file: equal real paths (links resolved; a
    file not written yet is its directory's real path and its name), or one
    existing file (hard links, case-insensitive file systems)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def _probe(output: NamedPath) -> None:
    path = os.fspath(output.path)
    if os.path.isdir(path):
        raise OutputError(f"{output.what} '{path}' is a directory, not a file to write")
    directory = os.path.dirname(path) or "."
    existing = directory
    while existing and not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if existing and not os.path.isdir(existing):
        # makedirs would say "File exists" about the file in the way.
        raise OutputError(f"cannot write '{path}': '{existing}' is not a directory")
    try:
        os.makedirs(directory, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".pf-write-probe-", dir=directory)
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)
    except OSError as err:
        raise OutputError(f"cannot write '{path}': {err.strerror or err}")


def check_outputs(outputs: list[NamedPath], inputs: list[NamedPath], probe: bool = True) -> None:
    """Every output against every input and every earlier output, then (with
    `probe`) each output's destination; raises OutputError on the first
    problem."""
    for i, output in enumerate(outputs):
        for source in inputs:
            if same_file(output.path, source.path):
                raise OutputError(
                    f"{output.what} '{os.fspath(output.path)}' is the {source.what} file "
                    f"'{os.fspath(source.path)}': an output never replaces an input "
                    "(give another path)")
        for other in outputs[:i]:
            if same_file(output.path, other.path):
                raise OutputError(
                    f"{output.what} '{os.fspath(output.path)}' and {other.what} "
                    f"'{os.fspath(other.path)}' are one file: give each output its own path")
    for output in outputs if probe else []:
        _probe(output)


def os_error_message(err: OSError, target: str | os.PathLike) -> str:
    """One line for an OSError met while writing `target`: the target's name
    where the error names a temporary file written beside it (atomic.py's
    `.NAME.*.tmp`) or no file, else the file the error names."""
    name = os.fspath(err.filename) if err.filename is not None else None
    reason = err.strerror or str(err)
    if name is None or _is_temporary_beside(name, target):
        return f"cannot write {os.fspath(target)}: {reason}"
    return f"{name}: {reason}"


def _is_temporary_beside(name: str, target: str | os.PathLike) -> bool:
    # atomic.py writes `.NAME.*.tmp` files, and the ONNX writer a hidden
    # folder of them, in the target's folder.
    folder = os.path.dirname(os.path.abspath(target))
    relative = os.path.relpath(os.path.abspath(name), folder)
    parts = relative.split(os.sep)
    return parts[0] != ".." and any(p.startswith(".") and p not in (".", "..") for p in parts)
