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
        [--tune-seeds 1] [--predictions 20] [--workdir DIR] [--runs-dir DIR]
        [--lr NAME=LR ...]

--tune-seeds K tunes in two stages: the grid on seeds 0..K-1, then the other
seeds at each optimizer's best learning rate (the full grid costs
len(grid) times more). --runs-dir keeps each run's result and reuses it, so
a table can be built up over several invocations (keys: config, optimizer,
lr, seed, steps, batch, predictions, model vocabulary). Time to a target is
the steps to it times the run's median ms/step (pf-train leaves the held-out
evaluations out of ms/step).

Not a test. Each run uses one runtime thread; --jobs runs at once.
"""

from __future__ import annotations

import argparse
import json
import math
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
    "lamb": (["--optimizer", "lamb"], [2.5e-3, 5e-3, 1e-2]),
    "kfac+adamw": (["--optimizer", "adamw", "--kfac"], [5e-4, 1e-3, 2e-3]),
    "kfac+lamb": (["--optimizer", "lamb", "--kfac"], [2.5e-3, 5e-3, 1e-2]),
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


def run(model, corpus, flags, lr, seed, steps, batch, eval_every, predictions):
    cmd = [str(tool("pf-train")), str(model), "--corpus", str(corpus), "--batch", str(batch),
           "--steps", str(steps), "--lr", str(lr), "--seed", str(seed), "--log-every", "10",
           "--num-threads", "1", "--eval-every", str(eval_every), *flags]
    if predictions:
        cmd += ["--predictions", str(predictions)]
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


def final_loss(result):
    return result["evals"][-1][1] if result["evals"] and not result["diverged"] else float("inf")


def targets_from(runs, given):
    """--targets, or the runs' median held-out loss at steps/3, 2 steps/3 and the end."""
    if given:
        return [float(t) for t in given.split(",")]
    curve = {}
    for r in runs:
        for step, loss in r["evals"]:
            curve.setdefault(step, []).append(loss)
    steps = sorted(curve)
    picks = [steps[min(len(steps) - 1, round(len(steps) * f / 3))] for f in (1, 2, 3)]
    # Rounded up, so the run whose median it is reaches it.
    return [math.ceil(statistics.median(curve[s]) * 1e3) / 1e3 for s in picks]


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
    parser.add_argument("--tune-seeds", type=int, default=0,
                        help="tune the learning rate on the first K seeds only, then run the "
                             "others at the best one (0: the grid on every seed)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--predictions", type=int, default=0,
                        help="pf-train --predictions P: the decoder at P positions per "
                             "sequence (0: everywhere)")
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--spike-after", type=int, default=20)
    parser.add_argument("--targets", default="",
                        help="held-out losses to reach (default: the best first-order "
                             "run's losses at steps/3, 2 steps/3 and the end)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", help="comma-separated optimizer names to run")
    parser.add_argument("--lrs", help="comma-separated learning rates for every optimizer "
                                      "(instead of each one's grid)")
    parser.add_argument("--lr", action="append", default=[], metavar="NAME=LR[,LR...]",
                        help="one optimizer's learning rates (instead of its grid); repeatable")
    parser.add_argument("--workdir", help="where the text, corpus and model are kept and "
                                          "reused (default: a temporary directory)")
    parser.add_argument("--runs-dir", help="keep each run's result here and reuse it")
    parser.add_argument("--json")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else DEFAULT_RUN
    unknown = [n for n in names if n not in OPTIMIZERS]
    if unknown:
        parser.error(f"--only: unknown {', '.join(unknown)} (known: {', '.join(OPTIMIZERS)})")
    grids = {n: ([float(x) for x in args.lrs.split(",")] if args.lrs else OPTIMIZERS[n][1])
             for n in names}
    for item in args.lr:
        name, _, lrs = item.partition("=")
        if name not in grids:
            parser.error(f"--lr {item}: {name!r} is not among the optimizers run")
        grids[name] = [float(x) for x in lrs.split(",")]
    tune_seeds = args.tune_seeds if 0 < args.tune_seeds < args.seeds else args.seeds

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        corpus = work / "corpus.npz"
        if not corpus.exists():
            texts = args.text or [str(kjv_text(work / "kjv.txt"))]
            corpus = make_corpus(work, texts, args.vocab, args.vocab_size)
        vocab = int(np.load(corpus)["vocab_size"])
        model_vocab = max(args.model_vocab, vocab)
        model = work / f"{args.config}-{model_vocab}.onnx"
        if not model.exists():
            save_model(make_bert_model(args.config, vocab_size=model_vocab, seed=0), model)
        runs_dir = Path(args.runs_dir) if args.runs_dir else None
        if runs_dir:
            runs_dir.mkdir(parents=True, exist_ok=True)

        def one(job):
            name, lr, seed = job
            key = (f"{args.config}-v{model_vocab}-{name.replace('/', '_')}-lr{lr:g}-s{seed}"
                   f"-n{args.steps}-b{args.batch}-p{args.predictions}-e{args.eval_every}")
            cached = runs_dir / f"{key}.json" if runs_dir else None
            if cached and cached.exists():
                return job, json.loads(cached.read_text())
            result = run(model, corpus, OPTIMIZERS[name][0], lr, seed, args.steps, args.batch,
                         args.eval_every, args.predictions)
            if cached and not result["diverged"]:
                cached.write_text(json.dumps(result))
            print(f"  {name} lr {lr:g} seed {seed}: held-out {final_loss(result):.4f}"
                  f"{' (failed)' if result['diverged'] else ''}, "
                  f"{result['ms_per_step']:.0f} ms/step", flush=True)
            return job, result

        def run_all(jobs):
            print(f"{len(jobs)} runs of {args.steps} steps, {args.jobs} at a time", flush=True)
            with ThreadPoolExecutor(args.jobs) as pool:
                return list(pool.map(one, jobs))

        # Stage 1: every learning rate of each grid on the tuning seeds.
        done = run_all([(name, lr, seed) for name in names for lr in grids[name]
                        for seed in range(tune_seeds)])

        def runs_of(name, lr):
            return sorted((r for (n, l, _), r in done if n == name and l == lr),
                          key=lambda r: r["seed"])

        first_order = [n for n in names if not n.startswith("kfac")] or names
        # The reference: the first-order (name, lr) with the lowest median final loss.
        ref_name, ref_lr = min(((n, lr) for n in first_order for lr in grids[n]),
                               key=lambda k: statistics.median(map(final_loss, runs_of(*k))))
        tune_targets = targets_from(runs_of(ref_name, ref_lr), args.targets)

        def score(name, lr):
            """Median steps to the last target, then median final loss."""
            runs = runs_of(name, lr)
            return (median_or_inf(None if r["diverged"] else evals_to_target(r["evals"],
                                                                             tune_targets[-1])
                                  for r in runs),
                    statistics.median(map(final_loss, runs)))

        chosen = {n: ref_lr if n == ref_name else min(grids[n], key=lambda lr: score(n, lr))
                  for n in names}
        # Stage 2: the other seeds at each optimizer's chosen learning rate.
        done += run_all([(name, chosen[name], seed) for name in names
                         for seed in range(tune_seeds, args.seeds)])

    ref_runs = runs_of(ref_name, ref_lr)
    targets = targets_from(ref_runs, args.targets)
    primary = targets[-1]
    ref_by_seed = {r["seed"]: r["evals"] for r in ref_runs}
    for (name, lr, seed), r in done:
        r["evals_to"] = {t: None if r["diverged"] else evals_to_target(r["evals"], t)
                         for t in targets}
        r["spike"] = largest_spike(r["evals"], args.spike_after)
        r["excess"] = excess_over(r["evals"], ref_by_seed.get(r["seed"], []), args.spike_after)
    results = {name: {"lr": chosen[name], "runs": runs_of(name, chosen[name]),
                      "grid": {lr: runs_of(name, lr) for lr in grids[name]}} for name in names}
    for r in results.values():
        r["median"] = {t: median_or_inf([x["evals_to"][t] for x in r["runs"]]) for t in targets}

    print(f"\n{args.config} (vocabulary {model_vocab}), batch {args.batch} x 64"
          f"{f', decoder at {args.predictions} positions' if args.predictions else ''}, "
          f"{args.steps} steps; learning rates tuned on {tune_seeds} seed(s), "
          f"{args.seeds} seeds at the chosen one")
    print("grid (tuning seeds): held-out at the end / steps to "
          f"{tune_targets[-1]} (the tuning target), median")
    for name in names:
        print(f"  {name:<12} " + "   ".join(
            f"lr {lr:g}: {statistics.median(map(final_loss, runs_of(name, lr))):.3f} / "
            f"{score(name, lr)[0]}" for lr in grids[name]))
    print(f"\ntargets from {ref_name} at lr {ref_lr:g}; held-out loss every {args.eval_every} "
          f"steps; time = steps x the run's ms/step")
    header = f"{'optimizer':<12} {'lr':>7}"
    for t in targets:
        header += f" {'to ' + str(t):>9} {'ratio':>6}"
    header += f" {'s to ' + str(primary):>10} {'spike':>7} {'excess':>7} {'ms/step':>8}"
    print(header)
    base = {t: results[ref_name]["median"][t] for t in targets}
    ref_ms = statistics.median(x["ms_per_step"] for x in results[ref_name]["runs"])
    for name in names:
        r = results[name]
        line = f"{name:<12} {r['lr']:>7.0e}"
        for t in targets:
            ratio = r["median"][t] / base[t] if base[t] not in (0, float("inf")) else float("nan")
            line += f" {r['median'][t]:>9} {ratio:>6.2f}"
        spikes = [x["spike"] for x in r["runs"]]
        excess = [x["excess"] for x in r["runs"]]
        ms = statistics.median(x["ms_per_step"] for x in r["runs"])
        seconds = r["median"][primary] * ms / 1e3
        line += (f" {seconds:>10.0f} {max(spikes):>7.3f} {100 * statistics.median(excess):>6.1f}%"
                 f" {ms:>8.1f}")
        print(line)
        print(f"{'':<12} per seed: to {primary} "
              + ", ".join(str(x["evals_to"][primary] or "-") for x in r["runs"])
              + "; held-out " + ", ".join(f"{final_loss(x):.3f}" for x in r["runs"])
              + "; spike " + ", ".join(f"{x['spike']:.3f}" for x in r["runs"])
              + "; excess " + ", ".join(f"{100 * x['excess']:.1f}%" for x in r["runs"])
              + f"; time ratio {seconds / (base[primary] * ref_ms / 1e3):.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"targets": targets, "reference": [ref_name, ref_lr],
                                               "results": results}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
