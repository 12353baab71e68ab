"""`python3 -m pipefisher.corpus` without --text: the generated corpus stays
the default (demo, tests), now written atomically like the --text one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from pipefisher.corpus import SPECIAL, make_corpus

PYTHON_DIR = Path(__file__).resolve().parents[1]


def _cli(*args) -> subprocess.CompletedProcess:
    env = ({**os.environ} if os.environ.get("PF_TEST_INSTALLED") == "1"  # the installed package
           else {**os.environ, "PYTHONPATH": str(PYTHON_DIR)})
    return subprocess.run([sys.executable, "-m", "pipefisher.corpus", *map(str, args)],
                          capture_output=True, text=True, env=env)


def test_generated_corpus_is_the_default(tmp_path):
    out = tmp_path / "data" / "corpus.npz"  # the folder is made
    proc = _cli("--out", out, "--sequences", 30, "--seq-len", 16, "--seed", 4)
    assert proc.returncode == 0, proc.stderr
    data = np.load(out)
    expected = make_corpus(30, 16, seed=4)
    np.testing.assert_array_equal(data["tokens"], expected["tokens"])
    assert data["special"].tolist() == [0, 1, 2, 3, 4]
    assert int(data["vocab_size"]) == len(expected["vocab"])
    vocab = Path(f"{out}.vocab.txt").read_text().split("\n")[:-1]
    assert vocab == expected["vocab"] and vocab[:5] == SPECIAL
    assert proc.stdout.startswith(f"wrote {out}: 30 sequences x 16, vocab {len(vocab)}")
    assert sorted(p.name for p in out.parent.iterdir()) == ["corpus.npz", "corpus.npz.vocab.txt"]


def test_generated_corpus_argument_errors(tmp_path):
    proc = _cli("--out", tmp_path / "c.npz", "--sequences", 0)
    assert proc.returncode == 2 and "--sequences must be positive" in proc.stderr
    proc = _cli("--out", tmp_path / "c.npz", "--seq-len", 4)
    assert proc.returncode == 2 and "seq_len must be at least 8" in proc.stderr
    proc = _cli("--out", tmp_path / "c.npz", "--vocab", tmp_path / "v.txt")
    assert proc.returncode == 2 and "--vocab and --train-vocab go with --text" in proc.stderr
    assert not list(tmp_path.iterdir())
