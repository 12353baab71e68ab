"""A masked-LM training corpus from your own plain text (``corpus --text``).

    python3 -m pipefisher.corpus --text book.txt notes.txt --vocab vocab.txt \\
        --out data/mine.npz --seq-len 128

Input: UTF-8 plain text files. Each line is a sentence and blank lines
separate documents (the input format of BERT's create_pretraining_data.py);
each file is a document boundary too. ``--split-sentences`` also splits lines
after '.', '!' or '?' followed by a space, for text with a paragraph per line.

Tokenizer: BERT's WordPiece over the given vocab.txt, from the Hugging Face
``tokenizers`` library, with BERT's normalizer (clean-up, spaces around CJK
characters, lower-casing and accent stripping with ``--lowercase``, the
default, as bert-base-uncased) and pre-tokenizer (whitespace and
punctuation): the pipeline of ``BertTokenizerFast``. A word that WordPiece
cannot spell with the vocabulary becomes [UNK].

Packing (BERT's pre-training data, without next-sentence pairs): consecutive
sentences of one document fill ``[CLS] ... [SEP]`` sequences of up to
``--seq-len`` tokens, padded with [PAD]. A sentence never straddles two
sequences, unless it alone is longer than seq_len - 2 tokens: it is then cut
into pieces of that length (the last piece may share a sequence with the
sentences after it).

Output: the .npz that the generated corpus writes and pf-train reads
(``tokens`` int64 [sequences, seq_len], ``vocab_size``, ``special``) and a
copy of the vocabulary in ``<out>.vocab.txt``. The model must have at least
``vocab_size`` words: ``python3 -m pipefisher.bert_onnx --config tiny
--vocab VOCAB_SIZE --out model.onnx``.
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

#: Sentences tokenized per call: encode_batch runs them on all cores in Rust.
BATCH_SENTENCES = 4096
#: Seconds between progress lines (large inputs only: small ones finish first).
PROGRESS_SECONDS = 2.0

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class CorpusError(Exception):
    """A problem with the user's input: printed as one line, no traceback."""


# --------------------------------------------------------------------------
# Vocabulary and tokenizer


def read_vocab(path: str | os.PathLike) -> list[str]:
    """The tokens of a BERT vocab.txt, one per line, id = line number; a
    UTF-8 byte-order mark before the first is dropped (editors on Windows
    write one)."""
    raw = _read_bytes(path, "vocab")
    tokens: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(raw.split(b"\n"), start=1):
        text = _decode(line, path, number).rstrip()  # as the tokenizer's loader trims
        if not text:
            if number == raw.count(b"\n") + 1:
                break  # the newline that ends the file
            raise CorpusError(f"{path}:{number}: empty line (a vocab.txt has one token per line)")
        if text in seen:
            # The tokenizer would keep one id for both lines and shift nothing:
            # ids and line numbers would disagree.
            raise CorpusError(f"{path}:{number}: token {text!r} repeats line {seen[text]}")
        seen[text] = number
        tokens.append(text)
    if not tokens:
        raise CorpusError(f"{path}: empty vocabulary")
    return tokens


def special_ids(vocab: list[str], path: str | os.PathLike) -> list[int]:
    """The ids of [PAD], [UNK], [CLS], [SEP], [MASK] (the .npz's `special`)."""
    ids = {token: i for i, token in enumerate(vocab)}
    missing = [s for s in SPECIAL if s not in ids]
    if missing:
        raise CorpusError(f"{path}: no {', '.join(missing)} token; pf-train needs all of "
                          f"{', '.join(SPECIAL)} in the vocabulary")
    # pf-train draws its random replacement words from ids [5, vocab_size).
    if len(vocab) <= len(SPECIAL):
        raise CorpusError(f"{path}: {len(vocab)} tokens leave no word besides the special ones")
    return [ids[s] for s in SPECIAL]


def make_tokenizer(vocab: list[str], lowercase: bool):
    """BERT's WordPiece tokenizer (BertTokenizerFast's pipeline) without the
    [CLS]/[SEP] post-processor: packing adds those."""
    try:
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    except ImportError:
        raise CorpusError("--text needs the Hugging Face 'tokenizers' package: "
                          "pip install -r python/requirements.txt (or ./scripts/setup.sh)")
    # The ids read_vocab gave (line numbers; a byte-order mark and trailing
    # spaces dropped), not the library's own reading of the file, which keeps
    # a BOM as part of the first token.
    model = models.WordPiece(vocab={token: i for i, token in enumerate(vocab)},
                             unk_token="[UNK]", max_input_chars_per_word=100)
    tokenizer = Tokenizer(model)
    # strip_accents=None: strip exactly when lower-casing, as BERT does.
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


#: The smallest --train-vocab: the special tokens plus some words.
MIN_TRAINED_VOCAB = 64
#: The largest --train-vocab: 4M tokens, over 100 times BERT's 30522; a
#: larger request is a typo, and the trainer would take it as its budget.
MAX_TRAINED_VOCAB = 1 << 22
#: The longest --seq-len: far past any model's position table (BERT has
#: 512), and a padded row stays at 512 KiB.
MAX_SEQ_LEN = 1 << 16


def check_train_vocab_size(size: int) -> None:
    if size < MIN_TRAINED_VOCAB:
        raise CorpusError(f"--train-vocab {size}: at least {MIN_TRAINED_VOCAB} tokens")
    if size > MAX_TRAINED_VOCAB:
        raise CorpusError(f"--train-vocab {size}: at most {MAX_TRAINED_VOCAB} tokens")


def train_vocab(texts: list[str | os.PathLike], size: int, lowercase: bool,
                split_sentences: bool) -> list[str]:
    """A WordPiece vocabulary of at most `size` tokens learnt from the text
    (the tokenizers library's WordPieceTrainer behind BERT's normalizer and
    pre-tokenizer, as BertWordPieceTokenizer trains one): the special tokens
    first, in SPECIAL's order, then the alphabet and the learnt pieces. The
    trainer stops below `size` when the text has fewer distinct pieces worth
    a token (pieces seen at least twice)."""
    check_train_vocab_size(size)
    try:
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    except ImportError:
        raise CorpusError("--train-vocab needs the Hugging Face 'tokenizers' package: "
                          "pip install -r python/requirements.txt (or ./scripts/setup.sh)")
    for path in texts:
        check_text_file(path)
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=size, min_frequency=2,
                                        special_tokens=list(SPECIAL),
                                        continuing_subword_prefix="##", show_progress=False)

    def sentences() -> Iterator[str]:
        for path in texts:
            for sentence in read_text(path, split_sentences, lambda _: None):
                if sentence is not None:
                    yield sentence

    tokenizer.train_from_iterator(sentences(), trainer=trainer)
    ids = tokenizer.get_vocab()
    vocab = sorted(ids, key=ids.get)
    if [ids[t] for t in vocab] != list(range(len(vocab))):
        raise CorpusError("the trained vocabulary has gaps in its ids")
    return vocab


def make_trained_text_corpus(texts: list[str | os.PathLike], vocab_size: int, seq_len: int,
                             lowercase: bool = True, split_sentences: bool = False) -> dict:
    """make_text_corpus over a vocabulary trained on the same text
    (train_vocab); the corpus' `vocab` is the trained one."""
    import tempfile

    check_seq_len(seq_len)  # before the training
    vocab = train_vocab(texts, vocab_size, lowercase, split_sentences)
    with tempfile.TemporaryDirectory(prefix="pf-vocab-") as scratch:
        path = Path(scratch) / "vocab.txt"
        path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
        return make_text_corpus(texts, path, seq_len, lowercase=lowercase,
                                split_sentences=split_sentences)


def _encode(tokenizer, sentences: list[str]) -> list[list[int]]:
    # encode_batch_fast skips the offsets we do not need (tokenizers >= 0.20).
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
    return [e.ids for e in encode(sentences, add_special_tokens=False)]


# --------------------------------------------------------------------------
# Reading text


def _read_bytes(path: str | os.PathLike, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such {what} file")
    except IsADirectoryError:
        raise CorpusError(f"{path}: is a directory, not a {what} file")
    except OSError as err:
        raise CorpusError(f"{path}: cannot read: {err.strerror}")


def _decode(line: bytes, path, number: int) -> str:
    try:
        # utf-8-sig drops a byte-order mark (only the first line can have one).
        return line.decode("utf-8-sig" if number == 1 else "utf-8")
    except UnicodeDecodeError as err:
        raise CorpusError(f"{path}:{number}: not UTF-8 text (byte 0x{line[err.start]:02x} at "
                          f"column {err.start + 1}); convert it, e.g. iconv -t UTF-8")


def check_text_file(path: str | os.PathLike) -> int:
    """Fails early (before any tokenizing) on a missing or unreadable file;
    returns its size for the progress line."""
    p = Path(path)
    if not p.exists():
        raise CorpusError(f"{path}: no such text file")
    if p.is_dir():
        raise CorpusError(f"{path}: is a directory, not a text file")
    if not os.access(p, os.R_OK):
        raise CorpusError(f"{path}: cannot read: permission denied")
    return p.stat().st_size


def read_text(path: str | os.PathLike, split_sentences: bool,
              on_bytes: Callable[[int], None]) -> Iterator[str | None]:
    """The sentences of one file, None after each document (and at the end)."""
    in_document = False
    sentences = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            on_bytes(len(raw))
            line = _decode(raw, path, number).strip()
            if not line:
                if in_document:
                    yield None
                in_document = False
                continue
            in_document = True
            for sentence in (_SENTENCE_END.split(line) if split_sentences else [line]):
                sentences += 1
                yield sentence
    if in_document:
        yield None
    if sentences == 0:
        raise CorpusError(f"{path}: no text (the file is empty or only blank lines)")


# --------------------------------------------------------------------------
# Packing


@dataclass
class Packer:
    """Fills [CLS] ... [SEP] rows with whole sentences of one document."""

    seq_len: int
    cls: int
    sep: int
    pad: int
    rows: list[np.ndarray] = field(default_factory=list)
    current: list[int] = field(default_factory=list)
    sentences: int = 0
    documents: int = 0
    cut: int = 0  # sentences longer than a row, cut into pieces

    @property
    def budget(self) -> int:
        return self.seq_len - 2  # room for [CLS] and [SEP]

    def add_sentence(self, ids: list[int]) -> None:
        if not ids:
            return  # e.g. only control characters, which the normalizer drops
        self.sentences += 1
        pieces = [ids]
        if len(ids) > self.budget:
            self.cut += 1
            pieces = [ids[i:i + self.budget] for i in range(0, len(ids), self.budget)]
        for piece in pieces:
            if len(self.current) + len(piece) > self.budget:
                self._flush()
            self.current.extend(piece)

    def end_document(self) -> None:
        if self.current:
            self.documents += 1
        self._flush()

    def _flush(self) -> None:
        if not self.current:
            return
        row = np.full(self.seq_len, self.pad, np.int64)
        row[0] = self.cls
        row[1:1 + len(self.current)] = self.current
        row[1 + len(self.current)] = self.sep
        self.rows.append(row)
        self.current = []

    def tokens(self) -> np.ndarray:
        if not self.rows:
            return np.zeros((0, self.seq_len), np.int64)
        return np.stack(self.rows)


def pack_events(events: Iterator[str | None], tokenizer, packer: Packer) -> None:
    """Tokenizes sentences in batches and feeds them, in order, to the packer."""
    pending: list[str | None] = []

    def drain() -> None:
        ids = iter(_encode(tokenizer, [e for e in pending if e is not None]))
        for event in pending:
            if event is None:
                packer.end_document()
            else:
                packer.add_sentence(next(ids))
        pending.clear()

    count = 0
    for event in events:
        pending.append(event)
        count += event is not None
        if count >= BATCH_SENTENCES:
            drain()
            count = 0
    drain()


# --------------------------------------------------------------------------
# The whole corpus


class Progress:
    """A line on stderr every PROGRESS_SECONDS: bytes read and rows so far."""

    def __init__(self, total: int, packer: Packer):
        self.total, self.done, self.packer = total, 0, packer
        self.last = time.monotonic()

    def __call__(self, nbytes: int) -> None:
        self.done += nbytes
        now = time.monotonic()
        if now - self.last >= PROGRESS_SECONDS:
            self.last = now
            share = 100.0 * self.done / max(self.total, 1)
            print(f"corpus: read {self.done / 1e6:.1f} of {self.total / 1e6:.1f} MB "
                  f"({share:.0f}%), {len(self.packer.rows)} sequences", file=sys.stderr,
                  flush=True)


def check_seq_len(seq_len: int) -> None:
    if seq_len < 3:
        raise CorpusError(f"--seq-len {seq_len}: a sequence needs [CLS], a token and [SEP]")
    if seq_len > MAX_SEQ_LEN:
        raise CorpusError(f"--seq-len {seq_len}: at most {MAX_SEQ_LEN} tokens")


def make_text_corpus(texts: list[str | os.PathLike], vocab_path: str | os.PathLike,
                     seq_len: int, lowercase: bool = True,
                     split_sentences: bool = False) -> dict:
    """The corpus arrays (as make_corpus returns them) and packing figures."""
    check_seq_len(seq_len)
    vocab = read_vocab(vocab_path)
    special = special_ids(vocab, vocab_path)
    sizes = [check_text_file(t) for t in texts]
    tokenizer = make_tokenizer(vocab, lowercase)
    pad, unk, cls, sep, _ = special
    packer = Packer(seq_len, cls=cls, sep=sep, pad=pad)
    progress = Progress(sum(sizes), packer)
    for path in texts:
        pack_events(read_text(path, split_sentences, progress), tokenizer, packer)
    tokens = packer.tokens()
    if len(tokens) == 0:
        raise CorpusError("the text has no tokens (only characters the tokenizer drops)")
    real = tokens[(tokens != pad) & (tokens != cls) & (tokens != sep)]
    return {"tokens": tokens, "vocab": vocab, "vocab_size": np.int64(len(vocab)),
            "special": np.array(special, np.int64),
            "stats": {"documents": packer.documents, "sentences": packer.sentences,
                      "cut": packer.cut, "words": int(real.size),
                      "unknown": int((real == unk).sum()),
                      "padding": float((tokens == pad).mean())}}
