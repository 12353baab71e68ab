"""Write a batch of BERT inputs (.npz keyed by input name) for pf-run.

    python3 -m pipefisher.sample_inputs --out in.npz --batch 8 --sequence 128

Token ids are seeded random draws from the vocabulary; the second half of the
batch is padded (attention mask 0) over its last quarter so masking is
exercised.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def make_inputs(batch: int, sequence: int, vocab: int = 30522, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, sequence), np.int64)
    mask[batch // 2:, sequence - sequence // 4:] = 0
    return {
        "input_ids": rng.integers(0, vocab, size=(batch, sequence)).astype(np.int64),
        "token_type_ids": (np.arange(sequence)[None, :] >= sequence // 2)
        .repeat(batch, 0).astype(np.int64),
        "attention_mask": mask,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--sequence", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.batch < 1 or args.sequence < 1 or args.vocab < 1:
        parser.error("--batch, --sequence and --vocab must be positive")
    np.savez(args.out, **make_inputs(args.batch, args.sequence, args.vocab, args.seed))
    print(f"wrote {args.out}: batch {args.batch}, sequence {args.sequence}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
