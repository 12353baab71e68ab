#!/usr/bin/env python3
"""Writes the seed corpora of pf's fuzz targets (fuzz/FuzzTargets.h).

    python3 scripts/fuzz-seeds.py OUT_DIR

OUT_DIR/<target>/ gets small valid inputs taken from the test suite (the
.onnxtext and .mlir tests, the schedule profiles) or generated here the way
the tools' own inputs are made (binary ONNX from the text tests and a tiny
BERT, .npz arrays, pf-train checkpoints and corpora). Nothing is committed:
scripts/fuzz.sh regenerates them on every run.
"""
import io
import shutil
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


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    for make in (onnx_seeds, profile_seeds, npz_seeds, train_seeds, ir_seeds):
        make(out)
    for target in sorted(p for p in out.iterdir() if p.is_dir()):
        print(f"seeds: {target.name}: {len(list(target.iterdir()))} inputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
