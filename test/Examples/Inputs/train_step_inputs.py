"""Writes the inputs examples/capi/train_step.c makes up (makeInputs), as the
.npz pf-run reads: python train_step_inputs.py OUT.npz."""
import sys

import numpy as np

BATCH, SEQUENCE, IGNORE = 4, 8, -100
i = np.arange(BATCH * SEQUENCE, dtype=np.int64)
arrays = {
    "input_ids": (7 * i + 3) % 100,
    "token_type_ids": np.where(i % SEQUENCE < SEQUENCE // 2, 0, 1),
    "attention_mask": np.ones_like(i),
    "labels": np.where(i % 4 == 0, (5 * i + 1) % 100, IGNORE),
}
arrays = {k: v.astype(np.int64).reshape(BATCH, SEQUENCE) for k, v in arrays.items()}
arrays["step"] = np.array(1, dtype=np.int64)
arrays["lr"] = np.array(1e-3, dtype=np.float64)
np.savez(sys.argv[1], **arrays)
