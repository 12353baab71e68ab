#!/usr/bin/env python3
"""Writes the seed corpora of pf's fuzz targets (fuzz/FuzzTargets.h).

    python3 scripts/fuzz-seeds.py OUT_DIR

OUT_DIR/<target>/ gets small valid inputs taken from the test suite (the
.onnxtext and .mlir tests, the schedule profiles, the PyTorch schedule CSVs,
the --pipeline strings) or generated here the way the tools' own inputs are
made (binary ONNX from the text tests and a tiny BERT, .npz arrays, pf-train
checkpoints and corpora, pf-aot-run model descriptions). Nothing is
committed: scripts/fuzz.sh regenerates them on every run.

    python3 scripts/fuzz-seeds.py --aot-plan DIR/model_plan.h OUT

writes the aotplan target's input for the description a `pf-run --aot DIR`
plan header gives (how test/Fuzz/Regressions/aotplan/valid-* were made).
"""
import io
import re
import shutil
import struct
import sys
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "test" / "Import" / "Inputs"))


def npz_bytes(arrays: dict, compressed: bool = False) -> bytes:
    out = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(out, **arrays)
    return out.getvalue()


def entries_bytes(arrays: dict) -> bytes:
    """The checkpoint and corpus targets' input: per entry a name line and the
    .npy bytes, entries separated by a "----" line (TrainInputsFuzzer.cpp)."""
    parts = []
    for name, array in arrays.items():
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.asarray(array))
        parts.append(name.encode() + b"\n" + buf.getvalue())
    return b"\n----\n".join(parts)


def onnx_seeds(out: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, parser

    texts = sorted((ROOT / "test" / "Import").glob("*.onnxtext"))
    (out / "onnxtext").mkdir(parents=True, exist_ok=True)
    for text in texts:
        shutil.copy(text, out / "onnxtext" / text.name)
    (out / "onnx").mkdir(parents=True, exist_ok=True)
    for text in texts:
        try:
            model = parser.parse_model(text.read_text())
        except Exception:  # the error-* tests include text that does not parse
            continue
        (out / "onnx" / (text.stem + ".onnx")).write_bytes(model.SerializeToString())

    import make_onnx
    for kind, graph in (("named-nodes", make_onnx.named_nodes), ("dedupe", make_onnx.dedupe)):
        model = helper.make_model(graph(), opset_imports=[helper.make_opsetid("", 14)])
        model.ir_version = 8
        (out / "onnx" / f"{kind}.onnx").write_bytes(model.SerializeToString())

    # An initializer in the fuzzer's fixed weights.bin (FuzzSupport.cpp).
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[4, 3],
                    data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "weights.bin"), ("offset", "64"), ("length", "48")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"])], "external",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    (out / "onnx" / "external-data.onnx").write_bytes(model.SerializeToString())

    from pipefisher.bert_onnx import make_bert_model
    from pipefisher.configs import get_config
    tiny = get_config("tiny").replace(hidden_size=8, num_attention_heads=2,
                                      intermediate_size=16, max_position_embeddings=16)
    for style in ("transpose", "pytorch"):
        model = make_bert_model(tiny, style=style, vocab_size=16, num_hidden_layers=1)
        (out / "onnx" / f"bert-{style}.onnx").write_bytes(model.SerializeToString())


def profile_seeds(out: Path) -> None:
    (out / "profile").mkdir(parents=True, exist_ok=True)
    for path in [*sorted((ROOT / "bench" / "sched" / "profiles").glob("*.json")),
                 *sorted((ROOT / "test").rglob("*.json"))]:
        shutil.copy(path, out / "profile" / path.name)


def npz_seeds(out: Path) -> None:
    d = out / "npz"
    d.mkdir(parents=True, exist_ok=True)
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f64": np.linspace(0, 1, 4),
        "f16": np.ones(3, np.float16),
        "i64": np.array(7, np.int64),
        "i32": np.arange(4, dtype=np.int32),
        "i8": np.array([-1, 2], np.int8),
        "b": np.array([True, False]),
        "empty": np.zeros((0, 3), np.float32),
    }
    (d / "all-dtypes.npz").write_bytes(npz_bytes(arrays))
    (d / "all-dtypes-compressed.npz").write_bytes(npz_bytes(arrays, compressed=True))
    (d / "one.npz").write_bytes(npz_bytes({"x": np.float32([1.5])}))
    # A .npy of format version 2 (4-byte header length), as numpy writes for
    # large headers.
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(3, dtype=np.float32), version=(2, 0))
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w") as archive:
        archive.writestr("v2.npy", buf.getvalue())
    (d / "npy-v2.npz").write_bytes(z.getvalue())


def train_seeds(out: Path) -> None:
    ck = out / "checkpoint"
    ck.mkdir(parents=True, exist_ok=True)
    # The parameters fuzzCheckpoint loads into: w f32 [2, 3], b f32 [3].
    checkpoint = {
        "param/w": np.arange(6, dtype=np.float32).reshape(2, 3),
        "param/b": np.zeros(3, np.float32),
        "meta/step": np.int64(12),
        "meta/seed": np.int64(0),
        "meta/train_rows": np.int64(4),
    }
    (ck / "checkpoint").write_bytes(entries_bytes(checkpoint))
    (ck / "wrong-rows").write_bytes(entries_bytes({**checkpoint, "meta/train_rows": np.int64(9)}))
    (ck / "no-step").write_bytes(entries_bytes({k: v for k, v in checkpoint.items()
                                                if k != "meta/step"}))

    from pipefisher.corpus import make_corpus
    co = out / "corpus"
    co.mkdir(parents=True, exist_ok=True)
    for rows, length in ((6, 8), (3, 16)):
        corpus = make_corpus(rows, length)
        corpus.pop("vocab")
        (co / f"corpus-{rows}x{length}").write_bytes(entries_bytes(corpus))
    corpus = make_corpus(4, 8)
    (co / "tokens-only").write_bytes(entries_bytes({"tokens": corpus["tokens"]}))
    # Tiny arrays: an empty or zero-row one is a few mutations away.
    (co / "tiny").write_bytes(entries_bytes({"tokens": np.array([[2, 3]], np.int64),
                                             "vocab_size": np.int64(8)}))


def ir_seeds(out: Path) -> None:
    d = out / "ir"
    d.mkdir(parents=True, exist_ok=True)
    for path in sorted((ROOT / "test").rglob("*.mlir")):
        name = str(path.relative_to(ROOT / "test")).replace("/", "_")
        shutil.copy(path, d / name)


def split_file_sections(path: Path, suffix: str) -> dict:
    """The `//--- NAME` sections (lit's split-file) of a test whose NAME ends
    in `suffix`: {NAME: text}."""
    sections, name, lines = {}, None, []
    for line in path.read_text().splitlines(keepends=True):
        if line.startswith("//--- "):
            if name and name.endswith(suffix):
                sections[name] = "".join(lines)
            name, lines = line[len("//--- "):].strip(), []
        elif name is not None:
            lines.append(line)
    if name and name.endswith(suffix):
        sections[name] = "".join(lines)
    return sections


def torchcsv_seeds(out: Path) -> None:
    """PyTorch's schedule CSVs of the pf-sched tests (the golden orders and
    the bad files of schedule-errors.test)."""
    d = out / "torchcsv"
    d.mkdir(parents=True, exist_ok=True)
    for path in sorted((ROOT / "test" / "pf-sched" / "Inputs" / "torch").glob("*.csv")):
        shutil.copy(path, d / path.name)
    for test in sorted((ROOT / "test" / "pf-sched").glob("*.test")):
        for name, text in split_file_sections(test, ".csv").items():
            (d / f"{test.stem}_{name}").write_text(text)
    # An overlapped pair on one rank; a whole backward beside split ones.
    (d / "pair.csv").write_text("0F0,(0F1;0B0)OVERLAP_F_B,0B1\n")
    (d / "mixed-backward.csv").write_text("0F0,0F1,0I0,0W0,0B1\n")


#: --pipeline strings of the tests and docs (each once), beside these.
PIPELINE_STRINGS = [
    "stages=2 schedule=1f1b microbatches=4",
    "stages=4 schedule=interleaved chunks=2 microbatches=8 overlap=false",
    "stages=2 schedule=chimera microbatches=4 kfac=bubbles refresh=0 max-overhead=0.01 "
    "max-refresh=10 split-precondition=false",
    "stages=2 schedule=zb-v microbatches=4 grain=ends tied-per-microbatch=false "
    "deterministic=true",
    "schedule=dualpipev microbatches=8 grain=block kfac=step",
    "stages={2} schedule='zb-h2' microbatches=\"6\"",
]


def pipeline_seeds(out: Path) -> None:
    """The option strings of pf-train/pf-run --pipeline: those the tests,
    docs and examples give (`--pipeline "..."`, `"--pipeline", "..."`) and
    PIPELINE_STRINGS."""
    d = out / "pipeline"
    d.mkdir(parents=True, exist_ok=True)
    found = set(PIPELINE_STRINGS)
    pattern = re.compile(r"""--pipeline(?:[ =]|", *f?)(["'])(.*?)\1""")
    for folder in ("test", "python", "docs", "examples", "scripts"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".test", ".py", ".md", ".sh", ".mlir") or not path.is_file():
                continue
            for match in pattern.finditer(path.read_text(errors="replace")):
                found.add(match.group(2))
    for i, spec in enumerate(sorted(found)):
        (d / f"spec-{i:03d}").write_text(spec)


#: pf_aot.h's PF_AOT_MODEL_VERSION and pfrt.h's PFRT_ABI_VERSION.
AOT_MODEL_VERSION, PFRT_ABI_VERSION = 2, 1
#: pfrt dtypes (ONNX numbers) and their sizes.
DTYPE_SIZE = {1: 4, 3: 1, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8}


def aot_plan_bytes(tensors, inputs, outputs, ops, arena_bytes, weights_bytes,
                   counts=None, version=AOT_MODEL_VERSION, abi=PFRT_ABI_VERSION,
                   profile_hooks=0, nulls=0) -> bytes:
    """The aotplan target's input (fuzz/AotPlanFuzzer.cpp): a tensor is
    (kind, where, dtype, shape), an input or output (name, tensor), an op its
    name; `counts` (tensors, inputs, outputs, ops) overrides the declared
    counts."""
    counts = counts or (len(tensors), len(inputs), len(outputs), len(ops))
    data = struct.pack("<ii4qqqiB", version, abi, *counts, arena_bytes, weights_bytes,
                       profile_hooks, nulls)
    for kind, where, dtype, shape in tensors:
        dims = list(shape) + [0] * (8 - len(shape))
        data += struct.pack("<iqii8q", kind, where, dtype, len(shape), *dims)
    for name, tensor in [*inputs, *outputs]:
        data += struct.pack("<q", tensor) + name.encode() + b"\0"
    for name in ops:
        data += name.encode() + b"\0"
    return data


def aot_plan_from_header(text: str) -> bytes:
    """aot_plan_bytes of the description a pf-run --aot model_plan.h gives
    (lib/Driver/Runner.cpp, writeAot, writes it)."""
    define = {k: int(v) for k, v in re.findall(r"#define PF_MODEL_(\w+) (-?\d+)", text)}
    body = text.split("pf_model_tensors[PF_MODEL_NUM_TENSORS] = {")[1].split("};")[0]
    tensors = []
    for m in re.finditer(r"\{(-?\d+), (-?\d+), (-?\d+), (-?\d+), \{([^}]*)\}\}", body):
        kind, where, dtype, rank = map(int, m.groups()[:4])
        tensors.append((kind, where, dtype, [int(x) for x in m.group(5).split(",")][:rank]))
    c_string = r'"((?:[^"\\]|\\.)*)"'

    def unquote(s: str) -> str:
        return re.sub(r"\\(.)", r"\1", s)

    def io_table(name: str):
        table = text.split(f"pf_model_{name}[")[1].split("};")[0]
        return [(unquote(n), int(t)) for n, t in re.findall(r"\{" + c_string + r", (\d+)\}", table)]

    ops_table = text.split("pf_model_op_names[PF_MODEL_NUM_OPS + 1] = {")[1].split("};")[0]
    ops = [unquote(n) for n in re.findall(c_string, ops_table)]
    inputs, outputs = io_table("inputs"), io_table("outputs")
    assert (len(tensors), len(inputs), len(outputs), len(ops)) == (
        define["NUM_TENSORS"], define["NUM_INPUTS"], define["NUM_OUTPUTS"], define["NUM_OPS"])
    return aot_plan_bytes(tensors, inputs, outputs, ops, define["ARENA_BYTES"],
                          define["WEIGHTS_BYTES"], profile_hooks=define["PROFILE_HOOKS"])


def aotplan_seeds(out: Path) -> None:
    """Model descriptions: a small valid one made here, its near misses, and
    the real ones of test/Fuzz/Regressions/aotplan/valid-* (pf-run --aot's
    plans of BERT-tiny, converted with --aot-plan)."""
    d = out / "aotplan"
    d.mkdir(parents=True, exist_ok=True)
    INPUT, OUTPUT, WEIGHTS, ARENA = range(4)
    F32, I64 = 1, 7
    tensors = [
        (INPUT, 0, F32, [2, 3]),    # x
        (INPUT, 1, I64, [2]),       # ids
        (INPUT, 0, F32, [6]),       # x as a vector
        (WEIGHTS, 0, F32, [3, 3]),  # w
        (WEIGHTS, 64, F32, [3]),    # b
        (ARENA, 0, F32, [2, 3]),    # x @ w
        (ARENA, 64, I64, []),       # a scalar
        (OUTPUT, 0, F32, [2, 3]),   # y
    ]
    inputs, outputs = [("x", 0), ("ids", 1)], [("out/y", 7)]
    ops = ["pf.matmul (node 'MatMul')", "pf.add", "pf.copy"]
    plan = dict(tensors=tensors, inputs=inputs, outputs=outputs, ops=ops,
                arena_bytes=128, weights_bytes=128)
    (d / "small").write_bytes(aot_plan_bytes(**plan))
    (d / "small-no-ops").write_bytes(aot_plan_bytes(**{**plan, "ops": []}))
    (d / "small-profiled").write_bytes(aot_plan_bytes(**plan, profile_hooks=1))
    near = {
        "arena-overrun": [*tensors[:5], (ARENA, 120, F32, [2, 3]), *tensors[6:]],
        "huge-dimension": [*tensors[:5], (ARENA, 0, F32, [1 << 40, 1 << 40]), *tensors[6:]],
        "input-view-larger": [*tensors[:2], (INPUT, 0, F32, [7]), *tensors[3:]],
        "bad-dtype": [*tensors[:3], (WEIGHTS, 0, 2, [3, 3]), *tensors[4:]],
    }
    for name, changed in near.items():
        (d / name).write_bytes(aot_plan_bytes(**{**plan, "tensors": changed}))
    (d / "output-names-input").write_bytes(
        aot_plan_bytes(**{**plan, "outputs": [("y", 0)]}))
    (d / "same-file-name").write_bytes(
        aot_plan_bytes(**{**plan, "inputs": [("a/b", 0), ("a__b", 1)]}))
    (d / "negative-count").write_bytes(aot_plan_bytes(**plan, counts=(8, -1, 1, 3)))
    (d / "null-tables").write_bytes(aot_plan_bytes(**plan, nulls=0b1111))
    for path in sorted((ROOT / "test" / "Fuzz" / "Regressions" / "aotplan").glob("valid-*")):
        shutil.copy(path, d / path.name)


def corpustext_seeds(out: Path) -> None:
    """The Python target's seeds (fuzz/corpus_text_fuzzer.py --seeds): the
    vocabularies and texts of the corpus builder's tests."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "corpus_text_fuzzer", ROOT / "fuzz" / "corpus_text_fuzzer.py")
    fuzzer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzzer)
    fuzzer.write_seeds(str(out / "corpustext"))


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--aot-plan":
        Path(sys.argv[3]).write_bytes(aot_plan_from_header(Path(sys.argv[2]).read_text()))
        return 0
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    for make in (onnx_seeds, profile_seeds, npz_seeds, train_seeds, ir_seeds, torchcsv_seeds,
                 pipeline_seeds, aotplan_seeds, corpustext_seeds):
        make(out)
    for target in sorted(p for p in out.iterdir() if p.is_dir()):
        print(f"seeds: {target.name}: {len(list(target.iterdir()))} inputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
