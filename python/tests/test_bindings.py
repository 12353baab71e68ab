"""The compiler in the interpreter (pipefisher._core over pf's C API): import,
IR, pass pipelines, compile and run, against ONNX Runtime and the tools, and
the exceptions a user gets for bad input."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import bindings_support  # noqa: F401  (skips without the extension)
import pipefisher as pf
from pipefisher import make_bert_model, save_model
from pipefisher.tools import run_tool

BATCH, SEQ = 2, 16


def _inputs(vocab: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = np.ones((BATCH, SEQ), np.int64)
    mask[1, SEQ * 3 // 4:] = 0  # padding in the second sequence
    return {
        "input_ids": rng.integers(0, vocab, size=(BATCH, SEQ)).astype(np.int64),
        "token_type_ids": rng.integers(0, 2, size=(BATCH, SEQ)).astype(np.int64),
        "attention_mask": mask,
    }


def _ort_logits(path, inputs):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(["logits"], inputs)[0]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("bind") / "tiny.onnx"
    save_model(make_bert_model("tiny", vocab_size=1000, seed=3), path)
    return path


@pytest.fixture(scope="module")
def tiny_module(tiny):
    return pf.import_onnx(tiny, dims={"batch": BATCH, "sequence": SEQ})


@pytest.mark.parametrize("config,style,gelu,vocab", [
    ("tiny", "transpose", "erf", 30522),
    ("tiny", "pytorch", "tanh", 1000),
    ("mini", "transpose", "erf", 1000),
])
def test_forward_matches_onnxruntime(tmp_path, config, style, gelu, vocab):
    path = tmp_path / f"{config}.onnx"
    save_model(make_bert_model(config, seed=1, style=style, gelu=gelu, vocab_size=vocab), path)
    inputs = _inputs(vocab)
    exe = pf.compile(pf.import_onnx(path, dims={"batch": BATCH, "sequence": SEQ}))
    got = exe.run(inputs)
    assert set(got) == {"logits"}
    expected = _ort_logits(path, inputs)
    assert got["logits"].shape == expected.shape == (BATCH, SEQ, vocab)
    assert got["logits"].dtype == np.float32
    assert np.abs(got["logits"] - expected).max() < 1e-4
    assert np.std(got["logits"]) > 1e-3  # a real signal, not zeros


def test_forward_equals_pf_run(tmp_path, tiny, tiny_module):
    """The bindings and pf-run run the same compiler: the same numbers."""
    inputs = _inputs(1000, seed=5)
    np.savez(tmp_path / "in.npz", **inputs)
    run_tool("pf-run", str(tiny), "--dim", f"batch={BATCH}", "--dim", f"sequence={SEQ}",
             "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"))
    expected = np.load(tmp_path / "out.npz")["logits"]
    got = pf.compile(tiny_module).run(inputs)["logits"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_module_text_is_the_importers(tiny, tiny_module):
    """str(module) is the IR pf-translate prints (equal once both are parsed and
    printed), and it parses back into an equal module."""
    text = run_tool("pf-translate", "--import-onnx", str(tiny), "--dim", f"batch={BATCH}",
                    "--dim", f"sequence={SEQ}").stdout
    ir = str(tiny_module)
    assert ir.startswith("module attributes {")
    assert "pf.param @bert.embeddings.word_embeddings.weight" in ir
    assert str(pf.parse_module(text)) == ir
    assert str(pf.parse_module(ir)) == ir
    elided = tiny_module.to_string(elide_weights=True)
    assert len(elided) < len(ir) // 10 and "pf.param" in elided


def test_import_options(tiny):
    shapes_only = pf.import_onnx(tiny, dims={"batch": 4, "sequence": 8}, weights=False)
    assert "tensor<4x8xi64>" in str(shapes_only)
    assert "dense_resource" not in str(shapes_only)
    by_shape = pf.import_onnx(tiny, shapes={"input_ids": (4, 8), "token_type_ids": (4, 8),
                                            "attention_mask": (4, 8)})
    assert "tensor<4x8xi64>" in by_shape.to_string(elide_weights=True)
    raw = pf.import_onnx(tiny, dims={"batch": 4, "sequence": 8}, graph_passes=False)
    fused = pf.import_onnx(tiny, dims={"batch": 4, "sequence": 8})
    assert "pf.layer_norm" not in raw.to_string(elide_weights=True)
    assert "pf.layer_norm" in fused.to_string(elide_weights=True)


def test_run_pipeline_applies_and_returns_the_module(tiny_module):
    step = tiny_module.clone()
    assert step.run_pipeline("pf-training{kfac=true micro-batches=2}") is step
    text = step.to_string(elide_weights=True)
    assert "pf.kfac" in text and "tensor<f32>" in text
    # the original is untouched
    assert "pf.kfac" not in tiny_module.to_string(elide_weights=True)
    assert step.verify()
    # MLIR's own passes and the builtin.module(...) form work too
    tiny_module.clone().run_pipeline("builtin.module(canonicalize,cse)")


def test_pipeline_errors_carry_the_diagnostics(tiny_module):
    with pytest.raises(pf.PipelineError) as err:
        tiny_module.clone().run_pipeline("pf-training{microbatches=4}")
    assert "no such option microbatches" in err.value.diagnostics
    assert "no such option microbatches" in str(err.value)
    with pytest.raises(pf.PipelineError) as err:
        tiny_module.clone().run_pipeline("pf-no-such-pass")
    assert "pf-no-such-pass" in err.value.diagnostics
    # A pass that fails: more stages than the model has encoder blocks.
    with pytest.raises(pf.PipelineError) as err:
        tiny_module.clone().run_pipeline("pf-pipeline{stages=64 microbatches=4}")
    assert "error:" in err.value.diagnostics and "64" in err.value.diagnostics
    with pytest.raises(ValueError):
        tiny_module.run_pipeline("")


def test_import_errors_name_the_file(tmp_path):
    with pytest.raises(pf.ONNXImportError) as err:
        pf.import_onnx(tmp_path / "missing.onnx")
    assert "missing.onnx" in err.value.diagnostics and "No such file" in err.value.diagnostics
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage that is not a model")
    with pytest.raises(pf.ONNXImportError) as err:
        pf.import_onnx(bad)
    assert "bad.onnx" in str(err.value)
    with pytest.raises(pf.ONNXImportError) as err:
        pf.import_onnx(tmp_path / "x.onnx", dims={"batch": -1})
    with pytest.raises(pf.ParseError):
        pf.parse_module("this is not MLIR")


def test_compile_errors(tiny):
    no_weights = pf.import_onnx(tiny, dims={"batch": 2, "sequence": 4}, weights=False)
    with pytest.raises(pf.CompileError) as err:
        pf.compile(no_weights)
    assert err.value.diagnostics
    dynamic = pf.import_onnx(tiny, allow_dynamic=True)
    with pytest.raises(pf.CompileError):
        pf.compile(dynamic)
    with pytest.raises(TypeError):
        pf.compile("not a module")


def test_run_checks_inputs_and_avoids_copies(tiny_module):
    exe = pf.compile(tiny_module, num_threads=1)
    assert [s.name for s in exe.inputs] == ["input_ids", "token_type_ids", "attention_mask"]
    assert exe.inputs[0].dtype == np.int64 and exe.inputs[0].shape == (BATCH, SEQ)
    assert exe.outputs[0] == ("logits", np.dtype(np.float32), (BATCH, SEQ, 1000))
    inputs = _inputs(1000)
    reference = exe.run(inputs)["logits"]
    assert exe.last_copied == []  # C-contiguous int64: read in place
    # Other layouts and same-kind dtypes are converted, and say so.
    converted = {"input_ids": inputs["input_ids"].astype(np.int32),
                 "token_type_ids": np.asfortranarray(inputs["token_type_ids"]),
                 "attention_mask": inputs["attention_mask"].tolist()}
    np.testing.assert_array_equal(exe(converted)["logits"], reference)
    assert sorted(exe.last_copied) == ["attention_mask", "input_ids", "token_type_ids"]
    with pytest.raises(pf.RunError, match="missing input.*attention_mask"):
        exe.run({k: v for k, v in inputs.items() if k != "attention_mask"})
    with pytest.raises(pf.RunError, match="unknown input.*extra"):
        exe.run({**inputs, "extra": np.zeros(1)})
    with pytest.raises(pf.RunError, match="shape"):
        exe.run({**inputs, "input_ids": np.zeros((BATCH, SEQ + 1), np.int64)})
    with pytest.raises(pf.RunError, match="dtype"):
        exe.run({**inputs, "input_ids": np.zeros((BATCH, SEQ), np.float32)})
    with pytest.raises(pf.RunError, match="unknown output"):
        exe.run(inputs, outputs=["nope"])
    # A run does not depend on earlier ones.
    np.testing.assert_array_equal(exe.run(inputs)["logits"], reference)


def test_executable_outlives_its_module(tiny):
    exe = pf.compile(pf.import_onnx(tiny, dims={"batch": BATCH, "sequence": SEQ}))
    import gc
    gc.collect()  # the module is gone; its context lives on in the executable
    assert np.isfinite(exe.run(_inputs(1000))["logits"]).all()
    params = exe.parameter_arrays()
    assert params["bert.embeddings.word_embeddings.weight"].shape == (1000, 128)


def test_threads_share_modules_and_executables(tiny_module):
    """Calls release the GIL; the extension serializes what must not run at
    once (runs of one executable, changes to one context's modules), so
    threads get the serial results."""
    from concurrent.futures import ThreadPoolExecutor
    exe = pf.compile(tiny_module, num_threads=1)
    seeds = list(range(8))
    serial = [exe.run(_inputs(1000, seed))["logits"] for seed in seeds]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda seed: exe.run(_inputs(1000, seed))["logits"], seeds))
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a, b)

    def build_step(_):
        step = tiny_module.clone().run_pipeline("pf-training{micro-batches=2}")
        return step.to_string(elide_weights=True)

    with ThreadPoolExecutor(4) as pool:
        texts = list(pool.map(build_step, range(4)))
    assert len(set(texts)) == 1
    assert 'pf.name = "loss"' in texts[0]


def test_type_stubs_match_the_extension():
    """pipefisher/_core.pyi declares what pipefisher._core defines, no more, no less."""
    import ast
    import inspect
    from pathlib import Path

    from pipefisher import _core
    stub = ast.parse(Path(_core.__file__).with_name("_core.pyi").read_text())
    declared = {}
    for node in stub.body:
        if isinstance(node, ast.ClassDef):
            declared[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            declared[node.name] = None
    defined = {name for name in dir(_core) if not name.startswith("_")}
    assert set(declared) == defined
    for name, members in declared.items():
        if members is None:
            assert callable(getattr(_core, name))
            continue
        cls = getattr(_core, name)
        public = {m for m in dir(cls) if not m.startswith("_")}
        assert members == public, name
    # the Python layer's public functions are documented
    for obj in (pf.import_onnx, pf.compile, pf.parse_module, pf.schedule, pf.train, pf.Trainer,
                pf.Module.run_pipeline, pf.Executable.run, pf.Report.svg):
        assert inspect.getdoc(obj), obj
