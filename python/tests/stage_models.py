"""What the stage-function tests share (test_stage_split, test_stage_executor,
test_rank_executor): small BERTs imported as one-micro-batch training steps,
their inputs, and reading .npz outputs."""

from __future__ import annotations

import numpy as np

from pipefisher.tools import run_tool

BATCH, SEQ, VOCAB = 2, 8, 100
TIED = "grad/bert.embeddings.word_embeddings.weight"


def import_step(tmp_path, layers):
    """Imports a BERT with `layers` blocks (micro-batch BATCH x SEQ); returns
    (forward IR, unsplit step, step tagged for pf-split-stages)."""
    from pipefisher import make_bert_model, save_model

    onnx_path = tmp_path / f"bert{layers}.onnx"
    save_model(make_bert_model("tiny", seed=3, vocab_size=VOCAB, num_hidden_layers=layers),
               onnx_path)
    ir = tmp_path / f"bert{layers}.mlir"
    run_tool("pf-translate", "--import-onnx", str(onnx_path), "--dim", f"batch={BATCH}",
             "--dim", f"sequence={SEQ}", "-o", str(ir))
    plain = tmp_path / f"step{layers}.mlir"
    tagged = tmp_path / f"step{layers}_tagged.mlir"
    run_tool("pf-opt", str(ir), "--pf-add-masked-lm-loss", "--pf-build-gradients", "-o", str(plain))
    run_tool("pf-opt", str(ir), "--pf-add-masked-lm-loss",
             "--pf-build-gradients=tag-origin=true", "-o", str(tagged))
    return ir, plain, tagged


def stage_inputs(rows=BATCH, seed=7):
    """Graph inputs and labels for `rows` sequences (micro-batches of BATCH):
    padding in every other row, 40% of the labels ignored, and at least one
    counted token in every micro-batch."""
    rng = np.random.default_rng(seed)
    mask = np.ones((rows, SEQ), np.int64)
    mask[1::2, SEQ - 3:] = 0
    labels = rng.integers(0, VOCAB, size=(rows, SEQ)).astype(np.int64)
    labels[rng.random((rows, SEQ)) < 0.4] = -100  # tokens that do not count
    labels[::BATCH, 0] = 5  # every micro-batch counts a token
    return {
        "input_ids": rng.integers(0, VOCAB, size=(rows, SEQ)).astype(np.int64),
        "token_type_ids": rng.integers(0, 2, size=(rows, SEQ)).astype(np.int64),
        "attention_mask": mask,
        "labels": labels,
    }


def load_npz(path):
    with np.load(path) as out:
        return {k: out[k] for k in out.files}
