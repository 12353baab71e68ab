"""The ONNX backend node tests (``onnx/backend/test/data/node/*``) on pf.

Each node test is a directory with ``model.onnx`` and ``test_data_set_N/``
holding ``input_K.pb`` and ``output_K.pb`` (TensorProtos). This module finds
them in the installed ``onnx`` package, decides which ones pf can run, runs one
through ``pf-run`` (import -> graph passes -> lowering -> JIT -> run) and
compares the outputs. ``python/tests/test_onnx_node.py`` drives it under
pytest and holds the table of known skips.

Print the table of what runs and what is skipped (docs/onnx-node-tests.md)::

    PYTHONPATH=python python3 -m pipefisher.node_tests            # classify only
    PYTHONPATH=python python3 -m pipefisher.node_tests --run      # also run them
    PYTHONPATH=python python3 -m pipefisher.node_tests --markdown # the doc's tables
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from pipefisher.tools import REPO_ROOT, tool

# pf imports the default ONNX domain at these opsets (lib/Import/ONNXImporter.cpp).
MIN_OPSET, MAX_OPSET = 11, 22
CONVERTERS_SOURCE = REPO_ROOT / "lib" / "Import" / "ONNXOpConverters.cpp"
TEST_FILE = REPO_ROOT / "python" / "tests" / "test_onnx_node.py"
RTOL, ATOL = 1e-4, 1e-5
# One pf-run call per test; a JIT compile takes a fraction of a second.
RUN_TIMEOUT_S = 60

# pf compiles for static shapes: these operands (shapes, axes, slice bounds,
# Range's bounds and step (its length depends on them), Trilu's k, Dropout's
# ratio and training mode) must be constants at import time, while
# ONNX allows them to be computed at run time, and the node tests pass them as
# graph inputs. The harness turns such a graph input into an initializer that
# holds the test's data; pf then sees what an exporter would have written.
CONSTANT_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "ConstantOfShape": (0,), "Slice": (1, 2, 3, 4),
    "Squeeze": (1,), "Unsqueeze": (1,), "ReduceSum": (1,), "ReduceMean": (1,),
    "Dropout": (1, 2), "Range": (0, 1, 2), "ReduceMax": (1,), "ReduceMin": (1,),
    "CumSum": (1,), "Trilu": (1,),
}


def node_test_root() -> Path:
    import onnx.backend.test

    return Path(onnx.backend.test.__file__).resolve().parent / "data" / "node"


@lru_cache(maxsize=None)
def supported_ops() -> frozenset[str]:
    """ONNX op types the importer has a converter for (its table in ONNXOpConverters.cpp)."""
    ops = frozenset(re.findall(r'table\["(\w+)"\]\s*=', CONVERTERS_SOURCE.read_text()))
    if not ops:
        raise RuntimeError(f"found no converter table in {CONVERTERS_SOURCE}")
    return ops


@dataclass
class NodeTest:
    name: str
    path: Path
    ops: list[str] = field(default_factory=list)  # op types in graph order, without repeats
    opset: int = 0  # the model's default-domain opset
    run_opset: int = 0  # the opset pf imports it at (see downgrade_opset)
    unsupported: list[str] = field(default_factory=list)  # op types pf has no converter for
    frozen: list[str] = field(default_factory=list)  # graph inputs made constants

    @property
    def model_path(self) -> Path:
        return self.path / "model.onnx"

    @property
    def group(self) -> str:
        """The op the test is about; for a graph of several ops (an expanded
        function) the sorted op types."""
        return self.ops[0] if len(self.ops) == 1 else " + ".join(sorted(self.ops))


def _load_model(path: Path):
    import onnx

    return onnx.load(str(path), load_external_data=False)


def _default_opset(model) -> int:
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx"):
            return opset.version
    return 0


def downgrade_opset(model) -> int:
    """The opset at which pf can import `model`.

    Node tests are generated at the newest opset (23 or 24 for many ops), above
    pf's range. Where every node's op has the same inputs, outputs and
    attributes at opset 22 as at the model's opset (23 and 24 added only new
    element types to Reshape, Transpose, Cast, ...), the model means the same at
    22, and the test imports it there. Below pf's range, see `_raise_opset`.
    Otherwise the model's own opset is kept (and pf reports it as unsupported).
    """
    import onnx.defs

    opset = _default_opset(model)
    if opset < MIN_OPSET:
        return _raise_opset(model, opset)
    if opset <= MAX_OPSET:
        return opset
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            return opset
        try:
            old = onnx.defs.get_schema(node.op_type, MAX_OPSET)
            new = onnx.defs.get_schema(node.op_type, opset)
        except onnx.defs.SchemaError:
            return opset
        if [i.name for i in old.inputs] != [i.name for i in new.inputs] or \
                [o.name for o in old.outputs] != [o.name for o in new.outputs]:
            return opset
        # An attribute new after 22 is harmless unless the node sets it.
        if any(a.name not in old.attributes for a in node.attribute):
            return opset
    return MAX_OPSET


def _raise_opset(model, opset: int) -> int:
    """MIN_OPSET where every node's op has one definition from `opset` to it.

    Old node tests (And, Or, Xor at opset 7, Not at 1) use ops whose schema
    has not changed since: the definition in force at MIN_OPSET is the one the
    model was written against (same since_version), so the model means the
    same there. Otherwise the model's own opset is kept (and reported).
    """
    import onnx.defs

    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            return opset
        try:
            at_min = onnx.defs.get_schema(node.op_type, MIN_OPSET)
        except onnx.defs.SchemaError:
            return opset
        if at_min.since_version > opset:
            return opset
    return MIN_OPSET


def frozen_inputs(model) -> list[str]:
    """Graph inputs that feed an operand of CONSTANT_INPUTS (in graph input order)."""
    initializers = {i.name for i in model.graph.initializer}
    wanted = set()
    for node in model.graph.node:
        if node.domain in ("", "ai.onnx"):
            for i in CONSTANT_INPUTS.get(node.op_type, ()):
                if i < len(node.input) and node.input[i]:
                    wanted.add(node.input[i])
    return [i.name for i in model.graph.input if i.name in wanted and i.name not in initializers]


def discover(root: Path | None = None) -> list[NodeTest]:
    root = root or node_test_root()
    tests = []
    for path in sorted(p for p in root.iterdir() if (p / "model.onnx").exists()):
        model = _load_model(path / "model.onnx")
        ops = list(dict.fromkeys(
            n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
            for n in model.graph.node))
        tests.append(NodeTest(
            name=path.name, path=path, ops=ops, opset=_default_opset(model),
            run_opset=downgrade_opset(model), frozen=frozen_inputs(model),
            unsupported=[op for op in ops if op not in supported_ops()]))
    return tests


def skip_reason(test: NodeTest, skips: dict[str, str]) -> str | None:
    """Why `test` does not run on pf, or None when it runs."""
    if test.unsupported:
        return "op " + ", ".join(test.unsupported) + " not supported"
    if test.name in skips:
        return skips[test.name]
    if not MIN_OPSET <= test.run_opset <= MAX_OPSET:
        return f"opset {test.opset} (pf imports {MIN_OPSET}-{MAX_OPSET})"
    return None


def _read_tensor(path: Path) -> np.ndarray:
    import onnx
    from onnx import numpy_helper

    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    return numpy_helper.to_array(tensor)


def _shape_arg(array: np.ndarray) -> str:
    return "x".join(str(d) for d in array.shape)


def run_test(test: NodeTest, workdir: Path, data_set: int = 0,
             expect_error: bool = False) -> None:
    """Runs one node test through pf-run and compares its outputs.

    Raises AssertionError when pf-run crashes, fails or computes something
    else. With `expect_error` (a test in the skip table) pf-run must instead
    exit with an error message, and inputs that are no tensors are left out.
    """
    import onnx
    from onnx import numpy_helper

    model = _load_model(test.model_path)
    if test.run_opset != test.opset:
        for opset in model.opset_import:
            if opset.domain in ("", "ai.onnx"):
                opset.version = test.run_opset

    data = test.path / f"test_data_set_{data_set}"
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    inputs: dict[str, np.ndarray] = {}
    for k, value in enumerate(graph_inputs):
        if not value.type.HasField("tensor_type"):
            if expect_error:
                continue
            raise AssertionError(f"input '{value.name}' is not a tensor (the harness and "
                                 "pf-run handle tensors only)")
        inputs[value.name] = _read_tensor(data / f"input_{k}.pb")
    output_names = [o.name for o in model.graph.output]

    for name in test.frozen:
        if name in inputs:
            model.graph.initializer.append(numpy_helper.from_array(inputs.pop(name), name))
    kept = [i for i in model.graph.input if i.name not in test.frozen]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model_path = workdir / f"{test.name}.onnx"
    onnx.save(model, str(model_path))

    inputs_path = workdir / f"{test.name}.in.npz"
    outputs_path = workdir / f"{test.name}.out.npz"
    np.savez(inputs_path, **inputs)
    # The data fixes every input's shape (some models leave dimensions symbolic).
    args = [str(tool("pf-run")), str(model_path), "--num-threads", "1",
            "--inputs", str(inputs_path), "--outputs", str(outputs_path)]
    for name, array in inputs.items():
        args += ["--shape", f"{name}={_shape_arg(array)}"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if proc.returncode < 0:
        raise AssertionError(f"pf-run crashed (signal {-proc.returncode}):\n{proc.stderr}")
    if expect_error:
        if proc.returncode == 0:
            raise AssertionError("pf-run accepted this skipped test: run it and drop the "
                                 "skip if it passes")
        if "error" not in proc.stderr:
            raise AssertionError(f"pf-run failed ({proc.returncode}) without an error "
                                 f"message:\n{proc.stderr}")
        return
    if proc.returncode != 0:
        raise AssertionError(f"pf-run failed ({proc.returncode}):\n{proc.stderr}")

    expected = [_read_tensor(data / f"output_{i}.pb") for i in range(len(output_names))]
    with np.load(outputs_path) as got:
        for name, want in zip(output_names, expected):
            assert name in got.files, f"pf-run wrote no output '{name}' (has {got.files})"
            actual = got[name]
            assert actual.shape == want.shape, \
                f"output '{name}': shape {actual.shape}, expected {want.shape}"
            assert actual.dtype == want.dtype, \
                f"output '{name}': dtype {actual.dtype}, expected {want.dtype}"
            if np.issubdtype(want.dtype, np.floating):
                np.testing.assert_allclose(actual, want, rtol=RTOL, atol=ATOL,
                                           err_msg=f"output '{name}'")
            else:
                np.testing.assert_array_equal(actual, want, err_msg=f"output '{name}'")


def load_skips() -> dict[str, str]:
    """The SKIPS table of python/tests/test_onnx_node.py."""
    spec = importlib.util.spec_from_file_location("_pf_test_onnx_node", TEST_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.SKIPS)


DOC_HEADER = """# ONNX backend node tests on pf

The `onnx` Python package (here {onnx_version}, pinned in `python/requirements.txt`) ships
its backend node tests under `onnx/backend/test/data/node/`: one directory per test with
`model.onnx` and `test_data_set_0/` holding `input_K.pb` and `output_K.pb`.
`python/tests/test_onnx_node.py` runs each one through `pf-run` (ONNX import, graph
passes, lowering to the pfrt ABI, JIT, run on the CPU runtime) and compares every output
with the expected one: `assert_allclose(rtol=1e-4, atol=1e-5)` for floats, exact for
integers and bools, same shape and dtype. It is part of `./scripts/test.sh` and takes
about 20 s.

- A test whose graph uses an op type the importer has no converter for
  (`lib/Import/ONNXOpConverters.cpp`) is skipped as "op X not supported".
- A test of supported ops that pf cannot run is listed with its reason in `SKIPS` in
  `python/tests/test_onnx_node.py`; `test_skipped_node_errors` runs each of those
  anyway and checks that pf-run exits with an error message, not a crash, and not
  silently (a skip that starts to run has to be looked at).
- What the harness (`python/pipefisher/node_tests.py`) changes before pf sees a model:
  - **Opset.** Many tests are generated at opset 23 or 24, above pf's {min}-{max}. When every
    op of the model has the same inputs, outputs and attributes at opset {max} (23 and 24
    only added element types to Reshape, Shape, Transpose, Cast, ...) and no node sets an
    attribute that is newer, the model is imported at opset {max}; marked "opset 24→22"
    below. A model below {min} whose ops all have the same definition (ONNX schema
    `since_version`) at {min} as at its own opset (And, Or, Xor at 7; Not at 1) is
    imported at opset {min}; marked "opset 7→11".
  - **Constant inputs.** pf compiles for static shapes, so shapes, axes, slice bounds,
    Range's start/limit/delta (they set its length), Trilu's k and Dropout's
    ratio/training mode must be constants at import time, while the node tests
    feed them as graph inputs. Such an input (operand positions: {constant_inputs}) becomes an
    initializer holding the test's data; marked "constant NAME" below.
  - Every input's shape is given to pf-run with `--shape NAME=DxD` from the test data.

Regenerate this page (with a built pf-run; `$PF_BUILD_DIR` picks the build directory):

```sh
PYTHONPATH=python python3 -m pipefisher.node_tests --run --markdown > docs/onnx-node-tests.md
```

Without `--markdown` the module prints one line per test (`runs` / `passed` / `skipped:
reason`); `-k SUBSTRING` selects tests.
"""


def _markdown(tests: list[NodeTest], skips: dict[str, str], results: dict[str, str]) -> str:
    runs = [t for t in tests if skip_reason(t, skips) is None]
    known = [t for t in tests if not t.unsupported and skip_reason(t, skips)]
    unsupported = [t for t in tests if t.unsupported]
    import onnx

    lines = [DOC_HEADER.format(onnx_version=onnx.__version__, min=MIN_OPSET, max=MAX_OPSET,
                               constant_inputs=", ".join(
                                   f"{op} {'/'.join(map(str, idx))}"
                                   for op, idx in CONSTANT_INPUTS.items())),
             f"**{len(tests)} node tests: {len(runs)} run, {len(known)} skipped for a known "
             f"reason, {len(unsupported)} skipped because they use an op pf does not "
             f"import.**", ""]
    if results:
        failed = [t.name for t in runs if results.get(t.name) != "passed"]
        lines += [f"At the last regeneration (`--run`): {len(runs) - len(failed)} passed, "
                  f"{len(failed)} failed" + (": " + ", ".join(failed) if failed else "") + ".",
                  ""]
    by_reason: dict[str, int] = defaultdict(int)
    for t in known:
        by_reason[skip_reason(t, skips)] += 1
    lines += ["Skipped for a known reason, by reason:", ""]
    lines += [f"- {n}: {reason}" for reason, n in sorted(by_reason.items(), key=lambda x: -x[1])]
    lines.append("")

    lines += ["## Tests that run", "", "| op | tests |", "|---|---|"]
    groups: dict[str, list[NodeTest]] = defaultdict(list)
    for t in runs:
        groups[t.group].append(t)
    for group in sorted(groups, key=lambda g: (" + " in g, g)):
        names = []
        for t in groups[group]:
            notes = []
            if t.run_opset != t.opset:
                notes.append(f"opset {t.opset}→{t.run_opset}")
            if t.frozen:
                notes.append("constant " + ", ".join(t.frozen))
            names.append(f"`{t.name}`" + (f" ({'; '.join(notes)})" if notes else ""))
        lines.append(f"| {group} | {', '.join(names)} |")

    lines += ["", "## Skipped for a known reason", "",
              "Listed in `SKIPS` in `python/tests/test_onnx_node.py` (or an opset outside "
              f"{MIN_OPSET}-{MAX_OPSET}).", "", "| test | reason |", "|---|---|"]
    for t in known:
        lines.append(f"| `{t.name}` | {skip_reason(t, skips)} |")

    lines += ["", "## Skipped: op not supported", "",
              "Tests that use an op type without an importer converter, by the first such op "
              "(count of tests).", ""]
    by_op: dict[str, int] = defaultdict(int)
    for t in unsupported:
        by_op[t.unsupported[0]] += 1
    lines.append(", ".join(f"{op} ({n})" for op, n in sorted(by_op.items())))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="run the tests that are not skipped")
    parser.add_argument("--markdown", action="store_true", help="print the doc's tables")
    parser.add_argument("-k", default=None, help="only tests whose name contains this")
    args = parser.parse_args(argv)

    tests = discover()
    if args.k:
        tests = [t for t in tests if args.k in t.name]
    skips = load_skips()
    results: dict[str, str] = {}
    if args.run:
        with tempfile.TemporaryDirectory(prefix="pf-node-") as tmp:
            for t in tests:
                if skip_reason(t, skips) is not None:
                    continue
                try:
                    run_test(t, Path(tmp))
                    results[t.name] = "passed"
                except Exception as e:  # noqa: BLE001 - report and go on
                    results[t.name] = "FAILED: " + str(e).strip().splitlines()[0]
                    print(f"{t.name}: {e}", file=sys.stderr)
    if args.markdown:
        sys.stdout.write(_markdown(tests, skips, results))
        return 0
    for t in tests:
        reason = skip_reason(t, skips)
        status = results.get(t.name, "runs") if reason is None else "skipped: " + reason
        print(f"{t.name}\t{status}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
