"""Masked-LM training in the interpreter: one record per step.

:class:`Trainer` builds the training step as ``pf-train`` does (the
``pf-training`` pipeline: masked-LM loss, gradients, optionally K-FAC, the
optimizer's in-place updates), compiles it once and runs it step by step;
:func:`train` iterates over a token corpus and yields a :class:`StepRecord`
(step, loss, lr, time) per step, so a notebook can plot the loss live::

    for record in pipefisher.train("bert.onnx", "corpus.npz", steps=50, kfac=True):
        print(record.step, record.loss)

Batches are masked as BERT (and pf-train) mask them: ``mask_prob`` of the
real tokens are predicted; of those 80% become [MASK], 10% a random word,
10% stay. The random numbers are NumPy's (seeded by ``seed`` and the step),
not pf-train's, so the two runs see different masks.
"""

from __future__ import annotations

import os
import time
from typing import Iterator, Mapping, NamedTuple

import numpy as np

from .compiler import Executable, Module, compile, import_onnx
from .errors import PFError

__all__ = ["StepRecord", "Trainer", "train", "mask_tokens", "load_corpus"]

# pipefisher.corpus's special ids: [PAD], [UNK], [CLS], [SEP], [MASK].
_DEFAULT_SPECIAL = (0, 1, 2, 3, 4)
_FIRST_WORD = 5
_IGNORE = -100


class StepRecord(NamedTuple):
    """One training step: its number (1-based), loss, learning rate, and the
    step's wall time in seconds (the run alone, without batch preparation)."""

    step: int
    loss: float
    lr: float
    time: float


def mask_tokens(tokens: np.ndarray, rng: np.random.Generator, vocab_size: int,
                special: tuple[int, int, int, int, int] = _DEFAULT_SPECIAL,
                mask_prob: float = 0.15) -> dict[str, np.ndarray]:
    """A masked-LM batch of ``tokens`` (int64 [batch, sequence]): input_ids,
    token_type_ids, attention_mask and labels (-100 where nothing is predicted)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    pad, _unk, cls, sep, mask = special
    ids = tokens.copy()
    labels = np.full_like(tokens, _IGNORE)
    predictable = (tokens != pad) & (tokens != cls) & (tokens != sep)
    chosen = predictable & (rng.random(tokens.shape) < mask_prob)
    labels[chosen] = tokens[chosen]
    r = rng.random(tokens.shape)
    ids[chosen & (r < 0.8)] = mask
    random_word = chosen & (r >= 0.8) & (r < 0.9)
    ids[random_word] = rng.integers(_FIRST_WORD, vocab_size, size=int(random_word.sum()))
    return {"input_ids": ids, "token_type_ids": np.zeros_like(tokens),
            "attention_mask": (tokens != pad).astype(np.int64), "labels": labels}


def load_corpus(path: str | os.PathLike) -> dict[str, np.ndarray | int]:
    """A corpus ``.npz`` of ``python -m pipefisher.corpus`` (pf-train's
    ``--corpus``): tokens [sequences, length] int64, vocab_size, special ids."""
    try:
        data = np.load(os.fspath(path))
    except (OSError, ValueError) as err:
        raise PFError(f"cannot read the corpus '{path}': {err}") from err
    with data:
        if "tokens" not in data or data["tokens"].ndim != 2:
            raise PFError(f"{path}: needs 'tokens', int64 [sequences, length]")
        tokens = np.asarray(data["tokens"], dtype=np.int64)
        vocab = int(data["vocab_size"]) if "vocab_size" in data else int(tokens.max()) + 1
        special = (tuple(int(x) for x in data["special"]) if "special" in data
                   else _DEFAULT_SPECIAL)
    if tokens.size == 0:
        raise PFError(f"{path}: the corpus holds no tokens")
    if tokens.min() < 0 or tokens.max() >= vocab:
        raise PFError(f"{path}: token ids must be in [0, vocab_size {vocab})")
    return {"tokens": tokens, "vocab_size": vocab, "special": special}


class Trainer:
    """The compiled training step of a masked-LM model and its learning-rate schedule.

    ``model`` is an ONNX path (imported with batch ``batch // micro_batches``
    and sequence ``seq_len``, as pf-train does) or a forward
    :class:`~pipefisher.Module` with those shapes. The step is built with
    ``pf-training{micro-batches=... optimizer=... kfac=...}`` plus
    ``options`` (more pf-training options, e.g. ``{"kfac-damping": 0.01}``).
    The learning rate warms up linearly over ``warmup`` steps to ``lr``, then
    decays linearly to 0 at ``steps`` (``lr_schedule="linear"``) or stays
    (``"constant"``), as pf-train's.
    """

    def __init__(self, model: "str | os.PathLike | Module", *, batch: int = 8,
                 seq_len: int | None = None, micro_batches: int = 1, kfac: bool = False,
                 optimizer: str = "adamw", lr: float = 1e-3, warmup: int = 10,
                 steps: int = 100, lr_schedule: str = "linear",
                 options: Mapping[str, object] | None = None, num_threads: int = 0) -> None:
        if batch < 1 or micro_batches < 1 or batch % micro_batches:
            raise ValueError(f"batch {batch} must be a positive multiple of micro_batches "
                             f"{micro_batches}")
        if lr <= 0 or warmup < 0 or steps < 1:
            raise ValueError("lr and steps must be positive, warmup not negative")
        if lr_schedule not in ("linear", "constant"):
            raise ValueError(f"lr_schedule must be 'linear' or 'constant', got {lr_schedule!r}")
        self.batch, self.micro_batches = batch, micro_batches
        self.lr, self.warmup, self.steps, self.lr_schedule = lr, warmup, steps, lr_schedule
        if isinstance(model, Module):
            module = model.clone()
        else:
            if seq_len is None:
                raise ValueError("seq_len is required to import an ONNX model")
            module = import_onnx(model, dims={"batch": batch // micro_batches,
                                              "sequence": seq_len})
        step_options = {"micro-batches": micro_batches, "optimizer": optimizer,
                        "kfac": "true" if kfac else "false"}
        for key, value in (options or {}).items():
            step_options[key] = str(value).lower() if isinstance(value, bool) else value
        if int(step_options.get("kfac-window", 0) or 0):
            raise PFError("kfac-window (the bubbles' K-FAC arithmetic) is not supported by "
                          "Trainer; use pf-train")
        self.pipeline = "pf-training{" + " ".join(f"{k}={v}" for k, v in step_options.items()) + "}"
        module.run_pipeline(self.pipeline)
        #: The training step's IR (pf IR after pf-training, before lowering).
        self.module = module
        #: The compiled step; its parameter_arrays() are the current weights.
        self.executable: Executable = compile(module, num_threads=num_threads)
        names = {spec.name for spec in self.executable.inputs}
        unknown = names - {"input_ids", "token_type_ids", "attention_mask", "labels", "lr",
                           "step"}
        if unknown:
            raise PFError(f"the training step takes inputs Trainer cannot fill: {sorted(unknown)}")
        self._input_names = names
        self.step_number = 0

    def lr_at(self, step: int) -> float:
        """The learning rate of ``step`` (1-based)."""
        if self.warmup > 0 and step <= self.warmup:
            return self.lr * step / self.warmup
        if self.lr_schedule == "constant" or self.steps <= self.warmup:
            return self.lr
        return self.lr * max(0.0, (self.steps - step + 1) / (self.steps - self.warmup))

    def step(self, batch: Mapping[str, np.ndarray]) -> StepRecord:
        """Runs the next step on ``batch`` (input_ids, attention_mask, labels,
        and token_type_ids when the model takes it) and returns its record."""
        self.step_number += 1
        step = self.step_number
        lr = self.lr_at(step)
        inputs = {name: batch[name] for name in ("input_ids", "token_type_ids",
                                                 "attention_mask", "labels")
                  if name in self._input_names}
        if "lr" in self._input_names:
            inputs["lr"] = np.float64(lr)
        if "step" in self._input_names:
            inputs["step"] = np.int64(step)
        start = time.perf_counter()
        outputs = self.executable.run(inputs, outputs=["loss"])
        seconds = time.perf_counter() - start
        loss = float(outputs["loss"])
        if not np.isfinite(loss):
            raise PFError(f"step {step}: the loss is {loss}; lower the learning rate")
        return StepRecord(step, loss, lr, seconds)

    def parameters(self) -> dict[str, np.ndarray]:
        """The current weights (and optimizer state) by name, as views."""
        return self.executable.parameter_arrays()


def train(model: "str | os.PathLike | Module", corpus: "str | os.PathLike | np.ndarray", *,
          steps: int = 100, batch: int = 8, seed: int = 0, mask_prob: float = 0.15,
          vocab_size: int | None = None, **trainer_options) -> Iterator[StepRecord]:
    """Trains ``model`` on ``corpus`` for ``steps`` steps, yielding one
    :class:`StepRecord` per step.

    ``corpus`` is a ``.npz`` of ``python -m pipefisher.corpus`` or an int64
    token array [sequences, length] (then ``vocab_size`` defaults to its
    largest id + 1 and the special ids are pipefisher.corpus's). Batches take
    the sequences in a seeded per-epoch order; ``trainer_options`` go to
    :class:`Trainer` (micro_batches, kfac, optimizer, lr, warmup, ...).
    """
    if isinstance(corpus, np.ndarray):
        tokens = np.asarray(corpus, dtype=np.int64)
        if tokens.ndim != 2 or tokens.size == 0:
            raise ValueError("a token corpus is an int64 array [sequences, length]")
        data = {"tokens": tokens, "vocab_size": vocab_size or int(tokens.max()) + 1,
                "special": _DEFAULT_SPECIAL}
    else:
        data = load_corpus(corpus)
        if vocab_size is not None:
            data["vocab_size"] = vocab_size
    tokens = data["tokens"]
    trainer = Trainer(model, batch=batch, seq_len=tokens.shape[1], steps=steps,
                      **trainer_options)
    rows = tokens.shape[0]
    per_epoch = max(1, rows // batch)
    order = None
    for step in range(1, steps + 1):
        epoch, slot = divmod(step - 1, per_epoch)
        if slot == 0 or order is None:
            order = np.random.default_rng([seed, epoch]).permutation(rows)
        picked = order[(slot * batch + np.arange(batch)) % rows]
        rng = np.random.default_rng([seed, epoch, step])
        masked = mask_tokens(tokens[picked], rng, int(data["vocab_size"]), data["special"],
                             mask_prob)
        yield trainer.step(masked)
