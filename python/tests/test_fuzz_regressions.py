"""The text corpus builder's fuzz target (fuzz/corpus_text_fuzzer.py): its
regression inputs (test/Fuzz/Regressions/corpustext, as pf-fuzz-replay
replays the C++ targets' in test/Fuzz), its seeds and a short seeded run of
its mutations, each through the target's check of `corpus --text`; and that
the check does catch what it is there to catch."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("tokenizers", exc_type=ImportError)  # absent, or broken

ROOT = Path(os.environ["PF_SOURCE_DIR"])
REGRESSIONS = ROOT / "test" / "Fuzz" / "Regressions" / "corpustext"


def _load_fuzzer():
    spec = importlib.util.spec_from_file_location(
        "corpus_text_fuzzer", ROOT / "fuzz" / "corpus_text_fuzzer.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fuzzer = _load_fuzzer()
INPUTS = sorted(p for p in REGRESSIONS.iterdir() if p.is_file() and p.name != "README.md")


def test_there_are_regression_inputs():
    assert INPUTS, f"nothing to replay in {REGRESSIONS}"


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_regression_input(path):
    fuzzer.check_input(path.read_bytes())


def test_seeds():
    for name, data in fuzzer.seeds().items():
        fuzzer.check_input(data)


def test_seeded_mutations(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a finding's input would be written
    assert fuzzer.random_mutations(100, seed=0) == 0


def test_the_check_reports_what_it_should(monkeypatch):
    from pipefisher import corpus

    data = fuzzer.seeds()["wordpiece"]

    def two_lines(argv):
        print("corpus: error: one\nanother", file=sys.stderr)
        return 1

    monkeypatch.setattr(corpus, "main", two_lines)
    with pytest.raises(fuzzer.Finding):
        fuzzer.check_input(data)

    def traceback(argv):
        raise IndexError("a bug")

    monkeypatch.setattr(corpus, "main", traceback)
    with pytest.raises(IndexError):
        fuzzer.check_input(data)

    def exit_3(argv):
        sys.exit(3)

    monkeypatch.setattr(corpus, "main", exit_3)
    with pytest.raises(fuzzer.Finding):
        fuzzer.check_input(data)
