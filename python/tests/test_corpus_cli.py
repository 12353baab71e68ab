"""`python3 -m pipefisher.corpus` without --text: the generated corpus stays
the default (demo, tests), now written atomically like the --text one. And
the command's file handling (issue 39): no output over an input, the
destination checked before the work, the .npz and its vocabulary replaced
as a pair, sizes bounded, a vocabulary's byte-order mark dropped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipefisher import corpus as corpus_cli
from pipefisher.corpus import SPECIAL, make_corpus
from failure_support import failing_on_call

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


# Issue 39: nothing the user made is lost, a bad destination fails first.

def _one_line_error(proc, status=1) -> str:
    assert proc.returncode == status, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [l for l in proc.stderr.splitlines() if "error:" in l]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def _text_and_vocab(tmp_path):
    pytest.importorskip("tokenizers", exc_type=ImportError)
    text = tmp_path / "story.txt"
    text.write_text("the cat sees a dog .\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + ["the", "a", "cat", "dog", "sees", "."]) + "\n")
    return text, vocab


def test_an_output_never_replaces_an_input(tmp_path):
    text, vocab = _text_and_vocab(tmp_path)
    (tmp_path / "link.txt").symlink_to(vocab.name)
    (tmp_path / "sub").mkdir()
    (tmp_path / "mine.npz.vocab.txt").write_bytes(vocab.read_bytes())
    before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    cases = [  # (--out, --vocab, the error's words)
        (text, vocab, f"--out '{text}' is the --text file '{text}'"),
        (tmp_path / "link.txt", vocab, f"--out '{tmp_path}/link.txt' is the --vocab file "),
        (tmp_path / "sub" / ".." / "vocab.txt", vocab, "is the --vocab file"),
        # The vocabulary written beside --out would replace --vocab: a corpus
        # rebuilt from its own vocabulary needs another --out.
        (tmp_path / "mine.npz", tmp_path / "mine.npz.vocab.txt",
         f"--out's vocabulary '{tmp_path}/mine.npz.vocab.txt' is the --vocab file"),
    ]
    for out, vocab_file, message in cases:
        error = _one_line_error(_cli("--text", text, "--vocab", vocab_file, "--out", out,
                                     "--seq-len", 8))
        assert message in error and "an output never replaces an input" in error, error
    assert {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def _must_not_run(*args, **kwargs):
    raise AssertionError("the corpus was built before the destination was checked")


def test_the_destination_is_checked_before_the_corpus_is_built(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(corpus_cli, "make_corpus", _must_not_run)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cases = [(blocker / "sub" / "c.npz", f"cannot write '{blocker}/sub/c.npz': '{blocker}' is "
                                         "not a directory"),
             (tmp_path, f"--out '{tmp_path}' is a directory, not a file to write")]
    if os.geteuid() != 0:  # root writes into read-only folders
        read_only = tmp_path / "read-only"
        read_only.mkdir(mode=0o555)
        cases.append((read_only / "c.npz", f"cannot write '{read_only}/c.npz': Permission denied"))
    for out, message in cases:
        assert corpus_cli.main(["--out", str(out), "--sequences", "4", "--seq-len", "8"]) == 1
        err = capsys.readouterr().err
        assert err.strip() == f"corpus: error: {message}", err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"] + (
        ["read-only"] if os.geteuid() != 0 else [])  # no probe files left


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_write_leaves_the_old_pair_whole(tmp_path, monkeypatch, capsys, failing):
    # The second file of the pair fails: flushed to disk (the vocabulary's
    # was fine), or renamed (the vocabulary was already renamed into place).
    out = tmp_path / "c.npz"
    out.write_bytes(b"an old corpus")
    Path(f"{out}.vocab.txt").write_text("its vocabulary\n")  # the generator's words differ
    old = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    monkeypatch.setattr(os, failing, failing_on_call(getattr(os, failing), 2))
    assert corpus_cli.main(["--out", str(out), "--sequences", "9", "--seq-len", "12",
                            "--seed", "3"]) == 1
    # The target named, not the temporary the failed call was given.
    assert f"corpus: error: cannot write {out}: No space left on device" in \
        capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == old  # no temporaries either
    # Without an old pair, none is left half made.
    fresh = tmp_path / "fresh.npz"
    monkeypatch.setattr(os, failing, failing_on_call(getattr(os, failing), 2))
    assert corpus_cli.main(["--out", str(fresh), "--sequences", "9", "--seq-len", "12"]) == 1
    assert {p.name for p in tmp_path.iterdir()} == set(old)


def test_sizes_out_of_bounds_are_one_line_errors(tmp_path):
    out = tmp_path / "c.npz"
    for args, status, message in [
        (["--seq-len", 10**12], 2, "seq_len must be at most 65536"),  # was a MemoryError
        (["--seq-len", -8], 2, "seq_len must be at least 8"),
        (["--sequences", 10**15], 2, "--sequences must be at most 16777216"),
        (["--sequences", -1], 2, "--sequences must be positive"),
        (["--seed", -1, "--sequences", 3], 2, "--seed must be non-negative"),
    ]:
        assert message in _one_line_error(_cli("--out", out, *args), status)
    text, vocab = _text_and_vocab(tmp_path)
    for args, message in [
        (["--vocab", vocab, "--seq-len", 10**12], "--seq-len 1000000000000: at most 65536"),
        (["--vocab", vocab, "--seq-len", -3], "--seq-len -3: a sequence needs"),
        (["--train-vocab", 10**30], f"--train-vocab {10**30}: at most 4194304 tokens"),
        (["--train-vocab", 0], "--train-vocab 0: at least 64 tokens"),
        (["--train-vocab", 100, "--seq-len", 0], "--seq-len 0: a sequence needs"),
    ]:
        assert message in _one_line_error(_cli("--text", text, "--out", out, *args))
    assert not out.exists()


def test_a_vocabulary_with_a_byte_order_mark(tmp_path):
    # Windows editors begin UTF-8 files with U+FEFF: it is no part of [PAD].
    text, vocab = _text_and_vocab(tmp_path)
    tokens = vocab.read_text().splitlines()
    vocab.write_bytes(b"\xef\xbb\xbf" + vocab.read_bytes())
    out = tmp_path / "c.npz"
    proc = _cli("--text", text, "--vocab", vocab, "--out", out, "--seq-len", 8)
    assert proc.returncode == 0, proc.stderr
    written = Path(f"{out}.vocab.txt").read_bytes()
    assert written.startswith(b"[PAD]\n") and written.decode().splitlines() == tokens
    data = np.load(out)
    assert data["special"].tolist() == [0, 1, 2, 3, 4]
    ids = {t: i for i, t in enumerate(tokens)}
    assert data["tokens"].tolist() == [[ids[t] for t in
                                        ["[CLS]", "the", "cat", "sees", "a", "dog", ".", "[SEP]"]]]
