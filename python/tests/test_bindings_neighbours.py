"""The extension as a good neighbour: only its init function is exported, it
loads from the installed package (not a build tree), works imported twice and
beside ONNX Runtime (and torch when installed) in either order, and beside a
libMLIR.so that another library loaded first into a local scope."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bindings_support  # noqa: F401  (skips without the extension)
import pipefisher
import pipefisher._core
from pipefisher import make_bert_model, save_model

PACKAGE_DIR = Path(pipefisher.__file__).resolve().parent
EXTENSION = Path(pipefisher._core.__file__).resolve()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("neighbours") / "m.onnx"
    save_model(make_bert_model("tiny", vocab_size=100, num_hidden_layers=1, seed=1), path)
    return path


# Imports pipefisher and runs the model, printing the largest difference from
# ONNX Runtime when ORT_CHECK is set.
RUN_MODEL = textwrap.dedent("""
    import numpy as np
    import pipefisher as pf
    inputs = {"input_ids": np.arange(16, dtype=np.int64).reshape(2, 8) % 100,
              "token_type_ids": np.zeros((2, 8), np.int64),
              "attention_mask": np.ones((2, 8), np.int64)}
    logits = pf.compile(pf.import_onnx(MODEL, dims={"batch": 2, "sequence": 8})).run(inputs)["logits"]
    if ORT_CHECK:
        import onnxruntime as ort
        ref = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"]).run(["logits"], inputs)[0]
        assert np.abs(ref - logits).max() < 1e-4, np.abs(ref - logits).max()
    print("ran", logits.shape)
""")


def _python(code: str, model: Path, ort_check: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    prelude = f"MODEL = {str(model)!r}\nORT_CHECK = {ort_check!r}\n"
    proc = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_only_the_init_function_is_exported():
    nm = subprocess.run(["nm", "-D", "--defined-only", str(EXTENSION)], capture_output=True,
                        text=True, check=True)
    symbols = [line.split()[-1] for line in nm.stdout.splitlines() if line.strip()]
    assert symbols == ["PyInit__core"]


def test_libraries_come_from_the_package(model):
    """The package carries pf's shared libraries and finds them by rpath: none
    is loaded from a build tree, whatever exists next to the checkout."""
    code = RUN_MODEL + textwrap.dedent("""
        maps = open("/proc/self/maps").read()
        paths = sorted({line.split()[-1] for line in maps.splitlines()
                        if any(n in line for n in ("libPFCAPI", "libPFMLIRCAPI", "libpfrt", "_core."))})
        print("\\n".join(paths))
    """)
    proc = _python(code, model)
    paths = [Path(p) for p in proc.stdout.splitlines()[1:]]
    assert {p.name for p in paths} >= {"libPFCAPI.so", "libPFMLIRCAPI.so", "libpfrt.so.1",
                                       EXTENSION.name}
    for path in paths:
        assert path.resolve().parent == PACKAGE_DIR, path


@pytest.mark.parametrize("order", ["onnxruntime first", "pipefisher first"])
def test_beside_onnxruntime(model, order):
    first = "import onnxruntime\n" if order == "onnxruntime first" else "import pipefisher.compiler\n"
    proc = _python(first + RUN_MODEL, model, ort_check=True)
    assert "ran (2, 8, 100)" in proc.stdout


def test_beside_torch(model):
    pytest.importorskip("torch")
    proc = _python("import torch\n" + RUN_MODEL + "import torch\nprint(torch.ones(2).sum())", model)
    assert "ran (2, 8, 100)" in proc.stdout


def test_imported_twice(model):
    code = textwrap.dedent("""
        import importlib, sys
        import pipefisher, pipefisher.compiler
        importlib.reload(pipefisher)
        importlib.reload(pipefisher.compiler)
        for name in [m for m in sys.modules if m.startswith("pipefisher")]:
            del sys.modules[name]
    """) + RUN_MODEL + "import pipefisher\nimport pipefisher._core\n" + RUN_MODEL
    proc = _python(code, model)
    assert proc.stdout.count("ran (2, 8, 100)") == 2


def test_beside_a_locally_loaded_libmlir(model):
    """Another package loaded libMLIR.so into a local scope first (as Python
    loads extensions): pipefisher promotes it to the global scope before its
    own libraries load, so they agree on MLIR's TypeIDs (docs/embedding.md)."""
    from pipefisher._config import LIBMLIR
    code = f"import ctypes, os\nctypes.CDLL({LIBMLIR!r}, mode=os.RTLD_LOCAL)\n" + RUN_MODEL
    proc = _python(code, model)
    assert "ran (2, 8, 100)" in proc.stdout
