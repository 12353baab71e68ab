"""What the K-FAC layer-kind tests share: a two-block BERT-tiny with a
50-word vocabulary and one labelled batch, and one K-FAC training step of it
through pf-run (no KL-clip, no grafting, no gradient clipping, damping 1e-3,
so the outputs are the preconditioned raw gradients a NumPy reference
rebuilds)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipefisher.tools import run_tool


def make_tiny_bert(tmp: Path) -> Path:
    """Writes m.onnx and in.npz (batch 2 x 8, every third position labelled)
    under `tmp`."""
    from pipefisher import make_bert_model, save_model
    from pipefisher.sample_inputs import make_inputs

    save_model(make_bert_model("tiny", vocab_size=50, num_hidden_layers=2, seed=3),
               tmp / "m.onnx")
    inputs = make_inputs(2, 8, vocab=50)
    labels = np.where(np.arange(8) % 3 == 0, inputs["input_ids"], -100).astype(np.int64)
    np.savez(tmp / "in.npz", **inputs, labels=labels, lr=np.float64(1e-3), step=np.int64(1))
    return tmp


def kfac_bert_step(bert: Path, name: str, *args: str) -> dict:
    """One K-FAC step of make_tiny_bert's model with `args` added; its
    outputs as NumPy arrays."""
    out = bert / f"{name}.npz"
    run_tool("pf-run", str(bert / "m.onnx"), "--dim", "batch=2", "--dim", "sequence=8",
             "--training-step", "--kfac", "--kfac-kl-clip", "0", "--kfac-graft", "none",
             "--clip-norm", "0", "--kfac-damping", "1e-3", *args, "--inputs",
             str(bert / "in.npz"), "--outputs", str(out))
    return dict(np.load(out))
