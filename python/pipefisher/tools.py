"""Locate and drive the pf command-line tools from Python (tests, benchmarks)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

# The checkout: $PF_SOURCE_DIR (the test suite sets it), else the directory
# above python/ when this file is in a source tree.
REPO_ROOT = Path(os.environ.get("PF_SOURCE_DIR") or Path(__file__).resolve().parents[2])


def build_dir() -> Path:
    """The build directory: $PF_BUILD_DIR, else <repo>/build."""
    return Path(os.environ.get("PF_BUILD_DIR", REPO_ROOT / "build"))


def tool(name: str) -> Path:
    path = build_dir() / "bin" / name
    if not path.exists():
        raise FileNotFoundError(f"{path} not found; build pf first (./scripts/build.sh)")
    return path


def run_tool(name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Runs a pf tool and returns the completed process (text mode)."""
    proc = subprocess.run([str(tool(name)), *map(str, args)], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{name} {' '.join(map(str, args))} failed ({proc.returncode}):\n"
                           f"{proc.stderr}")
    return proc


def import_summary(model: str | os.PathLike, *args: str) -> dict:
    """Imports an ONNX model with pf-translate and returns its JSON summary."""
    proc = run_tool("pf-translate", "--import-onnx", str(model), "--summary-json", *args)
    return json.loads(proc.stdout)
