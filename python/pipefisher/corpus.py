"""A generated text corpus and a small word-level tokenizer for masked-LM training.

    python3 -m pipefisher.corpus --out data/corpus.npz --sequences 20000 --seq-len 64

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
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

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


def make_corpus(sequences: int, seq_len: int, seed: int = 0) -> dict:
    if seq_len < 8:
        raise ValueError("seq_len must be at least 8")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--sequences", type=int, default=20000)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.sequences < 1:
        parser.error("--sequences must be positive")
    try:
        corpus = make_corpus(args.sequences, args.seq_len, args.seed)
    except ValueError as err:
        parser.error(str(err))
    vocab = corpus.pop("vocab")
    np.savez(args.out, **corpus)
    with open(f"{args.out}.vocab.txt", "w") as f:
        f.write("\n".join(vocab) + "\n")
    used = int((corpus["tokens"] != 0).sum())
    print(f"wrote {args.out}: {args.sequences} sequences x {args.seq_len}, "
          f"vocab {len(vocab)}, {used} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
