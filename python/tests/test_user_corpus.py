"""`python3 -m pipefisher.corpus --text`: a corpus from the user's own text,
tokenized by BERT's WordPiece (Hugging Face tokenizers) over a vocab.txt the
test writes, packed per document; its errors; pf-train trains on it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tokenizers", exc_type=ImportError)  # absent, or broken

from pipefisher import corpus as corpus_cli  # noqa: E402
from pipefisher import make_bert_model, save_model  # noqa: E402
from pipefisher import text_corpus  # noqa: E402
from pipefisher.tools import run_tool  # noqa: E402

PYTHON_DIR = Path(__file__).resolve().parents[1]

# BERT's layout: [PAD] first, [unused*] slots, the other specials after them
# (in bert-base-uncased: 0, 100, 101, 102, 103), so the ids must be looked up.
VOCAB = (["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
          ".", ",", "!", "?", "the", "a", "cat", "dog", "bird", "run", "see", "quick", "slow",
          "cafe", "un", "happy", "big", "red", "river", "tree", "ball",
          "##s", "##ly", "##able", "##er", "##est"])
ID = {t: i for i, t in enumerate(VOCAB)}
PAD, UNK, CLS, SEP, MASK = (ID[s] for s in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])


@pytest.fixture
def vocab(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    return path


def _text(tmp_path, name, text):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _cli(*args) -> subprocess.CompletedProcess:
    env = ({**os.environ} if os.environ.get("PF_TEST_INSTALLED") == "1"  # the installed package
           else {**os.environ, "PYTHONPATH": str(PYTHON_DIR)})
    return subprocess.run([sys.executable, "-m", "pipefisher.corpus", *map(str, args)],
                          capture_output=True, text=True, env=env)


def _build(tmp_path, vocab, texts, seq_len, *extra):
    out = tmp_path / "out" / "corpus.npz"
    proc = _cli("--text", *texts, "--vocab", vocab, "--out", out, "--seq-len", seq_len, *extra)
    assert proc.returncode == 0, proc.stderr
    data = np.load(out)
    return {k: data[k] for k in data.files}, proc, out


def _row(*words, seq_len):
    ids = [CLS] + [ID[w] for w in words] + [SEP]
    return ids + [PAD] * (seq_len - len(ids))


def test_wordpiece_ids_and_unknown_words(tmp_path, vocab):
    text = _text(tmp_path, "a.txt", "The quick cats run quickly, unable unhappy Zebras!\n")
    data, proc, out = _build(tmp_path, vocab, [text], 16)
    # A word WordPiece cannot spell from a word and ## pieces is [UNK]:
    # "zebras", and "unhappy" (there is "happy", but no "##happy").
    expected = _row("the", "quick", "cat", "##s", "run", "quick", "##ly", ",", "un", "##able",
                    "[UNK]", "[UNK]", "!", seq_len=16)
    assert data["tokens"].tolist() == [expected]
    assert data["tokens"].dtype == np.int64
    assert int(data["vocab_size"]) == len(VOCAB)
    assert data["special"].tolist() == [PAD, UNK, CLS, SEP, MASK]
    assert (out.parent / "corpus.npz.vocab.txt").read_text().split("\n")[:-1] == VOCAB
    assert "1 documents, 1 sentences" in proc.stdout
    assert "--vocab 33" in proc.stdout  # the model the summary asks for


def test_lowercase_is_the_default_and_can_be_turned_off(tmp_path, vocab):
    text = _text(tmp_path, "a.txt", "The Café\n")
    lower, _, _ = _build(tmp_path, vocab, [text], 8)
    # Lower-casing also strips accents (bert-base-uncased): café -> cafe.
    assert lower["tokens"][0].tolist() == _row("the", "cafe", seq_len=8)
    cased, _, _ = _build(tmp_path, vocab, [text], 8, "--no-lowercase")
    assert cased["tokens"][0].tolist() == _row("[UNK]", "[UNK]", seq_len=8)


def test_packing_keeps_sentences_whole_within_documents(tmp_path, vocab):
    # seq_len 8 leaves 6 tokens between [CLS] and [SEP].
    a = _text(tmp_path, "a.txt",
              "the cat .\n"              # 3 tokens
              "the dog .\n"              # 3: fills the first row
              "a bird .\n"               # 3: a new row ...
              "the big red ball .\n"     # 5: ... that it does not fit into
              "\n\n"
              "a tree .\n")              # a new document: a new row
    b = _text(tmp_path, "b.txt", "the river .\n")  # a new file: a new document
    data, proc, _ = _build(tmp_path, vocab, [a, b], 8)
    assert data["tokens"].tolist() == [
        _row("the", "cat", ".", "the", "dog", ".", seq_len=8),
        _row("a", "bird", ".", seq_len=8),
        _row("the", "big", "red", "ball", ".", seq_len=8),
        _row("a", "tree", ".", seq_len=8),
        _row("the", "river", ".", seq_len=8),
    ]
    assert "3 documents, 6 sentences (0 longer than a sequence, cut)" in proc.stdout


def test_a_sentence_longer_than_a_row_is_cut(tmp_path, vocab):
    long = " ".join(["the", "big", "red", "ball"] * 3 + ["."])  # 13 tokens
    text = _text(tmp_path, "a.txt", f"{long}\nthe cat .\na dog .\n")
    data, proc, _ = _build(tmp_path, vocab, [text], 8)
    words = ["the", "big", "red", "ball"] * 3 + ["."]
    assert data["tokens"].tolist() == [
        _row(*words[0:6], seq_len=8),
        _row(*words[6:12], seq_len=8),
        # The last piece is packed with the sentences after it.
        _row(words[12], "the", "cat", ".", seq_len=8),
        _row("a", "dog", ".", seq_len=8),
    ]
    assert "(1 longer than a sequence, cut)" in proc.stdout


def test_split_sentences(tmp_path, vocab):
    text = _text(tmp_path, "a.txt", "the cat run . a dog run . the bird run .\n")
    whole, _, _ = _build(tmp_path, vocab, [text], 12)
    split, _, _ = _build(tmp_path, vocab, [text], 12, "--split-sentences")
    words = "the cat run . a dog run . the bird run .".split()
    # As one 12-token sentence the line is cut after 10 tokens; as three
    # sentences of 4 the third starts a new row.
    assert whole["tokens"].tolist() == [_row(*words[:10], seq_len=12),
                                        _row(*words[10:], seq_len=12)]
    assert split["tokens"].tolist() == [_row(*words[:8], seq_len=12),
                                        _row(*words[8:], seq_len=12)]


def test_progress_lines(tmp_path, vocab, monkeypatch, capsys):
    monkeypatch.setattr(text_corpus, "PROGRESS_SECONDS", 0.0)
    text = _text(tmp_path, "a.txt", "the cat .\n" * 10)
    text_corpus.make_text_corpus([text], vocab, 8)
    lines = [l for l in capsys.readouterr().err.splitlines() if l.startswith("corpus: read")]
    assert len(lines) == 10
    assert lines[-1].startswith("corpus: read 0.0 of 0.0 MB (100%)")


@pytest.mark.parametrize("case,message", [
    ("missing-special", r"vocab.txt: no \[MASK\] token; pf-train needs all of"),
    ("missing-vocab", r"nope.txt: no such vocab file"),
    ("missing-text", r"missing.txt: no such text file"),
    ("empty-text", r"empty.txt: no text \(the file is empty or only blank lines\)"),
    ("blank-text", r"blank.txt: no text"),
    ("not-utf8", r"latin1.txt:2: not UTF-8 text \(byte 0xe9 at column 8\)"),
    ("directory", r"is a directory, not a text file"),
    ("duplicate-token", r"dup.txt:3: token 'cat' repeats line 2"),
    ("seq-len", r"--seq-len 2: a sequence needs"),
])
def test_errors_are_one_line_and_exit_1(tmp_path, vocab, case, message):
    good = _text(tmp_path, "good.txt", "the cat .\n")
    args = {"vocab": vocab, "text": [good], "seq_len": 8}
    if case == "missing-special":
        (tmp_path / "other").mkdir()
        args["vocab"] = _text(tmp_path / "other", "vocab.txt",
                              "\n".join(t for t in VOCAB if t != "[MASK]"))
    elif case == "missing-vocab":
        args["vocab"] = tmp_path / "nope.txt"
    elif case == "missing-text":
        args["text"] = [good, tmp_path / "missing.txt"]
    elif case == "empty-text":
        args["text"] = [_text(tmp_path, "empty.txt", "")]
    elif case == "blank-text":
        args["text"] = [_text(tmp_path, "blank.txt", "\n  \n\n")]
    elif case == "not-utf8":
        args["text"] = [_text(tmp_path, "latin1.txt", "the cat .\nthe caf\xe9\n".encode("latin-1"))]
    elif case == "directory":
        args["text"] = [tmp_path]
    elif case == "duplicate-token":
        args["vocab"] = _text(tmp_path, "dup.txt", "[PAD]\ncat\ncat\n")
    elif case == "seq-len":
        args["seq_len"] = 2
    out = tmp_path / "x.npz"
    out.write_bytes(b"a good old corpus")
    proc = _cli("--text", *args["text"], "--vocab", args["vocab"], "--out", out,
                "--seq-len", args["seq_len"])
    assert proc.returncode == 1, proc.stdout
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert re.search(message, proc.stderr), proc.stderr
    assert out.read_bytes() == b"a good old corpus"  # a failed run writes nothing


def test_argument_errors(tmp_path, vocab):
    text = _text(tmp_path, "a.txt", "the cat .\n")
    proc = _cli("--text", text, "--out", tmp_path / "x.npz")
    assert proc.returncode == 2 and "--text needs --vocab" in proc.stderr
    proc = _cli("--text", text, "--vocab", vocab, "--sequences", "5", "--out", tmp_path / "x.npz")
    assert proc.returncode == 2 and "--sequences and --seed are for the generated" in proc.stderr
    proc = _cli("--text", text, "--vocab", vocab, "--train-vocab", "100", "--out",
                tmp_path / "x.npz")
    assert proc.returncode == 2 and "exclude each other" in proc.stderr
    proc = _cli("--train-vocab", "100", "--out", tmp_path / "x.npz")
    assert proc.returncode == 2 and "--train-vocab go with --text" in proc.stderr


def test_a_failed_write_leaves_the_old_files(tmp_path, vocab, monkeypatch, capsys):
    text = _text(tmp_path, "a.txt", "the cat .\n")
    out = tmp_path / "x.npz"
    out.write_bytes(b"old corpus")
    Path(f"{out}.vocab.txt").write_text("old vocab\n")

    def broken_savez(file, **arrays):
        file.write(b"PK half a zip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(corpus_cli.np, "savez", broken_savez)
    assert corpus_cli.main(["--text", str(text), "--vocab", str(vocab), "--out", str(out)]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert out.read_bytes() == b"old corpus"
    assert Path(f"{out}.vocab.txt").read_text() == "old vocab\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "vocab.txt", "x.npz",
                                                          "x.npz.vocab.txt"]  # no temporaries


def test_pf_train_trains_on_it(tmp_path, vocab):
    sentences = ["the quick cat run .", "a slow dog see the bird .", "the big red ball .",
                 "a happy bird see the river .", "the dog run quickly !", "a cat see a tree ."]
    rng = np.random.default_rng(0)
    docs = ["\n".join(rng.choice(sentences, size=4)) for _ in range(60)]
    text = _text(tmp_path, "story.txt", "\n\n".join(docs) + "\n")
    data, _, out = _build(tmp_path, vocab, [text], 16)
    assert len(data["tokens"]) >= 60
    model = tmp_path / "model.onnx"
    save_model(make_bert_model("tiny", vocab_size=len(VOCAB), num_hidden_layers=1, seed=3), model)
    proc = run_tool("pf-train", model, "--corpus", out, "--steps", "3", "--batch", "4",
                    "--log-every", "1", "--num-threads", "1")
    losses = [float(x) for x in re.findall(r"step\s+\d+\s+loss\s+([0-9.]+)", proc.stdout)]
    assert len(losses) == 3 and all(np.isfinite(losses)), proc.stdout
    # Near uniform over the 33 words at the start: ln 33 = 3.5.
    assert 2.5 < losses[0] < 4.5
    # A model with fewer words than the corpus is refused when it meets one.
    small = tmp_path / "small.onnx"
    save_model(make_bert_model("tiny", vocab_size=12, num_hidden_layers=1), small)
    proc = run_tool("pf-train", small, "--corpus", out, "--steps", "1", "--batch", "4",
                    "--num-threads", "1", check=False)
    assert proc.returncode == 1 and "out of range" in proc.stderr


# A few hundred distinct words in sentences of a small grammar, so that the
# trainer has frequent words, rare words and shared word pieces to learn.
def _story(tmp_path, documents=40):
    rng = np.random.default_rng(1)
    stems = ["walk", "talk", "jump", "paint", "climb", "river", "mountain", "garden",
             "lantern", "harbor", "whisper", "thunder"]
    endings = ["", "s", "ed", "ing", "er"]
    words = [s + e for s in stems for e in endings]
    docs = []
    for _ in range(documents):
        lines = [" ".join(rng.choice(words, size=int(rng.integers(3, 9)))) + " ."
                 for _ in range(int(rng.integers(2, 6)))]
        docs.append("\n".join(lines))
    return _text(tmp_path, "story.txt", "\n\n".join(docs) + "\n"), words


def test_train_vocab_learns_a_wordpiece_vocabulary_from_the_text(tmp_path):
    text, words = _story(tmp_path)
    out = tmp_path / "out.npz"
    proc = _cli("--text", text, "--train-vocab", "200", "--out", out, "--seq-len", "16")
    assert proc.returncode == 0, proc.stderr
    vocab = Path(f"{out}.vocab.txt").read_text().splitlines()
    # The special tokens first, in the order pf-train's `special` lists them.
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 64 <= len(vocab) <= 200 and len(set(vocab)) == len(vocab)
    assert any(t.startswith("##") for t in vocab)  # continuation pieces
    data = np.load(out)
    assert list(data["special"]) == [0, 1, 2, 3, 4]
    assert int(data["vocab_size"]) == len(vocab)
    tokens = data["tokens"]
    assert tokens.max() < len(vocab)
    # Every word of the text is spelt without [UNK] (the trainer keeps the
    # alphabet), and the corpus equals the one --vocab builds from the file.
    assert not (tokens == 1).any()
    again, _, _ = _build(tmp_path, Path(f"{out}.vocab.txt"), [text], 16)
    assert (again["tokens"] == tokens).all()
    # Decoding a row with the trained vocabulary gives back the text's words.
    row = [vocab[i] for i in tokens[0] if i > 4]
    decoded = " ".join(row).replace(" ##", "").split()
    assert decoded and all(w in words or w == "." for w in decoded), decoded


def test_train_vocab_errors(tmp_path):
    text, _ = _story(tmp_path, documents=2)
    proc = _cli("--text", text, "--train-vocab", "10", "--out", tmp_path / "x.npz")
    assert proc.returncode == 1 and "--train-vocab 10: at least 64 tokens" in proc.stderr
    latin = _text(tmp_path, "latin1.txt", "the cat .\nthe caf\xe9\n".encode("latin-1"))
    proc = _cli("--text", latin, "--train-vocab", "100", "--out", tmp_path / "x.npz")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "latin1.txt:2: not UTF-8 text" in proc.stderr
    proc = _cli("--text", tmp_path / "none.txt", "--train-vocab", "100", "--out",
                tmp_path / "x.npz")
    assert proc.returncode == 1 and "none.txt: no such text file" in proc.stderr
    assert not (tmp_path / "x.npz").exists()
