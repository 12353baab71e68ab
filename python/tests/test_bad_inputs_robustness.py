"""Bad inputs from the fuzzing study of issue 11, one test per class: each is
generated here in a temporary directory, and the tool must exit with status 1
and a message saying what is wrong: never a signal (SIGSEGV, SIGBUS, SIGFPE,
an abort in the allocator), never a silent success. The limits the messages
name are listed in docs/limits.md."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pipefisher.tools import REPO_ROOT as REPO, run_tool, tool


def _refused(proc, *messages):
    """The tool failed cleanly (exit 1, not a signal) and said each message."""
    assert proc.returncode >= 0, (
        f"killed by {signal.Signals(-proc.returncode).name}:\n{proc.stderr}")
    assert proc.returncode == 1, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    for message in messages:
        assert message in proc.stderr, proc.stderr


def _save_model(path, nodes, initializers=(), inputs=None, opset=17):
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])]
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=list(initializers))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]),
              str(path))
    return path


def _import(model, *args):
    return run_tool("pf-translate", "--import-onnx", str(model), *args, check=False)


# --- ONNX external data ------------------------------------------------------

def _external_model(directory, location, offset="0", length="64"):
    """x + w, w a [2, 8] f32 initializer (64 bytes) stored at `location`."""
    w = TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.extend([2, 8])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    return _save_model(directory / "m.onnx", [helper.make_node("Add", ["x", "w"], ["y"])], [w])


@pytest.fixture
def model_dir(tmp_path):
    directory = tmp_path / "model"
    directory.mkdir()
    (directory / "w.bin").write_bytes(np.arange(16, dtype=np.float32).tobytes())
    (directory / "short.bin").write_bytes(b"\0" * 60)
    (tmp_path / "outside.bin").write_bytes(b"\0" * 64)
    return directory


def test_external_data_inside_the_directory_is_read(model_dir):
    proc = _import(_external_model(model_dir, "w.bin"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("location, message", [
    ("../outside.bin", "leaves the model's directory ('..')"),
    ("sub/../../outside.bin", "leaves the model's directory ('..')"),
    ("/etc/passwd", "is an absolute path"),
    ("link.bin", "resolves outside the model's directory"),
])
def test_external_data_outside_the_model_directory_is_refused(model_dir, location, message):
    os.symlink(model_dir.parent / "outside.bin", model_dir / "link.bin")
    _refused(_import(_external_model(model_dir, location)),
             f"external data location '{location}' {message}")


@pytest.mark.parametrize("location, offset, length, message", [
    # A short overrun used to read zeros, a long one to fault in the mapping.
    ("short.bin", "0", "64", "with length 64 runs past the end of"),
    ("w.bin", "8", "64", "at offset 8 with length 64 runs past the end of"),
    ("w.bin", "100", "64", "offset 100 is past the end of"),
    # The declared length is checked before anything of that size exists.
    ("w.bin", "0", str(1 << 36), f"has {1 << 36} bytes of external data but its shape and "
                                  "type need 64"),
    ("w.bin", "0", "-1", "external data length '-1' is not a non-negative integer"),
])
def test_external_data_past_the_file_is_refused(model_dir, location, offset, length, message):
    _refused(_import(_external_model(model_dir, location, offset, length)), message)


def test_external_data_larger_than_the_file_is_refused_before_allocating(model_dir):
    # 2^34 f32 (64 GiB), within kMaxTensorElements: the file size refuses it.
    w = TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.extend([1 << 34])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("length", str(1 << 36))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    model = _save_model(model_dir / "big.onnx", [helper.make_node("Identity", ["w"], ["y"])], [w])
    _refused(_import(model), "runs past the end of", "(64 bytes)")


# --- Shapes ------------------------------------------------------------------

LIMIT = 1 << 36  # kMaxTensorElements


def test_reshape_whose_product_overflows_is_refused(tmp_path):
    target = helper.make_tensor("s", TensorProto.INT64, [2], [2**60 + 1, 16])
    model = _save_model(tmp_path / "m.onnx", [helper.make_node("Reshape", ["x", "s"], ["y"])],
                        [target])
    _refused(_import(model), f"reshape: target shape [{2**60 + 1}, 16]",
             f"exceeds the limit of {LIMIT} elements (kMaxTensorElements)")


def test_reshape_whose_elements_exceed_the_limit_is_refused(tmp_path):
    target = helper.make_tensor("s", TensorProto.INT64, [2], [2**35, 2**35])
    model = _save_model(tmp_path / "m.onnx", [helper.make_node("Reshape", ["x", "s"], ["y"])],
                        [target])
    _refused(_import(model), f"its {2**35} x {2**35} elements exceed the limit of {LIMIT}")


def _initializer_model(tmp_path, dims, data=None, external=False):
    w = TensorProto()
    w.name, w.data_type = "w", TensorProto.FLOAT
    w.dims.extend(dims)
    if data is not None:
        w.float_data.extend(data)
    if external:
        w.data_location = TensorProto.EXTERNAL
        entry = w.external_data.add()
        entry.key, entry.value = "location", "w.bin"
    return _save_model(tmp_path / "m.onnx", [helper.make_node("Identity", ["w"], ["y"])], [w])


@pytest.mark.parametrize("weights", [[], ["--no-weights"]], ids=["weights", "no-weights"])
@pytest.mark.parametrize("dims, external, message", [
    ([-3, 4], False, "dimension 0 is negative (-3)"),
    ([-3, 4], True, "dimension 0 is negative (-3)"),
    ([2**40, 4], False, f"dimension 0 ({2**40}) exceeds the limit of {LIMIT} elements"),
    ([2**40, 4], True, f"dimension 0 ({2**40}) exceeds the limit of {LIMIT} elements"),
    # 2^64 elements promised, none given.
    ([2**32, 2**32], False, f"its {2**32} x {2**32} elements exceed the limit of {LIMIT}"),
])
def test_initializer_with_bad_dims_is_refused(tmp_path, weights, dims, external, message):
    _refused(_import(_initializer_model(tmp_path, dims, external=external), *weights),
             f"tensor 'w' has shape [{dims[0]}, {dims[1]}]: ", message)


@pytest.mark.parametrize("weights", [[], ["--no-weights"]], ids=["weights", "no-weights"])
def test_initializer_with_too_little_data_is_refused(tmp_path, weights):
    _refused(_import(_initializer_model(tmp_path, [4, 4], data=[1.0, 2.0, 3.0]), *weights),
             "tensor 'w' holds 12 bytes of data but its shape and type need 64")


@pytest.mark.parametrize("dims, args, message", [
    ([-3, 4], [], "graph input 'x' dimension 0 is negative (-3)"),
    ([2**40, 4], [], f"graph input 'x' has shape [{2**40}, 4]: dimension 0 ({2**40}) exceeds"),
    (["batch", 4], ["--dim", f"batch={2**40}"], f"dimension 0 ({2**40}) exceeds the limit"),
])
def test_input_with_bad_dims_is_refused(tmp_path, dims, args, message):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    model = _save_model(tmp_path / "m.onnx", [helper.make_node("Identity", ["x"], ["y"])],
                        inputs=[x])
    _refused(_import(model, *args), message)


# --- .npz --------------------------------------------------------------------

def _npy(header: str, payload: bytes = b"", major: int = 1, minor: int = 0) -> bytes:
    """A .npy file with a hand-written header (numpy would refuse to write most
    of the bad ones)."""
    text = header.encode()
    length_bytes = 2 if major == 1 else 4
    text += b" " * ((64 - (8 + length_bytes + len(text) + 1) % 64) % 64) + b"\n"
    size = len(text).to_bytes(length_bytes, "little")
    return b"\x93NUMPY" + bytes([major, minor]) + size + text + payload


def _npz(path, entries):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


def _read_corpus(corpus):
    """pf-train reads --corpus first, before the model: the model need not exist."""
    return run_tool("pf-train", "no-model.onnx", "--corpus", str(corpus), check=False)


TOKENS_HEADER = "{{'descr': '<i8', 'fortran_order': False, 'shape': {0}, }}"


@pytest.mark.parametrize("major, minor", [(4, 0), (0, 0), (1, 7)])
def test_npy_of_an_unknown_version_is_refused(tmp_path, major, minor):
    corpus = _npz(tmp_path / "c.npz", {
        "tokens.npy": _npy(TOKENS_HEADER.format("(1, 2)"), bytes(16), major, minor)})
    _refused(_read_corpus(corpus),
             f"c.npz: tokens.npy: unsupported .npy format version {major}.{minor}")


def test_npy_version_2_and_3_headers_are_read(tmp_path):
    for major in (2, 3):
        corpus = _npz(tmp_path / f"c{major}.npz", {
            "tokens.npy": _npy(TOKENS_HEADER.format("(1, 2)"),
                               np.array([5, 6], np.int64).tobytes(), major)})
        proc = _read_corpus(corpus)
        # Past the corpus: it fails on the (absent) model, not on the array.
        assert "no-model.onnx" in proc.stderr and "tokens.npy" not in proc.stderr, proc.stderr


def test_npy_element_count_overflow_is_refused(tmp_path):
    # 2^32 x 2^32 x 2 wraps to 0 elements in 64 bits: an empty payload "fits".
    shape = f"({2**32}, {2**32}, 2)"
    corpus = _npz(tmp_path / "c.npz", {"tokens.npy": _npy(TOKENS_HEADER.format(shape))})
    _refused(_read_corpus(corpus), f"tokens.npy: shape {2**32}x{2**32}x2 has more than "
             f"{1 << 36} elements (kMaxNpyElements)")


def test_npz_error_names_the_entry(tmp_path):
    # The name is copied before the archive is closed (it once was read after).
    corpus = _npz(tmp_path / "c.npz", {"a-rather-long-entry-name.npy": b"not an array at all"})
    _refused(_read_corpus(corpus), "c.npz: a-rather-long-entry-name.npy is not a .npy array")


def test_npz_with_a_damaged_entry_is_refused(tmp_path):
    path = tmp_path / "c.npz"
    np.savez(path, tokens=np.arange(4096, dtype=np.int64).reshape(64, 64))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the stored array: only the CRC tells
    path.write_bytes(bytes(data))
    _refused(_read_corpus(path), "entry 'tokens.npy' of", "is damaged: CRC error")



def _forge_sizes(path, size=None, compressed_size=None):
    """Rewrites the sizes the first entry's local header and central directory
    record declare (a crafted archive: zipfile writes true ones)."""
    data = bytearray(path.read_bytes())
    # (signature, offset of the compressed size, offset of the size)
    for signature, at_compressed, at_size in ((b"PK\x03\x04", 18, 22), (b"PK\x01\x02", 20, 24)):
        at = data.find(signature)
        if size is not None:
            data[at + at_size:at + at_size + 4] = size.to_bytes(4, "little")
        if compressed_size is not None:
            data[at + at_compressed:at + at_compressed + 4] = compressed_size.to_bytes(4, "little")
    path.write_bytes(bytes(data))
    return path


def _npz_entry(path, name, array, compression, **forged):
    buffer = io.BytesIO()
    np.save(buffer, array)
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        archive.writestr(name + ".npy", buffer.getvalue())
    return _forge_sizes(path, **forged)


def _run_with_peak_memory(name, *args):
    """Runs a tool; its exit status, stderr, and peak resident memory in MiB
    (wait4's rusage: this child's alone)."""
    with subprocess.Popen([str(tool(name)), *map(str, args)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as proc:
        stderr = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr), usage.ru_maxrss / 1024


FOUR_GB = 0xFFFFFFF0

# (compression, forged sizes, what the error says)
FORGED_NPZ = [
    (zipfile.ZIP_STORED, {"size": FOUR_GB}, ["is stored in ", " bytes but declares 4294967280"]),
    (zipfile.ZIP_DEFLATED, {"size": FOUR_GB},
     ["declares 4294967280 bytes from ", " deflated bytes, more than deflate's largest ratio "
      "(1032:1, kMaxDeflateRatio) can hold"]),
    (zipfile.ZIP_STORED, {"size": FOUR_GB, "compressed_size": FOUR_GB},
     ["declares 4294967280 compressed bytes, more than the whole file ("]),
    (zipfile.ZIP_DEFLATED, {"size": 10}, ["holds more than the 10 bytes it declares"]),
    (zipfile.ZIP_BZIP2, {}, ["uses compression method 12; .npz entries are stored or deflated"]),
]


@pytest.mark.parametrize("compression, forged, messages", FORGED_NPZ)
def test_npz_entry_with_forged_sizes_is_refused_by_pf_run(tmp_path, compression, forged,
                                                          messages):
    # The sizes are checked against the file's before anything is read: the
    # fuzzer's 1.5 KB archive once made readNpz allocate the 4 GB it declared.
    model = _save_model(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "x"], ["y"])])
    inputs = _npz_entry(tmp_path / "in.npz", "x", np.zeros((2, 8), np.float32), compression,
                        **forged)
    proc = run_tool("pf-run", model, "--inputs", inputs, check=False)
    _refused(proc, f"entry 'x.npy' of '{inputs}'", *messages)


def test_npz_entry_with_a_forged_size_allocates_nothing(tmp_path):
    model = _save_model(tmp_path / "m.onnx", [helper.make_node("Add", ["x", "x"], ["y"])])
    inputs = _npz_entry(tmp_path / "in.npz", "x", np.zeros((2, 8), np.float32),
                        zipfile.ZIP_DEFLATED, size=FOUR_GB)
    proc, peak_mib = _run_with_peak_memory("pf-run", model, "--inputs", inputs)
    _refused(proc, "more than deflate's largest ratio")
    # Far below the 4 GiB declared (pf-run itself needs about 100 MiB, more
    # under AddressSanitizer).
    assert peak_mib < 1024, f"pf-run peaked at {peak_mib:.0f} MiB"


@pytest.mark.parametrize("compression, forged, messages", FORGED_NPZ[:2] + FORGED_NPZ[3:4])
def test_checkpoint_with_forged_sizes_is_refused_by_pf_train(train_setup, tmp_path, compression,
                                                             forged, messages):
    checkpoint = _npz_entry(tmp_path / "ck.npz", "meta/step", np.array(1, np.int64),
                            compression, **forged)
    proc = _train(train_setup, "--steps", "4", "--resume", checkpoint)
    _refused(proc, f"entry 'meta/step.npy' of '{checkpoint}'", *messages)


# --- pf-train: corpus and checkpoint ----------------------------------------

@pytest.fixture(scope="module")
def train_setup(tmp_path_factory):
    from pipefisher import make_bert_model, save_model
    from pipefisher.corpus import make_corpus

    tmp = tmp_path_factory.mktemp("bad-train")
    corpus = make_corpus(sequences=64, seq_len=16, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp / "corpus.npz", **corpus)
    save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=1, seed=2),
               tmp / "model.onnx")
    _train(tmp, "--steps", "2", "--checkpoint", tmp / "good.npz", check=True)
    return tmp


def _train(setup, *args, corpus=None, check=False):
    proc = run_tool("pf-train", setup / "model.onnx", "--corpus", corpus or setup / "corpus.npz",
                    "--batch", "8", "--num-threads", "1", *args, check=False)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _corpus_with(setup, path, **changes):
    data = dict(np.load(setup / "corpus.npz"))
    data.update(changes)
    np.savez(path, **{k: v for k, v in data.items() if v is not None})
    return path


@pytest.mark.parametrize("changes, message", [
    ({"tokens": np.zeros((0, 16), np.int64)}, "'tokens' is 0 x 16: it needs at least one "
                                              "sequence"),
    ({"tokens": np.zeros((8, 0), np.int64)}, "'tokens' is 8 x 0"),
    ({"vocab_size": np.zeros(0, np.int64)}, "'vocab_size' must be one int64 value, not int64 "
                                            "of shape 0"),
    ({"vocab_size": np.array(3, np.int64)}, "vocab_size 3 leaves no words after the 5 special"),
    ({"vocab_size": np.array(10, np.int64)}, "token ids must be in [0, vocab_size 10)"),
    ({"special": np.array([0, 1, 2, 3, -1], np.int64)}, "the [MASK] id -1 is not in [0, "
                                                        "vocab_size 84)"),
    ({"special": np.array([0, 1, 2], np.int64)}, "'special' must be 5 int64 ids"),
])
def test_bad_corpus_is_refused(train_setup, tmp_path, changes, message):
    corpus = _corpus_with(train_setup, tmp_path / "bad.npz", **changes)
    _refused(_train(train_setup, "--steps", "2", corpus=corpus), f"{corpus}: {message}")


def test_corpus_with_negative_token_is_refused(train_setup, tmp_path):
    tokens = np.load(train_setup / "corpus.npz")["tokens"].copy()
    tokens[3, 5] = -7
    corpus = _corpus_with(train_setup, tmp_path / "bad.npz", tokens=tokens)
    _refused(_train(train_setup, "--steps", "2", corpus=corpus),
             "token ids must be in [0, vocab_size 84); the corpus holds -7")


def _checkpoint_with(setup, path, **changes):
    data = dict(np.load(setup / "good.npz"))
    for key, value in changes.items():
        key = "meta/" + key
        if value is None:
            del data[key]
        else:
            data[key] = value
    np.savez(path, **data)
    return path


@pytest.mark.parametrize("changes, message", [
    ({"step": np.zeros(0, np.int64)}, "meta/step must be one int64 value, not int64 of shape 0"),
    ({"step": np.array(-5, np.int64)}, "meta/step is -5, not a step count"),
    ({"step": np.array(2**62, np.int64)}, f"is after step {2**62} and --steps is 4: nothing is "
                                          "left to train"),
    ({"step": np.array(2.0)}, "meta/step must be one int64 value, not float64"),
    ({"train_rows": np.zeros(0, np.int64)}, "meta/train_rows must be one int64 value"),
    ({"train_rows": np.array(-1, np.int64)}, "was trained on -1 corpus sequences, this run on 64"),
    ({"train_rows": np.array(2**40, np.int64)}, f"was trained on {2**40} corpus sequences"),
    ({"seed": np.array(7, np.int64)}, "was trained with --seed 7, this run has --seed 0"),
    ({"corpus_hash": np.array(12345, np.int64)}, "was trained on another corpus than"),
    ({"kfac": np.array(1, np.int64)}, "was trained with --kfac, this run does not have it"),
    ({"format_version": np.array(99, np.int64)}, "is checkpoint format version 99; this "
                                                 "pf-train reads version 1"),
    ({"format_version": None}, "has no meta/format_version (written by an older pf-train?"),
])
def test_bad_checkpoint_is_refused(train_setup, tmp_path, changes, message):
    checkpoint = _checkpoint_with(train_setup, tmp_path / "bad.npz", **changes)
    proc = _train(train_setup, "--steps", "4", "--resume", checkpoint)
    _refused(proc, f"{checkpoint}: {message}")
    assert "step     3" not in proc.stdout


def test_checkpoint_of_another_seed_or_corpus_is_refused(train_setup, tmp_path):
    good = train_setup / "good.npz"
    _refused(_train(train_setup, "--steps", "4", "--resume", good, "--seed", "3"),
             f"{good}: was trained with --seed 0, this run has --seed 3")
    tokens = np.load(train_setup / "corpus.npz")["tokens"][::-1].copy()
    other = _corpus_with(train_setup, tmp_path / "other.npz", tokens=tokens)
    _refused(_train(train_setup, "--steps", "4", "--resume", good, corpus=other),
             f"{good}: was trained on another corpus than {other}")
    _refused(_train(train_setup, "--steps", "4", "--resume", good, "--kfac"),
             f"{good}: was trained without --kfac, this run has it")


def test_checkpoint_is_replaced_not_rewritten_in_place(train_setup, tmp_path):
    # Written to a temporary file and renamed over the old one, so a crash
    # mid-write leaves the previous checkpoint whole: the file is a new inode.
    path = tmp_path / "ck.npz"
    _train(train_setup, "--steps", "2", "--checkpoint", path, check=True)
    before = path.stat().st_ino
    _train(train_setup, "--steps", "4", "--resume", path, "--checkpoint", path, check=True)
    assert path.stat().st_ino != before
    assert int(np.load(path)["meta/step"]) == 4
    assert [p.name for p in tmp_path.iterdir()] == ["ck.npz"]  # no temporary left


# --- Options -----------------------------------------------------------------

@pytest.mark.parametrize("option, value", [
    ("--lr", "nan"), ("--lr", "inf"), ("--mask-prob", "nan"), ("--mask-prob", "-inf"),
    ("--clip-norm", "nan"), ("--kfac-damping", "inf"),
])
def test_pf_train_refuses_non_finite_numbers(option, value):
    proc = run_tool("pf-train", "m.onnx", "--corpus", "c.npz", option, value, check=False)
    _refused(proc, f"for the {option} option: '{value}' is not a finite number")


def test_pf_opt_refuses_non_finite_pipeline_options():
    proc = run_tool("pf-opt", REPO / "test/Transforms/Training/training.mlir",
                    "--pf-training=kfac-damping=nan", check=False)
    _refused(proc, "'nan' is not a finite number")


@pytest.mark.parametrize("tool, message", [
    ("pf-train", "--num-threads 100000 must be in [0, 1024] (PFRT_MAX_THREADS)"),
    ("pf-run", "--num-threads 100000 exceeds the limit of 1024 (PFRT_MAX_THREADS)"),
])
def test_thread_count_is_bounded(tool, message):
    args = (["m.onnx", "--corpus", "c.npz"] if tool == "pf-train"
            else [REPO / "test/Transforms/Training/training.mlir"])
    _refused(run_tool(tool, *args, "--num-threads", "100000", check=False), message)


@pytest.mark.parametrize("value", ["65537", "1000000", "2147483647"])
def test_pf_train_batch_is_bounded(value):
    # Refused before the corpus is read: 10^6 once compiled the step and failed
    # on a 190 GB arena, 2^31 - 1 in the importer's shape limit.
    proc = run_tool("pf-train", "m.onnx", "--corpus", "c.npz", "--batch", value, check=False)
    _refused(proc, f"--batch {value} exceeds the limit of 65536 sequences (kMaxBatch)")


# --- Index tuples from the data --------------------------------------------

@pytest.mark.parametrize("op", ["GatherND", "ScatterND"])
def test_index_tuple_out_of_range_at_run_time_is_refused(tmp_path, op):
    """GatherND/ScatterND indices that come from the inputs are checked by the
    kernel before anything is written: an error naming the index, not a crash."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
              helper.make_tensor_value_info("i", TensorProto.INT64, [1, 2])]
    if op == "GatherND":
        node = helper.make_node("GatherND", ["x", "i"], ["y"])
    else:
        inputs.append(helper.make_tensor_value_info("u", TensorProto.FLOAT, [1]))
        node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"])
    model = _save_model(tmp_path / "m.onnx", [node], inputs=inputs)
    arrays = {"x": np.zeros((2, 8), np.float32), "i": np.array([[1, 8]], np.int64),
              "u": np.ones(1, np.float32)}
    np.savez(tmp_path / "in.npz", **{k: v for k, v in arrays.items()
                                     if k in [i.name for i in inputs]})
    proc = run_tool("pf-run", str(model), "--inputs", str(tmp_path / "in.npz"), check=False)
    _refused(proc, f"pfrt_{'gather_nd' if op == 'GatherND' else 'scatter_nd'}",
             "index 8 (element 1 of indices) is out of range for dimension 1 of size 8")
