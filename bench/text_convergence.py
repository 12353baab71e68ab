#!/usr/bin/env python3
"""Convergence on real English text (K-FAC stability issue): K-FAC against
AdamW and LAMB, held-out loss, spikes.

Text: the King James Bible as Debian's bible-kjv package prints it (offline,
installed by scripts/setup.sh; a chapter per document, a verse per sentence),
or your own files with --text. Vocabulary: a BERT WordPiece vocabulary learnt
from the text (`corpus --train-vocab`, Hugging Face tokenizers), or yours with
--vocab. Sequences of 64 tokens; the last 256 are held out.

Model: a BertForMaskedLM (BERT-mini by default) with the corpus' vocabulary
(--model-vocab makes it larger, e.g. 30522 as bert-base-uncased; the extra
rows are never seen). pf-train with its defaults apart from what each
optimizer entry sets, batch 32 x 64, warm-up 10 steps then linear decay,
held-out evaluation every --eval-every steps.

For each optimizer and learning rate of its grid, --seeds runs (pf-train
--seed: batches and masks). Reported per optimizer (best learning rate by
the median steps to the first-order optimizers' final held-out loss):
  * steps until the held-out loss reaches each target (median over seeds),
    and the ratio to the best first-order optimizer;
  * the largest spike: the most the held-out loss rises above its lowest
    value so far, after step --spike-after (per seed);
  * the most the held-out loss exceeds the best first-order optimizer's at
    the same step after --spike-after (median over seeds, per seed);
  * ms per step.

    PYTHONPATH=python python3 bench/text_convergence.py [--seeds 3] [--steps 300]
        [--only adamw,kfac+adamw] [--config mini] [--jobs 2] [--json out.json]

Not a test. Each run uses one runtime thread; --jobs runs at once.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from pipefisher import make_bert_model, save_model  # noqa: E402
from pipefisher.tools import tool  # noqa: E402

# name -> (pf-train flags, learning rates to try). K-FAC entries use
# pf-train's K-FAC defaults (damping, decay, refresh, KL-clip, warm-ups).
OPTIMIZERS = {
    "adamw": (["--optimizer", "adamw"], [5e-4, 1e-3, 2e-3]),
    "lamb": (["--optimizer", "lamb"], [5e-3, 1e-2, 2e-2]),
    "kfac+adamw": (["--optimizer", "adamw", "--kfac"], [5e-4, 1e-3, 2e-3]),
    "kfac+lamb": (["--optimizer", "lamb", "--kfac"], [5e-3, 1e-2, 2e-2]),
    # Without grafting (the default before the early-spike fix): --only it.
    "kfac+adamw/ungrafted": (["--optimizer", "adamw", "--kfac", "--kfac-graft", "none"],
                             [1e-3]),
    # Levenberg-Marquardt damping from the default λ (docs/training.md, "Damping schedules").
    "kfac+adamw/adaptive": (["--optimizer", "adamw", "--kfac", "--kfac-damping-schedule",
                             "adaptive"], [5e-4, 1e-3, 2e-3]),
    # K-FAC in the factors' eigenbasis (damping on the Kronecker product).
    "kfac+adamw/eigen": (["--optimizer", "adamw", "--kfac", "--kfac-basis", "eigen"],
                         [5e-4, 1e-3, 2e-3]),
}
DEFAULT_RUN = ["adamw", "lamb", "kfac+adamw", "kfac+lamb"]


def kjv_text(out: Path) -> Path:
    """The KJV from bible-kjv's `bible` program: a chapter per document."""
    bible = shutil.which("bible")
    if not bible:
        sys.exit("text_convergence: no `bible` program: apt-get install bible-kjv "
                 "(scripts/setup.sh), or pass --text FILE...")
    raw = subprocess.run([bible, "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True,
                         check=True).stdout
    lines, chapter = [], None
    for verse in raw.splitlines():
        ref, _, text = verse.partition(" ")
        book_chapter = ref.split(":")[0]
        if chapter is not None and book_chapter != chapter:
            lines.append("")
        chapter = book_chapter
        lines.append(text.strip())
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def make_corpus(tmp: Path, texts: list[str], vocab: str | None, vocab_size: int) -> Path:
    out = tmp / "corpus.npz"
    cmd = [sys.executable, "-m", "pipefisher.corpus", "--text", *texts, "--out", str(out),
           "--seq-len", "64"]
    cmd += ["--vocab", vocab] if vocab else ["--train-vocab", str(vocab_size)]
    env_path = str(Path(__file__).resolve().parents[1] / "python")
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": env_path})
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    print(proc.stdout.strip().splitlines()[0], flush=True)
    return out


def run(model, corpus, flags, lr, seed, steps, batch, eval_every):
    cmd = [str(tool("pf-train")), str(model), "--corpus", str(corpus), "--batch", str(batch),
           "--steps", str(steps), "--lr", str(lr), "--seed", str(seed), "--log-every", "10",
           "--num-threads", "1", "--eval-every", str(eval_every), *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    ms = [float(x) for x in re.findall(r"ms/step\s+([0-9.]+)", proc.stdout)]
    evals = [(int(a), float(b))
             for a, b in re.findall(r"eval\s+(\d+)\s+loss\s+([0-9.naninf]+)", proc.stdout)]
    # The adaptive damping schedule's (step, λ, ρ) at each progress line.
    damping = [(int(a), float(b), c)
               for a, b, c in re.findall(r"^step\s+(\d+)\s.*damping\s+(\S+)\s+rho\s+(\S+)$",
                                         proc.stdout, re.M)]
    return {"lr": lr, "seed": seed, "diverged": proc.returncode != 0, "evals": evals,
            "damping": damping,
            "stderr": proc.stderr[-2000:] if proc.returncode else "",
            "ms_per_step": statistics.median(ms[1:] or ms) if ms else float("nan")}


def evals_to_target(evals, target):
    return next((step for step, loss in evals if loss <= target), None)


def largest_spike(evals, after):
    """The most the held-out loss rises above its lowest value so far."""
    best, spike = float("inf"), 0.0
    for step, loss in evals:
        if step > after and np.isfinite(best):
            spike = max(spike, loss - best)
        best = min(best, loss)
    return spike


def excess_over(evals, reference, after):
    """The most `evals` exceeds `reference` (relative) at a common step > after."""
    ref = dict(reference)
    rel = [loss / ref[step] - 1 for step, loss in evals if step > after and step in ref]
    return max(rel) if rel else float("nan")


def median_or_inf(values):
    return statistics.median(v if v is not None else float("inf") for v in values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", nargs="+", help="your own text files (default: the KJV)")
    parser.add_argument("--vocab", help="a BERT vocab.txt (default: learnt from the text)")
    parser.add_argument("--vocab-size", type=int, default=30522,
                        help="the most tokens of the learnt vocabulary (30522)")
    parser.add_argument("--model-vocab", type=int, default=0,
                        help="the model's vocabulary (0: the corpus')")
    parser.add_argument("--config", default="mini")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--spike-after", type=int, default=20)
    parser.add_argument("--targets", default="",
                        help="held-out losses to reach (default: the best first-order "
                             "run's losses at steps/3, 2 steps/3 and the end)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", help="comma-separated optimizer names to run")
    parser.add_argument("--lrs", help="comma-separated learning rates for every optimizer "
                                      "(instead of each one's grid)")
    parser.add_argument("--json")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else DEFAULT_RUN
    unknown = [n for n in names if n not in OPTIMIZERS]
    if unknown:
        parser.error(f"--only: unknown {', '.join(unknown)} (known: {', '.join(OPTIMIZERS)})")
    grids = {n: ([float(x) for x in args.lrs.split(",")] if args.lrs else OPTIMIZERS[n][1])
             for n in names}

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        texts = args.text or [str(kjv_text(tmp / "kjv.txt"))]
        corpus = make_corpus(tmp, texts, args.vocab, args.vocab_size)
        vocab = int(np.load(corpus)["vocab_size"])
        model_vocab = max(args.model_vocab, vocab)
        save_model(make_bert_model(args.config, vocab_size=model_vocab, seed=0),
                   tmp / "model.onnx")
        jobs = [(name, lr, seed) for name in names for lr in grids[name]
                for seed in range(args.seeds)]
        print(f"{len(jobs)} runs of {args.steps} steps, {args.jobs} at a time", flush=True)

        def one(job):
            name, lr, seed = job
            result = run(tmp / "model.onnx", corpus, OPTIMIZERS[name][0], lr, seed,
                         args.steps, args.batch, args.eval_every)
            last = result["evals"][-1][1] if result["evals"] else float("nan")
            print(f"  {name} lr {lr:g} seed {seed}: held-out {last:.4f}"
                  f"{' (failed)' if result['diverged'] else ''}", flush=True)
            return job, result

        with ThreadPoolExecutor(args.jobs) as pool:
            done = list(pool.map(one, jobs))

    def runs_of(name, lr):
        return [r for (n, l, _), r in done if n == name and l == lr]

    first_order = [n for n in names if not n.startswith("kfac")] or names
    # The reference: the first-order (name, lr) with the lowest median final loss.
    ref_name, ref_lr = min(((n, lr) for n in first_order for lr in grids[n]),
                           key=lambda k: statistics.median(
                               r["evals"][-1][1] if r["evals"] else float("inf")
                               for r in runs_of(*k)))
    ref_runs = runs_of(ref_name, ref_lr)
    if args.targets:
        targets = [float(t) for t in args.targets.split(",")]
    else:
        curve = {}
        for r in ref_runs:
            for step, loss in r["evals"]:
                curve.setdefault(step, []).append(loss)
        steps = sorted(curve)
        picks = [steps[min(len(steps) - 1, round(len(steps) * f / 3))] for f in (1, 2, 3)]
        targets = [round(statistics.median(curve[s]), 3) for s in picks]
    primary = targets[-1]
    ref_by_seed = {r["seed"]: r["evals"] for r in ref_runs}

    results = {}
    for name in names:
        best = None
        for lr in grids[name]:
            runs = runs_of(name, lr)
            for r in runs:
                r["evals_to"] = {t: None if r["diverged"] else evals_to_target(r["evals"], t)
                                 for t in targets}
                r["spike"] = largest_spike(r["evals"], args.spike_after)
                r["excess"] = excess_over(r["evals"], ref_by_seed.get(r["seed"], []),
                                          args.spike_after)
            entry = {"lr": lr, "runs": runs,
                     "median": {t: median_or_inf([r["evals_to"][t] for r in runs])
                                for t in targets}}
            if best is None or entry["median"][primary] < best["median"][primary]:
                best = entry
        results[name] = best

    print(f"\n{args.config}, batch {args.batch} x 64, {args.seeds} seeds, {args.steps} steps; "
          f"targets from {ref_name} at lr {ref_lr:g}; held-out loss every {args.eval_every} "
          f"steps")
    header = f"{'optimizer':<12} {'lr':>7}"
    for t in targets:
        header += f" {'to ' + str(t):>9} {'ratio':>6}"
    header += f" {'spike':>7} {'excess':>7} {'ms/step':>8}"
    print(header)
    base = {t: results[ref_name]["median"][t] for t in targets}
    for name in names:
        r = results[name]
        line = f"{name:<12} {r['lr']:>7.0e}"
        for t in targets:
            ratio = r["median"][t] / base[t] if base[t] not in (0, float("inf")) else float("nan")
            line += f" {r['median'][t]:>9} {ratio:>6.2f}"
        spikes = [x["spike"] for x in r["runs"]]
        excess = [x["excess"] for x in r["runs"]]
        ms = statistics.median(x["ms_per_step"] for x in r["runs"])
        line += f" {max(spikes):>7.3f} {100 * statistics.median(excess):>6.1f}% {ms:>8.1f}"
        print(line)
        print(f"{'':<12} per seed: to {primary} "
              + ", ".join(str(x["evals_to"][primary] or "-") for x in r["runs"])
              + "; spike " + ", ".join(f"{x['spike']:.3f}" for x in r["runs"])
              + "; excess " + ", ".join(f"{100 * x['excess']:.1f}%" for x in r["runs"]))
    if args.json:
        Path(args.json).write_text(json.dumps({"targets": targets, "reference": [ref_name, ref_lr],
                                               "results": results}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
