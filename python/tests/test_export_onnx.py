"""`python3 -m pipefisher.export_onnx`: a model trained by pf-train, written
back as ONNX with its checkpoint's weights. ONNX Runtime's logits on it equal
pf-run's, and pf-train's held-out loss of the exported model equals the one
it printed for the trained weights; mismatched checkpoints are refused."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from pipefisher import make_bert_model, save_model
from pipefisher.corpus import make_corpus
from pipefisher import export_onnx
from pipefisher.export_onnx import model_parameters
from pipefisher.tools import run_tool
from failure_support import failing_on_call

PYTHON_DIR = Path(__file__).resolve().parents[1]
BATCH, SEQ, STEPS = 4, 16, 3


def _cli(*args) -> subprocess.CompletedProcess:
    env = ({**os.environ} if os.environ.get("PF_TEST_INSTALLED") == "1"  # the installed package
           else {**os.environ, "PYTHONPATH": str(PYTHON_DIR)})
    return subprocess.run([sys.executable, "-m", "pipefisher.export_onnx", *map(str, args)],
                          capture_output=True, text=True, env=env)


def _refused(capsys, *args) -> str:
    """Runs the command in this process (an exception would fail the test,
    as a traceback would); returns its error output, which must be one line."""
    capsys.readouterr()
    assert export_onnx.main([str(a) for a in args]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("export_onnx: error: "), err
    return err


def _train(tmp, model, *extra):
    """A few steps at a high learning rate (the weights must move), with a
    held-out evaluation after the last."""
    checkpoint = tmp / f"{model.stem}.ckpt.npz"
    proc = run_tool("pf-train", model, "--corpus", tmp / "corpus.npz", "--steps", STEPS,
                    "--batch", BATCH, "--lr", "1e-2", "--warmup", "0", "--num-threads", "1",
                    "--eval-every", STEPS, "--eval-sequences", 8, "--checkpoint", checkpoint,
                    *extra)
    return checkpoint, _evals(proc.stdout)


def _evals(stdout: str) -> dict[int, str]:
    # The printed text, compared as text: equal weights give equal digits.
    return {int(s): loss for s, loss in re.findall(r"eval\s+(\d+)\s+loss\s+(\S+)", stdout)}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    corpus = make_corpus(sequences=64, seq_len=SEQ, seed=1)
    vocab = len(corpus.pop("vocab"))
    np.savez(tmp / "corpus.npz", **corpus)
    model = tmp / "model.onnx"
    save_model(make_bert_model("tiny", vocab_size=vocab, num_hidden_layers=1, seed=2), model)
    checkpoint, evals = _train(tmp, model)
    out = tmp / "trained.onnx"
    proc = _cli(model, checkpoint, "--out", out)
    assert proc.returncode == 0, proc.stderr
    return {"tmp": tmp, "model": model, "checkpoint": checkpoint, "out": out, "evals": evals,
            "vocab": vocab, "stdout": proc.stdout}


def _inputs(vocab: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    mask = np.ones((2, SEQ), np.int64)
    mask[1, SEQ // 2:] = 0
    return {"input_ids": rng.integers(0, vocab, size=(2, SEQ)).astype(np.int64),
            "token_type_ids": np.zeros((2, SEQ), np.int64), "attention_mask": mask}


def _ort_logits(path, inputs):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(["logits"], inputs)[0]


def _pf_logits(tmp, path, inputs):
    np.savez(tmp / "in.npz", **inputs)
    run_tool("pf-run", path, "--dim", "batch=2", "--dim", f"sequence={SEQ}", "--inputs",
             tmp / "in.npz", "--outputs", tmp / "out.npz", "--num-threads", "1")
    return np.load(tmp / "out.npz")["logits"]


def test_onnxruntime_logits_equal_pf_logits(trained):
    inputs = _inputs(trained["vocab"])
    expected = _ort_logits(trained["out"], inputs)
    got = _pf_logits(trained["tmp"], trained["out"], inputs)
    assert np.abs(got - expected).max() < 1e-4
    # The weights are the trained ones, not the initial ones.
    before = _ort_logits(trained["model"], inputs)
    assert np.abs(expected - before).max() > 1e-2


def test_held_out_loss_of_the_export_is_the_trained_one(trained):
    # pf-train evaluates before its first step with the model's weights, on
    # the same held-out rows and fixed masks as the training run's last
    # evaluation: equal only if every trained weight is where it belongs.
    proc = run_tool("pf-train", trained["out"], "--corpus", trained["tmp"] / "corpus.npz",
                    "--steps", "1", "--batch", BATCH, "--num-threads", "1", "--eval-every", "1",
                    "--eval-sequences", 8)
    exported = _evals(proc.stdout)
    assert exported[0] == trained["evals"][STEPS]
    assert trained["evals"][0] != trained["evals"][STEPS]  # training moved the loss


def test_pytorch_style_names(trained):
    # torch.onnx.export's pre-transposed "onnx::MatMul_<N>" weights, bias-first
    # Adds and the folded copy of the tied decoder: pf trains the weights
    # under their layers' names and the decoder tied to the embedding; the
    # export puts both back under the initializers' names.
    tmp = trained["tmp"]
    model = tmp / "pytorch.onnx"
    save_model(make_bert_model("tiny", vocab_size=trained["vocab"], num_hidden_layers=1, seed=2,
                               style="pytorch", gelu="tanh"), model)
    checkpoint, evals = _train(tmp, model)
    files = np.load(checkpoint)
    query = "bert.encoder.layer.0.attention.self.query.weight"
    assert f"param/{query}" in files.files
    assert not [k for k in files.files if k.startswith("param/onnx::")]
    name = files[f"meta/onnx_name/{query}"].astype(np.uint8).tobytes().decode()
    assert name == "onnx::MatMul_1"
    decoder = [k for k in files.files if k.startswith("meta/transposed_copy/")]
    assert decoder == ["meta/transposed_copy/onnx::MatMul_8"]
    out = tmp / "pytorch-trained.onnx"
    assert _cli(model, checkpoint, "--out", out).returncode == 0
    proc = run_tool("pf-train", out, "--corpus", tmp / "corpus.npz", "--steps", "1", "--batch",
                    BATCH, "--num-threads", "1", "--eval-every", "1", "--eval-sequences", 8)
    assert _evals(proc.stdout)[0] == evals[STEPS] != evals[0]


def test_initializers_are_the_checkpoint_values(trained):
    model = onnx.load(trained["out"])
    checkpoint = np.load(trained["checkpoint"])
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    initializers, shared = model_parameters(onnx.load(trained["model"]))
    assert len(initializers) == 14 and len(shared) == 12  # the generator's dedupe
    for name in list(initializers) + list(shared):
        np.testing.assert_array_equal(weights[name], checkpoint[f"param/{name}"])
    # Training split the deduplicated copies: no Identity shares them any more.
    assert not [n for n in model.graph.node if n.op_type == "Identity"]
    assert "bert.embeddings.position_ids" in weights  # non-parameters stay
    props = {p.key: p.value for p in model.metadata_props}
    assert props["pf.weights"] == "trained" and props["pf.checkpoint_step"] == str(STEPS)
    assert f"from {trained['checkpoint']} (step {STEPS}), 12 shared" in trained["stdout"]


def test_kfac_checkpoint_and_external_data(trained):
    # K-FAC and LAMB state (<w>.kfac.A, .exp_avg, ...) is recognised and left out.
    tmp = trained["tmp"]
    model = tmp / "kfac.onnx"
    save_model(make_bert_model("tiny", vocab_size=trained["vocab"], num_hidden_layers=1, seed=2),
               model)
    checkpoint, evals = _train(tmp, model, "--kfac", "--optimizer", "lamb")
    assert any(".kfac.A" in k for k in np.load(checkpoint).files)
    out = tmp / "sub" / "kfac-trained.onnx"
    proc = _cli(model, checkpoint, "--out", out, "--external-data")
    assert proc.returncode == 0, proc.stderr
    assert (tmp / "sub" / "kfac-trained.onnx.data").stat().st_size > 1e6
    assert out.stat().st_size < 1e5
    inputs = _inputs(trained["vocab"])
    assert np.abs(_pf_logits(tmp, out, inputs) - _ort_logits(out, inputs)).max() < 1e-4


def _edited_checkpoint(trained, edit):
    arrays = dict(np.load(trained["checkpoint"]))
    edit(arrays)
    path = trained["tmp"] / "edited.npz"
    np.savez(path, **arrays)
    return path


Q = "param/bert.encoder.layer.0.attention.self.query.weight"


def _drop(arrays):
    del arrays[Q]


def _foreign(arrays):
    arrays["param/decoder.weight"] = np.zeros((4, 4), np.float32)


def _float64(arrays):
    arrays[Q] = arrays[Q].astype(np.float64)


def _shape(arrays):
    arrays[Q] = arrays[Q][:, :64]


def _nan(arrays):
    arrays[Q][3, 5] = np.nan


def _version(arrays):
    arrays["meta/format_version"] = np.int64(2)


@pytest.mark.parametrize("edit,message", [
    (_drop, r"has no parameter 'bert.encoder.layer.0.attention.self.query.weight' of the model"),
    (_foreign, r"parameter 'decoder.weight' is in no initializer of the model"),
    (_float64, r"'bert.encoder.layer.0.attention.self.query.weight' is float64 \[128, 128\]; "
               r"the model's initializer is float32 \[128, 128\]"),
    (_shape, r"is float32 \[128, 64\]; the model's initializer is float32 \[128, 128\]"),
    (_nan, r"query.weight' holds NaN or infinite values"),
    (_version, r"checkpoint format version 2; this reads version 1"),
])
def test_mismatched_checkpoints_are_refused(trained, edit, message, capsys):
    checkpoint = _edited_checkpoint(trained, edit)
    out = trained["tmp"] / "refused.onnx"
    out.write_bytes(b"an older export")
    err = _refused(capsys, trained["model"], checkpoint, "--out", out)
    assert re.search(message, err), err
    assert out.read_bytes() == b"an older export"


def test_refusal_exit_status(trained):
    # The same through the command line: status 1 and a message, no traceback.
    proc = _cli(trained["model"], _edited_checkpoint(trained, _drop), "--out",
                trained["tmp"] / "refused2.onnx")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("export_onnx: error: ") and "has no parameter" in proc.stderr
    assert not (trained["tmp"] / "refused2.onnx").exists()


def test_non_finite_values_can_be_allowed(trained):
    checkpoint = _edited_checkpoint(trained, _nan)
    out = trained["tmp"] / "nan.onnx"
    proc = _cli(trained["model"], checkpoint, "--out", out, "--allow-non-finite")
    assert proc.returncode == 0, proc.stderr
    weights = {t.name: t for t in onnx.load(out).graph.initializer}
    assert np.isnan(onnx.numpy_helper.to_array(weights[Q[len("param/"):]])).sum() == 1


def test_bad_files_are_refused(trained, tmp_path, capsys):
    model, checkpoint = trained["model"], trained["checkpoint"]
    other = tmp_path / "other.onnx"
    save_model(make_bert_model("tiny", vocab_size=50, num_hidden_layers=1), other)
    cases = [
        ((tmp_path / "none.onnx", checkpoint), r"none.onnx: no such model file"),
        ((model, tmp_path / "none.npz"), r"none.npz: no such checkpoint file"),
        ((checkpoint, checkpoint), r"not a readable ONNX model"),
        ((model, trained["tmp"] / "corpus.npz"), r"corpus.npz: not a pf-train checkpoint"),
        ((model, model), r"not a readable .npz"),
        # The checkpoint of another model (a 50-word vocabulary).
        ((other, checkpoint), r"word_embeddings.weight' is float32 \[84, 128\]; the model's "
                              r"initializer is float32 \[50, 128\]"),
    ]
    for (m, c), message in cases:
        err = _refused(capsys, m, c, "--out", tmp_path / "out.onnx")
        assert re.search(message, err), err
    assert not (tmp_path / "out.onnx").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.onnx"]  # no temporaries


# Issue 39: nothing the user made is lost, a bad destination fails first.

def test_an_output_never_replaces_an_input(trained, tmp_path, capsys):
    model, checkpoint = trained["model"], trained["checkpoint"]
    (tmp_path / "ckpt-link.npz").symlink_to(checkpoint)
    (tmp_path / "c.onnx.data").symlink_to(checkpoint)
    # A model whose weights live in the data file that --external-data writes.
    with_data = tmp_path / "ext.onnx"
    onnx.save_model(onnx.load(model), with_data, save_as_external_data=True,
                    all_tensors_to_one_file=True, location="ext-trained.onnx.data",
                    size_threshold=1024)
    inputs = [model, checkpoint, with_data, tmp_path / "ext-trained.onnx.data"]
    before = [p.read_bytes() for p in inputs]
    cases = [  # (MODEL.onnx, --out and options, the error's words)
        (model, [model], f"--out '{model}' is the MODEL.onnx file '{model}'"),
        (model, [model.parent / "." / model.name], "is the MODEL.onnx file"),
        (model, [tmp_path / "ckpt-link.npz"],
         f"--out '{tmp_path}/ckpt-link.npz' is the CHECKPOINT.npz file '{checkpoint}'"),
        (model, [tmp_path / "c.onnx", "--external-data"],
         f"--out's data file '{tmp_path}/c.onnx.data' is the CHECKPOINT.npz file"),
        (with_data, [tmp_path / "ext-trained.onnx", "--external-data"],
         f"--out's data file '{tmp_path}/ext-trained.onnx.data' is the model's external "
         "data file"),
    ]
    for source, out, message in cases:
        err = _refused(capsys, source, checkpoint, "--out", *out)
        assert message in err and "an output never replaces an input" in err, err
    assert [p.read_bytes() for p in inputs] == before
    assert not (tmp_path / "ext-trained.onnx").exists()


def test_the_destination_is_checked_before_the_model_is_read(trained, tmp_path, monkeypatch,
                                                             capsys):
    def must_not_run(*args):
        raise AssertionError("the model was read before the destination was checked")

    monkeypatch.setattr(export_onnx, "load_model", must_not_run)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cases = [(blocker / "t.onnx", f"cannot write '{blocker}/t.onnx': '{blocker}' is not a "
                                  "directory"),
             (tmp_path, f"--out '{tmp_path}' is a directory, not a file to write")]
    if os.geteuid() != 0:  # root writes into read-only folders
        read_only = tmp_path / "read-only"
        read_only.mkdir(mode=0o555)
        cases.append((read_only / "t.onnx", f"cannot write '{read_only}/t.onnx': Permission "
                                            "denied"))
    for out, message in cases:
        err = _refused(capsys, trained["model"], trained["checkpoint"], "--out", out)
        assert err.strip() == f"export_onnx: error: {message}", err
    # With external data, the data file's destination too.
    (tmp_path / "t.onnx.data").mkdir()
    err = _refused(capsys, trained["model"], trained["checkpoint"], "--out", tmp_path / "t.onnx",
                   "--external-data")
    assert f"--out's data file '{tmp_path}/t.onnx.data' is a directory" in err, err


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_export_leaves_the_old_model_and_data_whole(trained, tmp_path, monkeypatch,
                                                             capsys, failing):
    # The model fails after its data file was written (flushing it to disk),
    # or after the data file was renamed into place (renaming the model).
    out = tmp_path / "t.onnx"
    args = [str(trained["model"]), str(trained["checkpoint"]), "--out", str(out),
            "--external-data"]
    assert export_onnx.main(args) == 0
    old = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert sorted(old) == ["t.onnx", "t.onnx.data"]

    def doubled(arrays):
        arrays[Q] = arrays[Q] * 2  # other weights: another data file
    args[1] = str(_edited_checkpoint(trained, doubled))
    monkeypatch.setattr(os, failing, failing_on_call(getattr(os, failing), 2))
    assert export_onnx.main(args) == 1
    # The target named, not the temporary the failed call was given.
    assert f"export_onnx: error: cannot write {out}: No space left on device" in \
        capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == old  # no temporaries either


def _meta(key, value):
    def edit(arrays):
        arrays[key] = value
    return edit


@pytest.mark.parametrize("edit,message", [
    (_meta("meta/format_version", np.float64(1)),
     r"meta/format_version must be one int64 value, not float64 of shape \[\]"),
    (_meta("meta/step", np.array([3, 4], np.int64)),
     r"meta/step must be one int64 value, not int64 of shape \[2\]"),
    (_meta("meta/step", np.array("3")), r"meta/step must be one int64 value, not <U1"),
    (_meta("meta/step", np.int64(-1)), r"meta/step is -1, not a step count"),
    (_meta("meta/onnx_name/bert.pooler.dense.weight", np.array([-1, -2], np.int8)),
     r"meta/onnx_name/bert.pooler.dense.weight is not UTF-8 text"),
    (_meta("meta/transposed_copy/x", np.array([1.5], np.float32)),
     r"meta/transposed_copy/x must be a name as int8 bytes, not float32 of shape \[1\]"),
])
def test_damaged_checkpoint_metadata_is_refused(trained, edit, message, capsys):
    err = _refused(capsys, trained["model"], _edited_checkpoint(trained, edit), "--out",
                   trained["tmp"] / "damaged.onnx")
    assert re.search(message, err), err
    assert not (trained["tmp"] / "damaged.onnx").exists()


def test_files_that_are_no_checkpoint_are_refused(trained, tmp_path, capsys):
    one_array = tmp_path / "one.npy"
    np.save(one_array, np.zeros(3))
    half = tmp_path / "half.npz"
    half.write_bytes(trained["checkpoint"].read_bytes()[:5000])
    for checkpoint, message in [(one_array, r"one.npy: not a readable .npz \(one .npy array"),
                                (half, r"half.npz: not a readable .npz")]:
        err = _refused(capsys, trained["model"], checkpoint, "--out", tmp_path / "t.onnx")
        assert re.search(message, err), err
    assert not (tmp_path / "t.onnx").exists()
