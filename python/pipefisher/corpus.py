"""A generated text corpus and a small word-level tokenizer for masked-LM training.

    python3 -m pipefisher.corpus --out data/corpus.npz --sequences 20000 --seq-len 64

Your own text instead (BERT's WordPiece tokenizer over a vocab.txt; see
pipefisher/text_corpus.py and "Training on your own text" in README.md):

    python3 -m pipefisher.corpus --text FILE [FILE...] --vocab vocab.txt \
        --out data/mine.npz --seq-len 128 [--no-lowercase] [--split-sentences]

Nothing can be downloaded at run time, so the corpus is generated: sentences
from a small probabilistic grammar (subjects, verbs, objects, adjectives,
places and times that agree with each other), enough structure for a
masked-LM loss to fall well below the unigram entropy. The tokenizer is
word-level with BERT's special tokens; sequences are `[CLS] sentence(s) [SEP]`
padded with `[PAD]` to a fixed length.

The .npz holds `tokens` (int64 [sequences, seq_len]), `vocab_size` (int64)
and `special` ([PAD], [UNK], [CLS], [SEP], [MASK] ids); the words, one per line
in id order, go to `<out>.vocab.txt` (the .npz stays numeric so C++ readers
need no string support).

Before any work the outputs are checked (pipefisher/outputs.py): neither
OUT nor OUT.vocab.txt may be a --text or --vocab file (links resolved) or a
directory, and their folder must take a new file. Both are written to
temporary files and renamed into place together, the .npz last
(pipefisher/atomic.py): a failed run leaves the previous pair whole.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from .text_corpus import MAX_SEQ_LEN

#: The most sequences of the generated corpus (16M; at 64 tokens 8 GiB).
MAX_SEQUENCES = 1 << 24

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

ANIMALS = ["cat", "dog", "fox", "bird", "horse", "mouse", "rabbit", "wolf", "bear", "owl"]
PEOPLE = ["teacher", "farmer", "doctor", "child", "pilot", "baker", "singer", "painter"]
ADJECTIVES = {"animal": ["small", "quick", "lazy", "brown", "wild", "hungry", "old", "young"],
              "thing": ["red", "heavy", "wooden", "shiny", "broken", "new", "tiny", "round"]}
THINGS = ["ball", "book", "apple", "stone", "cup", "box", "hat", "key", "boat", "lamp"]
VERBS = {"animal": ["chases", "watches", "finds", "follows", "sees"],
         "person": ["reads", "holds", "paints", "buys", "carries", "drops"]}
PLACES = ["in the garden", "near the river", "on the hill", "in the house", "at the market",
          "under the tree", "by the lake"]
TIMES = ["in the morning", "at night", "every day", "after lunch", "before dawn"]


def sentence(rng: np.random.Generator) -> list[str]:
    """One grammatical sentence; animals act on animals, people on things."""
    if rng.random() < 0.5:
        subject = ["the", rng.choice(ADJECTIVES["animal"]), rng.choice(ANIMALS)]
        verb = rng.choice(VERBS["animal"])
        obj = ["the", rng.choice(ANIMALS)]
    else:
        subject = ["the", rng.choice(PEOPLE)]
        verb = rng.choice(VERBS["person"])
        obj = ["a", rng.choice(ADJECTIVES["thing"]), rng.choice(THINGS)]
    words = subject + [verb] + obj
    if rng.random() < 0.6:
        words += rng.choice(PLACES).split()
    if rng.random() < 0.4:
        words += rng.choice(TIMES).split()
    return [str(w) for w in words] + ["."]


def build_vocab() -> list[str]:
    words = set()
    for group in (ANIMALS, PEOPLE, THINGS, *ADJECTIVES.values(), *VERBS.values()):
        words.update(group)
    for phrase in PLACES + TIMES:
        words.update(phrase.split())
    words.update(["the", "a", "."])
    return SPECIAL + sorted(words)


def check_sizes(sequences: int, seq_len: int) -> None:
    """Raises ValueError for a generated corpus' size out of bounds (before
    numpy meets a negative or absurd shape)."""
    if seq_len < 8:
        raise ValueError("seq_len must be at least 8")
    if seq_len > MAX_SEQ_LEN:
        raise ValueError(f"seq_len must be at most {MAX_SEQ_LEN}")
    if sequences < 1:
        raise ValueError("--sequences must be positive")
    if sequences > MAX_SEQUENCES:
        raise ValueError(f"--sequences must be at most {MAX_SEQUENCES}")


def make_corpus(sequences: int, seq_len: int, seed: int = 0) -> dict:
    check_sizes(sequences, seq_len)
    rng = np.random.default_rng(seed)
    vocab = build_vocab()
    ids = {w: i for i, w in enumerate(vocab)}
    pad, cls, sep = ids["[PAD]"], ids["[CLS]"], ids["[SEP]"]
    tokens = np.full((sequences, seq_len), pad, np.int64)
    for row in range(sequences):
        words: list[str] = []
        while True:
            nxt = sentence(rng)
            if len(words) + len(nxt) > seq_len - 2:
                break
            words += nxt
            if rng.random() < 0.3:  # some short sequences keep padding in play
                break
        seq = [cls] + [ids.get(w, ids["[UNK]"]) for w in words] + [sep]
        tokens[row, :len(seq)] = seq
    return {"tokens": tokens, "vocab": vocab, "vocab_size": np.int64(len(vocab)),
            "special": np.array([ids[s] for s in SPECIAL], np.int64)}


def vocab_path(out: str) -> str:
    """The vocabulary written beside the corpus `out`."""
    return f"{out}.vocab.txt"


def write_corpus(out: str, corpus: dict) -> None:
    """The .npz and <out>.vocab.txt, written as a set (atomic_write_set): both
    are written in full before either is renamed into place, the .npz (what
    pf-train reads) last, so a failed or interrupted write leaves the
    previous pair as it was."""
    from .atomic import atomic_write_set

    arrays = {k: corpus[k] for k in ("tokens", "vocab_size", "special")}
    with atomic_write_set(vocab_path(out), out) as (vocab_tmp, npz_tmp):
        vocab_tmp.write_text("\n".join(corpus["vocab"]) + "\n", encoding="utf-8")
        with open(npz_tmp, "wb") as npz:
            np.savez(npz, **arrays)  # to a file object: no ".npz" appended


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m pipefisher.corpus", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True,
                        help="the .npz to write; the vocabulary goes to OUT.vocab.txt")
    parser.add_argument("--seq-len", type=int, default=64, help="tokens per sequence (64)")
    generated = parser.add_argument_group("the generated corpus (the default)")
    generated.add_argument("--sequences", type=int, default=None,
                           help="sequences to generate (20000)")
    generated.add_argument("--seed", type=int, default=None, help="generator seed (0)")
    text = parser.add_argument_group(
        "your own text (--text): WordPiece over --vocab, sentences packed per document")
    text.add_argument("--text", nargs="+", metavar="FILE",
                      help="UTF-8 text files: a sentence per line, blank lines between "
                           "documents")
    text.add_argument("--vocab", metavar="VOCAB.TXT",
                      help="BERT vocab.txt (one token per line, ## continuation pieces; "
                           "needs [PAD] [UNK] [CLS] [SEP] [MASK])")
    text.add_argument("--train-vocab", type=int, metavar="SIZE",
                      help="instead of --vocab: learn a WordPiece vocabulary of at most SIZE "
                           "tokens from the text itself (Hugging Face tokenizers' "
                           "WordPieceTrainer, BERT's normalizer; written to OUT.vocab.txt)")
    text.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True,
                      help="lower-case and strip accents, as bert-base-uncased (default: on; "
                           "--no-lowercase for cased vocabularies)")
    text.add_argument("--split-sentences", action="store_true",
                      help="also split lines after . ! or ? and a space (text with a "
                           "paragraph per line)")
    return parser


def _check_generated(args, parser) -> None:
    if args.vocab or args.train_vocab is not None:
        parser.error("--vocab and --train-vocab go with --text (the generated corpus has "
                     "its own words)")
    try:
        check_sizes(20000 if args.sequences is None else args.sequences, args.seq_len)
    except ValueError as err:
        parser.error(str(err))
    if args.seed is not None and args.seed < 0:
        parser.error("--seed must be non-negative")  # numpy's generators take no other


def _generated(args) -> dict:
    sequences = 20000 if args.sequences is None else args.sequences
    return make_corpus(sequences, args.seq_len, 0 if args.seed is None else args.seed)


def _check_text(args, parser) -> None:
    """The arguments of --text; raises CorpusError for a number out of bounds."""
    from .text_corpus import check_seq_len, check_train_vocab_size

    if args.vocab and args.train_vocab is not None:
        parser.error("--vocab and --train-vocab exclude each other: use a vocabulary or "
                     "learn one")
    if not args.vocab and args.train_vocab is None:
        parser.error("--text needs --vocab VOCAB.TXT (the WordPiece vocabulary) or "
                     "--train-vocab SIZE")
    if args.sequences is not None or args.seed is not None:
        parser.error("--sequences and --seed are for the generated corpus; --text uses all "
                     "of the text")
    check_seq_len(args.seq_len)
    if args.train_vocab is not None:
        check_train_vocab_size(args.train_vocab)


def _from_text(args) -> dict:
    from .text_corpus import make_text_corpus, make_trained_text_corpus

    if args.train_vocab is not None:
        return make_trained_text_corpus(args.text, args.train_vocab, args.seq_len,
                                        lowercase=args.lowercase,
                                        split_sentences=args.split_sentences)
    return make_text_corpus(args.text, args.vocab, args.seq_len, lowercase=args.lowercase,
                            split_sentences=args.split_sentences)


def check_corpus_outputs(args) -> None:
    """Neither output over an input or the other, each one writable: before
    the text is read (pipefisher/outputs.py); raises OutputError."""
    from .outputs import NamedPath, check_outputs

    inputs = [NamedPath("--text", t) for t in args.text or []]
    if args.vocab:
        inputs.append(NamedPath("--vocab", args.vocab))
    check_outputs([NamedPath("--out", args.out),
                   NamedPath("--out's vocabulary", vocab_path(args.out))], inputs)


def _summary(out: str, corpus: dict) -> str:
    rows, seq_len = corpus["tokens"].shape
    vocab = len(corpus["vocab"])
    used = int((corpus["tokens"] != corpus["special"][0]).sum())
    line = f"wrote {out}: {rows} sequences x {seq_len}, vocab {vocab}, {used} tokens"
    stats = corpus.get("stats")
    if stats:
        unknown = 100.0 * stats["unknown"] / max(stats["words"], 1)
        line += (f"\n  {stats['documents']} documents, {stats['sentences']} sentences "
                 f"({stats['cut']} longer than a sequence, cut), {stats['words']} word pieces, "
                 f"{unknown:.2f}% [UNK], {100 * stats['padding']:.1f}% padding"
                 f"\n  a model for it needs a vocabulary of at least {vocab}: "
                 f"python3 -m pipefisher.bert_onnx --config tiny --vocab {vocab} --out model.onnx")
    return line


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    from .outputs import OutputError, os_error_message
    from .text_corpus import CorpusError

    try:
        if args.text:
            _check_text(args, parser)
        else:
            _check_generated(args, parser)
        check_corpus_outputs(args)
        corpus = _from_text(args) if args.text else _generated(args)
        write_corpus(args.out, corpus)
    except (CorpusError, OutputError) as err:
        print(f"corpus: error: {err}", file=sys.stderr)
        return 1
    except MemoryError:
        print("corpus: error: out of memory for the corpus (fewer --sequences, a shorter "
              "--seq-len or less text)", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"corpus: error: {os_error_message(err, args.out)}", file=sys.stderr)
        return 1
    print(_summary(args.out, corpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
