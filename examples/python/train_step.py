"""pf from Python: import, schedule, train one step with K-FAC.

    pip install .                  # from the repository root (docs/python.md)
    python examples/python/train_step.py [MODEL.onnx]

What examples/capi/train_step.c does through the C API, with the pipefisher
package: imports a BERT-style masked-LM model (a tiny one is generated when
none is given) with batch 4 and sequence 8, schedules it on 2 pipeline
stages (1F1B, 4 micro-batches, K-FAC work in the bubbles), builds the
training step with K-FAC (the pf-training pipeline), compiles it and runs
one step on the C example's made-up tokens. The loss line is printed as
pf-run prints it, so that the C program, this script and

    pf-run MODEL.onnx --dim batch=4 --dim sequence=8 --training-step --kfac

on the same inputs can be compared line by line.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

import pipefisher as pf

BATCH, SEQUENCE, IGNORE = 4, 8, -100


def made_up_inputs() -> dict[str, np.ndarray]:
    """train_step.c's makeInputs: every fourth position is masked and predicted."""
    i = np.arange(BATCH * SEQUENCE, dtype=np.int64)
    arrays = {
        "input_ids": (7 * i + 3) % 100,
        "token_type_ids": np.where(i % SEQUENCE < SEQUENCE // 2, 0, 1),
        "attention_mask": np.ones_like(i),
        "labels": np.where(i % 4 == 0, (5 * i + 1) % 100, IGNORE),
    }
    inputs = {k: v.astype(np.int64).reshape(BATCH, SEQUENCE) for k, v in arrays.items()}
    inputs["step"] = np.int64(1)
    inputs["lr"] = np.float64(1e-3)
    return inputs


def main(argv: list[str]) -> int:
    if len(argv) > 2:
        print(f"usage: {argv[0]} [MODEL.onnx]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        if len(argv) == 2:
            model_path = Path(argv[1])
        else:  # python -m pipefisher.bert_onnx --config tiny --layers 2 --vocab 100
            model_path = Path(tmp, "model.onnx")
            pf.save_model(pf.make_bert_model("tiny", num_hidden_layers=2, vocab_size=100),
                          model_path)
        try:
            module = pf.import_onnx(model_path, dims={"batch": BATCH, "sequence": SEQUENCE})
        except pf.ONNXImportError as err:
            print(err.diagnostics, end="", file=sys.stderr)
            return 1

    # The schedule of the forward graph (a copy is scheduled; module stays as is).
    report = pf.schedule(module, schedule="1f1b", stages=2, microbatches=4)
    print(f"schedule: 1f1b on 2 stages, 4 micro-batches: step {report.pipeline_step_ms:.4f} ms, "
          f"utilization {100 * report.utilization_without_kfac:.1f}%"
          f" ({100 * report.utilization_with_kfac:.1f}% with K-FAC in the bubbles)")

    # The training step with K-FAC, compiled and run once.
    module.run_pipeline("pf-training{kfac=true}")
    step = pf.compile(module, num_threads=1)
    bias = step.parameter_arrays()["cls.predictions.bias"]
    before = float(bias.sum(dtype=np.float64))
    outputs = step.run(made_up_inputs(), outputs=["loss"])
    print(f"output loss: float32 scalar, sum {float(outputs['loss']):.6E}")
    # The step updated the weights it owns (bias is a view of them).
    print(f"cls.predictions.bias: sum {before:.6f} before the step, "
          f"{float(bias.sum(dtype=np.float64)):.6f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
