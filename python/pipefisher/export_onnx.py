"""Write a model trained by pf-train back as ONNX, with its trained weights.

    python3 -m pipefisher.export_onnx MODEL.onnx CHECKPOINT.npz --out trained.onnx

MODEL.onnx is the model pf-train was given; CHECKPOINT.npz what its
``--checkpoint`` wrote (``param/<name>`` arrays, ``meta/*``). The result is
MODEL.onnx with every parameter's initializer replaced by the checkpoint's
value: same graph, names, inputs and outputs, so ONNX Runtime (or pf-run, or
pf-train for more training) runs it as it ran the original. Weights pf
renamed after their layer (PyTorch's ``onnx::MatMul_N``) go back under their
initializer's name, and a folded transposed copy of a tied weight that pf
tied back (the decoder) is written as the trained weight's transpose; the
checkpoint records both (``meta/onnx_name/*``, ``meta/transposed_copy/*``).

Which names are parameters: pf makes one of every float initializer with more
than one element (docs/design.md, "Parameters"), plus one per ``Identity``
node that an exporter used to share an initializer (``pf-untie-initializers``
gives each its own copy, trained on its own). A shared parameter whose copies
came out of training different becomes an initializer of its own (the
Identity node goes); equal copies stay shared.

Refused, with a message and exit status 1 (nothing is written):
  * a file that is missing, unreadable, not ONNX, or not a pf-train checkpoint
    of format version 1;
  * a model parameter that the checkpoint lacks, and a checkpoint parameter
    that is in no initializer of the model (another model's checkpoint): the
    optimizer and K-FAC state (``<parameter>.exp_avg``, ``.momentum``,
    ``.kfac.A``, ...) is recognised by its parameter's name and left out;
  * another shape or dtype than the initializer's;
  * NaN or infinite values (a diverged run), unless ``--allow-non-finite``.

  * damaged checkpoint metadata (``meta/step`` or ``meta/format_version``
    not one int64, a name entry not UTF-8 bytes);
  * an output that is an input (MODEL.onnx, its external data file,
    CHECKPOINT.npz, also through links) or a directory, or whose folder
    takes no new file: checked before the model is read
    (pipefisher/outputs.py).

The output is written to a temporary file and renamed, so a failed export
never replaces a good file. ``--external-data`` puts the weights in
``<out>.data`` beside it (needed for models past protobuf's 2 GiB limit);
both files are written in full before either is renamed, the model last
(pipefisher/atomic.py: a failure leaves the previous pair whole).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from .atomic import atomic_write, replace_together
from .outputs import NamedPath, OutputError, check_outputs, os_error_message

#: The checkpoint layout this reads (pf-train's kCheckpointFormatVersion).
CHECKPOINT_FORMAT_VERSION = 1
_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE}
#: Protobuf cannot serialize a message past 2 GiB.
_PROTOBUF_LIMIT = 2**31 - 1


class ExportError(Exception):
    """Why the export was refused: printed as one message, no traceback."""


def _reason(err: Exception) -> str:
    """An exception's text on one line (a library's message may have several)."""
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def load_model(path: str | os.PathLike) -> tuple[onnx.ModelProto, list[Path]]:
    """The model with its weights, and the external data files they came from."""
    if not Path(path).is_file():
        raise ExportError(f"{path}: no such model file")
    try:
        model = onnx.load(str(path), load_external_data=False)
        locations = {entry.value for t in model.graph.initializer
                     if t.data_location == onnx.TensorProto.EXTERNAL
                     for entry in t.external_data if entry.key == "location"}
        onnx.load_external_data_for_model(model, str(Path(path).parent))
    except Exception as err:  # protobuf's DecodeError, missing external data, ...
        raise ExportError(f"{path}: not a readable ONNX model ({_reason(err)})")
    return model, [Path(path).parent / location for location in sorted(locations)]


def _meta_int(arrays: dict[str, np.ndarray], key: str, path) -> int:
    # pf-train writes one int64; anything else is a damaged or foreign file.
    a = arrays[key]
    if a.dtype != np.int64 or a.size != 1:
        raise ExportError(f"{path}: {key} must be one int64 value, not {a.dtype} of shape "
                          f"{list(a.shape)}")
    return int(a.reshape(()))


def _check_names(arrays: dict[str, np.ndarray], path) -> None:
    """meta/onnx_name/* and meta/transposed_copy/* are UTF-8 bytes (int8)."""
    for key, a in arrays.items():
        if not key.startswith(("meta/onnx_name/", "meta/transposed_copy/")):
            continue
        if a.ndim != 1 or a.dtype not in (np.int8, np.uint8):
            raise ExportError(f"{path}: {key} must be a name as int8 bytes, not {a.dtype} of "
                              f"shape {list(a.shape)}")
        try:
            a.astype(np.uint8).tobytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ExportError(f"{path}: {key} is not UTF-8 text")


def load_checkpoint(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], int]:
    """The checkpoint's parameters (by name, without "param/") and its step."""
    if not Path(path).is_file():
        raise ExportError(f"{path}: no such checkpoint file")
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("one .npy array, not an .npz archive")
        with data:
            arrays = {key: data[key] for key in data.files}
    # BadZipFile, zlib.error (a damaged entry), ValueError (pickled data), ...
    except Exception as err:
        raise ExportError(f"{path}: not a readable .npz ({_reason(err)})")
    if "meta/step" not in arrays or "meta/format_version" not in arrays:
        raise ExportError(f"{path}: not a pf-train checkpoint (no meta/step or "
                          "meta/format_version)")
    version = _meta_int(arrays, "meta/format_version", path)
    if version != CHECKPOINT_FORMAT_VERSION:
        raise ExportError(f"{path}: checkpoint format version {version}; this reads version "
                          f"{CHECKPOINT_FORMAT_VERSION}")
    step = _meta_int(arrays, "meta/step", path)
    if step < 0:
        raise ExportError(f"{path}: meta/step is {step}, not a step count")
    _check_names(arrays, path)
    params = {key[len("param/"):]: a for key, a in arrays.items() if key.startswith("param/")}
    return to_onnx_names(params, arrays), step


def _entries(arrays: dict[str, np.ndarray], kind: str) -> dict[str, str]:
    """``meta/<kind>/<key>`` entries: names stored as UTF-8 bytes."""
    prefix = f"meta/{kind}/"
    return {key[len(prefix):]: a.astype(np.uint8).tobytes().decode("utf-8")
            for key, a in arrays.items() if key.startswith(prefix)}


def to_onnx_names(params: dict[str, np.ndarray],
                  arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The checkpoint's parameters under the model's initializer names.

    pf renames exporter-named weights after their layer
    (``meta/onnx_name/<param>`` keeps the initializer's name) and ties an
    exporter's folded transposed copy back to its parameter
    (``meta/transposed_copy/<initializer>`` names that parameter): the copy
    is written back as the trained parameter's transpose."""
    renamed = _entries(arrays, "onnx_name")
    out = {}
    for key, a in params.items():
        owner = _owner(key, renamed) if key not in renamed else key
        out[key if owner is None else renamed[owner] + key[len(owner):]] = a
    for copy, source in _entries(arrays, "transposed_copy").items():
        trained = out.get(renamed.get(source, source))
        if trained is not None and trained.ndim == 2:
            out[copy] = np.ascontiguousarray(trained.T)
    return out


def model_parameters(model: onnx.ModelProto) -> tuple[dict[str, onnx.TensorProto],
                                                       dict[str, str]]:
    """pf's parameters: float initializers with more than one element, and
    the Identity outputs that share one (name -> the initializer's name)."""
    initializers = {}
    for t in model.graph.initializer:
        if t.data_type in _FLOATS and int(np.prod(t.dims, dtype=np.int64)) > 1:
            initializers[t.name] = t
    shared = {n.output[0]: n.input[0] for n in model.graph.node
              if n.op_type == "Identity" and len(n.input) == 1 and n.input[0] in initializers}
    return initializers, shared


def _owner(name: str, parameters) -> str | None:
    """The parameter whose optimizer or K-FAC state `name` is, if any."""
    best = None
    for p in parameters:
        if name.startswith(p + ".") and (best is None or len(p) > len(best)):
            best = p
    return best


def _some(names: list[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in sorted(names)[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def match_weights(model: onnx.ModelProto, params: dict[str, np.ndarray], ckpt: str,
                  allow_non_finite: bool = False) -> dict[str, np.ndarray]:
    """The trained value of every model parameter, checked against the model."""
    initializers, shared = model_parameters(model)
    names = set(initializers) | set(shared)
    missing = [n for n in names if n not in params]
    if missing:
        raise ExportError(f"{ckpt}: has no parameter {_some(missing)} of the model "
                          f"(a checkpoint of another model?)")
    foreign = [n for n in params if n not in names and _owner(n, names) is None]
    if foreign:
        raise ExportError(f"{ckpt}: parameter {_some(foreign)} is in no initializer of the "
                          f"model (a checkpoint of another model?)")
    weights = {}
    for name in sorted(names):
        source = initializers[shared.get(name, name)]
        want_shape = tuple(source.dims)
        want_dtype = onnx.helper.tensor_dtype_to_np_dtype(source.data_type)
        got = params[name]
        if got.shape != want_shape or got.dtype != want_dtype:
            raise ExportError(f"{ckpt}: parameter '{name}' is {got.dtype} {list(got.shape)}; "
                              f"the model's initializer is {np.dtype(want_dtype)} "
                              f"{list(want_shape)}")
        weights[name] = got
    if not allow_non_finite:
        bad = [n for n, w in weights.items() if not np.isfinite(w).all()]
        if bad:
            raise ExportError(f"{ckpt}: parameter {_some(bad)} holds NaN or infinite values "
                              "(the run diverged?); --allow-non-finite writes them anyway")
    return weights


def with_weights(model: onnx.ModelProto, weights: dict[str, np.ndarray],
                 checkpoint: str, step: int) -> tuple[onnx.ModelProto, int]:
    """A copy of `model` whose parameters are `weights`; also returns how many
    shared initializers had to be split."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    initializers, shared = model_parameters(out)
    for t in out.graph.initializer:
        if t.name in weights:
            t.CopyFrom(numpy_helper.from_array(weights[t.name], t.name))
    # Copies that training kept equal stay shared; others become initializers.
    split = {name for name, source in shared.items()
             if not np.array_equal(weights[name], weights[source])}
    kept = [n for n in out.graph.node if not (n.op_type == "Identity" and n.output[0] in split)]
    del out.graph.node[:]
    out.graph.node.extend(kept)
    out.graph.initializer.extend(numpy_helper.from_array(weights[n], n) for n in sorted(split))
    props = {p.key: p.value for p in out.metadata_props}
    props.update({"pf.weights": "trained", "pf.checkpoint": Path(checkpoint).name,
                  "pf.checkpoint_step": str(step)})
    onnx.helper.set_model_props(out, props)
    return out, len(split)


def data_path(out: str | os.PathLike) -> Path:
    """The external data file written beside the model `out`."""
    return Path(f"{out}.data")


def save(model: onnx.ModelProto, out: str | os.PathLike, external_data: bool) -> None:
    """Writes `model` atomically; for external data, the model and its data
    file as a set: both written in full to a staging folder beside them,
    then renamed into place, the data first and the model that names it
    last, with the old pair put back if a rename fails (replace_together)."""
    out = Path(out)
    if not external_data:
        if model.ByteSize() > _PROTOBUF_LIMIT:
            raise ExportError("the model is over protobuf's 2 GiB limit: use --external-data")
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as err:
            raise ExportError(f"the trained model fails ONNX's checker: {_reason(err)}")
        with atomic_write(out) as f:
            f.write(model.SerializeToString())
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    data_name = data_path(out).name
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        onnx.save_model(model, str(staging / out.name), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data_name, size_threshold=1024)
        replace_together([(staging / data_name, out.parent / data_name),
                          (staging / out.name, out)])
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def export(model_path, checkpoint_path, out, external_data=False,
           allow_non_finite=False) -> str:
    """The whole command; returns its summary line."""
    outputs = [NamedPath("--out", out)]
    if external_data:
        outputs.append(NamedPath("--out's data file", data_path(out)))
    try:
        check_outputs(outputs, [NamedPath("MODEL.onnx", model_path),
                                NamedPath("CHECKPOINT.npz", checkpoint_path)])
        model, model_data = load_model(model_path)
        # The data files the model names are inputs too (their weights are
        # in memory now, but the original model needs them).
        check_outputs(outputs, [NamedPath("model's external data", f) for f in model_data],
                      probe=False)
    except OutputError as err:
        raise ExportError(str(err))
    params, step = load_checkpoint(checkpoint_path)
    weights = match_weights(model, params, str(checkpoint_path), allow_non_finite)
    trained, split = with_weights(model, weights, str(checkpoint_path), step)
    save(trained, out, external_data)
    count = sum(w.size for w in weights.values())
    return (f"wrote {out}: {len(weights)} parameters ({count / 1e6:.2f}M values) from "
            f"{checkpoint_path} (step {step})"
            + (f", {split} shared initializers split by training" if split else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m pipefisher.export_onnx",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", metavar="MODEL.onnx", help="the model pf-train trained")
    parser.add_argument("checkpoint", metavar="CHECKPOINT.npz",
                        help="pf-train --checkpoint's file")
    parser.add_argument("--out", required=True, metavar="TRAINED.onnx",
                        help="the trained model (written to a temporary file, then renamed)")
    parser.add_argument("--external-data", action="store_true",
                        help="weights in OUT.data beside the model")
    parser.add_argument("--allow-non-finite", action="store_true",
                        help="write NaN/infinite weights instead of refusing")
    args = parser.parse_args(argv)
    try:
        print(export(args.model, args.checkpoint, args.out, args.external_data,
                     args.allow_non_finite))
    except ExportError as err:
        print(f"export_onnx: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"export_onnx: error: {os_error_message(err, args.out)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
