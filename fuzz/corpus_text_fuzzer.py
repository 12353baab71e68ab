#!/usr/bin/env python3
"""Fuzz target of the text corpus builder, `python3 -m pipefisher.corpus
--text FILE [--vocab V | --train-vocab N]` (python/pipefisher/corpus.py and
text_corpus.py), run in-process through corpus.main(argv).

    python3 fuzz/corpus_text_fuzzer.py [libFuzzer flags] [CORPUS_DIR...]
        coverage-guided, with atheris (./scripts/setup.sh --fuzz installs it),
        e.g. -max_total_time=600 -artifact_prefix=DIR/ CORPUS_DIR
    python3 fuzz/corpus_text_fuzzer.py --mutate N [--seed S]
        N seeded random mutations of the seeds, no atheris needed
    python3 fuzz/corpus_text_fuzzer.py --replay PATH...
        each file (or each file in each directory) once: how pytest replays
        test/Fuzz/Regressions/corpustext (python/tests/test_fuzz_regressions.py)
    python3 fuzz/corpus_text_fuzzer.py --seeds OUT_DIR
        writes the seed inputs (scripts/fuzz-seeds.py's corpustext/)

An input is the builder's arguments and files:
    byte 0   flags: 1 --train-vocab (not --vocab), 2 --no-lowercase,
             4 --split-sentences, 8 a second text file
    byte 1   --seq-len, the byte - 4 (values the builder refuses too)
    byte 2   --train-vocab, the byte * 4 (below its smallest too)
    rest     the vocabulary file's bytes, SEPARATOR, the text file's bytes
             (and with flag 8, SEPARATOR and the second text file's)
Every outcome but three is a finding (an exception, which atheris reports
with its input): exit 0 with a corpus pf-train can read (tokens int64
[rows, seq_len] in [0, vocab_size), rows [CLS] ... [SEP] then [PAD], the
special ids those of the special tokens) and an OUT.vocab.txt that reads
back (read_vocab) as vocab_size tokens; exit 1 with one
line "corpus: error: ..." on stderr; argparse's usage error (SystemExit 2)
for an argument it refuses.
"""
from __future__ import annotations

import contextlib
import io
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SEPARATOR = b"\n\0\n"
TRAIN_VOCAB, NO_LOWERCASE, SPLIT_SENTENCES, TWO_TEXTS = 1, 2, 4, 8


class Finding(AssertionError):
    """The builder did what no input may make it do."""


def encode(vocab: bytes, texts: list[bytes], seq_len: int, flags: int = 0,
           train_vocab: int = 64) -> bytes:
    """An input of this target (the layout in the module's doc)."""
    if len(texts) > 1:
        flags |= TWO_TEXTS
    return (bytes([flags & 0xff, (seq_len + 4) & 0xff, (train_vocab // 4) & 0xff]) + vocab +
            b"".join(SEPARATOR + t for t in texts[:2]))


def decode(data: bytes) -> dict:
    header, rest = data[:3].ljust(3, b"\0"), data[3:]
    flags = header[0]
    parts = rest.split(SEPARATOR)
    vocab = parts[0]
    texts = parts[1:3] if flags & TWO_TEXTS else parts[1:2]
    if not texts:
        texts = [b""]
    return {"flags": flags, "seq_len": header[1] - 4, "train_vocab": header[2] * 4,
            "vocab": vocab, "texts": texts}


# The seeds: the vocabularies and texts of python/tests/test_user_corpus.py
# and test_corpus_cli.py, and the cases of their error tests.
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
BERT_LAYOUT_VOCAB = (["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                      ".", ",", "!", "?", "the", "a", "cat", "dog", "bird", "run", "see",
                      "quick", "slow", "cafe", "un", "happy", "big", "red", "river", "tree",
                      "ball", "##s", "##ly", "##able", "##er", "##est"])
SMALL_VOCAB = SPECIAL + ["the", "a", "cat", "dog", "sees", "."]


def _lines(tokens: list[str]) -> bytes:
    return ("\n".join(tokens) + "\n").encode()


def seeds() -> dict[str, bytes]:
    bert, small = _lines(BERT_LAYOUT_VOCAB), _lines(SMALL_VOCAB)
    packing = (b"the cat .\nthe dog .\na bird .\nthe big red ball .\n\n\na tree .\n")
    long = (" ".join(["the", "big", "red", "ball"] * 3 + ["."]) + "\nthe cat .\na dog .\n")
    return {
        "wordpiece": encode(bert, [b"The quick cats run quickly, unable unhappy Zebras!\n"], 16),
        "cafe-cased": encode(bert, ["The Caf\u00e9\n".encode()], 8, NO_LOWERCASE),
        "packing-two-files": encode(bert, [packing, b"the river .\n"], 8),
        "long-sentence-cut": encode(bert, [long.encode()], 8),
        "split-sentences": encode(bert, [b"the cat run . a dog run . the bird run .\n"], 12,
                                  SPLIT_SENTENCES),
        "small-vocab-bom": encode(b"\xef\xbb\xbf" + small, [b"the cat sees a dog .\n" * 3], 16),
        "cjk-and-controls": encode(bert, ["the \u4e2d\u6587 cat\x07 .\r\n\u00a0\n".encode()],
                                   8),
        "train-vocab": encode(b"", [b"the cat sees the dog . a dog sees a cat .\n" * 8], 16,
                              TRAIN_VOCAB, 64),
        "train-vocab-split": encode(b"", [b"one two. three four! five?\n\nsix seven.\n" * 4],
                                    8, TRAIN_VOCAB | SPLIT_SENTENCES | NO_LOWERCASE, 100),
        "missing-mask": encode(_lines([t for t in BERT_LAYOUT_VOCAB if t != "[MASK]"]),
                               [b"the cat .\n"], 8),
        "duplicate-token": encode(b"[PAD]\ncat\ncat\n", [b"the cat .\n"], 8),
        "not-utf8": encode(bert, ["the cat .\nthe caf\xe9\n".encode("latin-1")], 8),
        "blank-text": encode(bert, [b"\n  \n\n"], 8),
        "seq-len-2": encode(bert, [b"the cat .\n"], 2),
        "only-specials": encode(_lines(SPECIAL), [b"the cat .\n"], 8),
    }


# --------------------------------------------------------------------------
# One input


_scratch: Path | None = None


def _scratch_dir() -> Path:
    global _scratch
    if _scratch is None:
        import atexit
        import shutil

        _scratch = Path(tempfile.mkdtemp(prefix="pf-corpus-fuzz-"))
        atexit.register(shutil.rmtree, _scratch, ignore_errors=True)
    return _scratch


def _argv(case: dict, scratch: Path) -> list[str]:
    texts = []
    for i, text in enumerate(case["texts"]):
        path = scratch / f"text{i}.txt"
        path.write_bytes(text)
        texts.append(str(path))
    argv = ["--text", *texts, "--out", str(scratch / "out" / "corpus.npz"),
            "--seq-len", str(case["seq_len"])]
    if case["flags"] & TRAIN_VOCAB:
        argv += ["--train-vocab", str(case["train_vocab"])]
    else:
        (scratch / "vocab.txt").write_bytes(case["vocab"])
        argv += ["--vocab", str(scratch / "vocab.txt")]
    if case["flags"] & NO_LOWERCASE:
        argv.append("--no-lowercase")
    if case["flags"] & SPLIT_SENTENCES:
        argv.append("--split-sentences")
    return argv


def _check_corpus(out: Path, seq_len: int) -> None:
    """What pf-train needs of a written corpus (pf/Train/Corpus.h)."""
    import numpy as np

    from pipefisher.text_corpus import CorpusError, read_vocab

    with np.load(out) as data:
        tokens, vocab_size, special = data["tokens"], data["vocab_size"], data["special"]
    n = int(vocab_size)
    # OUT.vocab.txt is a vocabulary the builder takes again (--vocab), its
    # ids the corpus' ids.
    try:
        vocab = read_vocab(f"{out}.vocab.txt")
    except CorpusError as err:
        raise Finding(f"the vocabulary written does not read back: {err}")

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise Finding(f"the corpus written: {what}")

    need(tokens.dtype == np.int64 and tokens.ndim == 2, f"tokens {tokens.dtype} {tokens.shape}")
    need(tokens.shape[0] >= 1 and tokens.shape[1] == seq_len, f"tokens {tokens.shape}")
    need(len(vocab) == n, f"{len(vocab)} tokens in the vocabulary written, vocab_size {n}")
    need(special.shape == (5,) and all(0 <= int(s) < n for s in special), f"special {special}")
    need(len(set(special.tolist())) == 5, f"special ids repeat: {special}")
    need(n > 5 and bool(((tokens >= 0) & (tokens < n)).all()), "a token id out of range")
    need([vocab[int(s)] for s in special] == SPECIAL, "special ids name other tokens")
    pad, cls, sep = int(special[0]), int(special[2]), int(special[3])
    for row in tokens:
        need(int(row[0]) == cls, "a row without [CLS] first")
        ends = np.flatnonzero(row == sep)
        need(len(ends) >= 1, "a row without [SEP]")
        need(bool((row[ends[-1] + 1:] == pad).all()), "a row not padded after [SEP]")


def check_input(data: bytes) -> None:
    """Runs one input; raises Finding (or the builder's own exception) when
    the outcome is none of the three allowed ones."""
    from pipefisher import corpus

    case = decode(data)
    scratch = _scratch_dir()
    out = scratch / "out" / "corpus.npz"
    for path in (out, Path(f"{out}.vocab.txt")):
        path.unlink(missing_ok=True)
    argv = _argv(case, scratch)
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = corpus.main(argv)
    except SystemExit as exit:
        if exit.code != 2 or "error:" not in stderr.getvalue():
            raise Finding(f"SystemExit({exit.code!r}), stderr {stderr.getvalue()!r}")
        return  # argparse's usage error
    if code == 0:
        if not out.exists():
            raise Finding("exit 0 but no corpus written")
        _check_corpus(out, case["seq_len"])
        return
    err = stderr.getvalue()
    lines = [line for line in err.splitlines() if not line.startswith("corpus: read ")]
    if code != 1 or len(lines) != 1 or not lines[0].startswith("corpus: error: "):
        raise Finding(f"exit {code!r}, stderr {err!r} (expected one line 'corpus: error: ...')")


# --------------------------------------------------------------------------
# Drivers


def _files(paths: list[str]) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        else:
            files.append(p)
    return files


def replay(paths: list[str]) -> int:
    files = [f for f in _files(paths) if f.name != "README.md"]
    for f in files:
        print(f"replay {f}", flush=True)
        check_input(f.read_bytes())
    print(f"replayed {len(files)} inputs through corpustext")
    return 0


def mutate(data: bytes, rng: random.Random, pool: list[bytes]) -> bytes:
    """One to four libFuzzer-like mutations: byte flips, inserted or deleted
    runs, interesting bytes, a header byte, a splice with another seed."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(7)
        at = rng.randrange(len(buf) + 1)
        if choice == 0 and buf:
            buf[min(at, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif choice == 1:
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif choice == 2 and buf:
            del buf[at:at + rng.randint(1, 16)]
        elif choice == 3:
            buf[at:at] = rng.choice([b"\n", b"\n\n", b"\r", b"\0", b"\xef\xbb\xbf", b"##",
                                     b"[UNK]", b"[MASK]\n", b"\xff", b"\xc3", SEPARATOR,
                                     "\u00e9\u4e2d".encode(), b". ", b"! ", b" " * 40])
        elif choice == 4 and len(buf) >= 3:
            buf[rng.randrange(3)] = rng.randrange(256)
        elif choice == 5:
            other = rng.choice(pool)
            cut = rng.randrange(len(other) + 1)
            buf = buf[:at] + bytearray(other[cut:])
        elif choice == 6 and buf:
            start = rng.randrange(len(buf))
            piece = buf[start:start + rng.randint(1, 64)]
            buf[at:at] = piece * rng.randint(1, 8)
    return bytes(buf[:1 << 16])


def random_mutations(count: int, seed: int) -> int:
    rng = random.Random(seed)
    pool = list(seeds().values())
    for data in pool:
        check_input(data)
    for i in range(count):
        data = mutate(rng.choice(pool), rng, pool)
        try:
            check_input(data)
        except BaseException:
            crash = Path(f"crash-corpustext-seed{seed}-{i}")
            crash.write_bytes(data)
            print(f"finding on mutation {i} (seed {seed}); input written to {crash}",
                  file=sys.stderr)
            raise
        if len(pool) < 256 and rng.random() < 0.05:
            pool.append(data)
    print(f"ran {len(pool)} seeds and {count} mutations (seed {seed}): no finding")
    return 0


def write_seeds(out: str) -> int:
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    for name, data in seeds().items():
        (d / name).write_bytes(data)
    return 0


def fuzz(argv: list[str]) -> int:
    try:
        import atheris
    except ImportError:
        print("corpus_text_fuzzer: atheris is not installed (./scripts/setup.sh --fuzz, or "
              "pip install atheris==3.0.0); --mutate N runs without it", file=sys.stderr)
        return 2
    import numpy  # noqa: F401  (imported before the instrumentation: not ours)
    import tokenizers  # noqa: F401
    with atheris.instrument_imports(include=["pipefisher"]):
        from pipefisher import corpus, text_corpus  # noqa: F401

    def one_input(data: bytes) -> None:
        check_input(data)

    atheris.Setup(argv, one_input)
    atheris.Fuzz()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(argv) > 1 and argv[1] == "--replay":
        return replay(argv[2:])
    if len(argv) == 3 and argv[1] == "--seeds":
        return write_seeds(argv[2])
    if len(argv) > 1 and argv[1] == "--mutate":
        count = int(argv[2]) if len(argv) > 2 else 1000
        seed = int(argv[4]) if len(argv) > 4 and argv[3] == "--seed" else 0
        return random_mutations(count, seed)
    return fuzz(argv)


if __name__ == "__main__":
    # Run as a script: the checkout's pipefisher (imported, e.g. by pytest,
    # whatever pipefisher the importer has).
    sys.path.insert(0, str(ROOT / "python"))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main(sys.argv))
