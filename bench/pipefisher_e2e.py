#!/usr/bin/env python3
"""PipeFisher's claim, measured (issue 38, item 1): time to a target held-out
loss on real text with K-FAC in the bubbles of a running pipeline, against
AdamW on the same pipeline; and the staleness study (item 2): single-process
steps to AdamW's final held-out loss with stale inverses.

Every run is `mpirun -np D pf-train MODEL --corpus C --pipeline "stages=D
schedule=S microbatches=N ..."` (one rank per stage, one runtime thread per
rank) to --steps on the same text, with the same batches and masks (the same
--seed), the held-out loss every --eval-every steps. Configurations:
  * adamw         AdamW on the pipeline;
  * kfac-bubbles  K-FAC + AdamW with the inverses in the bubbles at the
                  scheduler's K (`--kfac --kfac-refresh-warmup W --pipeline
                  "... kfac=bubbles"`, the default refresh policy: the
                  smallest window within max-overhead, capped by
                  max-refresh). pf-train's --pipeline has no throughput
                  refresh policy (that is pf-sched's `--refresh throughput`),
                  so there is no entry for it;
  * kfac-step     K-FAC + AdamW with all K-FAC work every step on the same
                  pipeline (`--kfac --pipeline "... kfac=step"`: a refresh at
                  every step);
  * kfac-single   the reference: single-process K-FAC + AdamW with a refresh
                  at every step (`pf-train --kfac --micro-batches N`, no
                  mpirun: the pipeline's arithmetic, kfac-step's within
                  rounding). It does not depend on the schedule; its runs
                  appear in every schedule's table.
K-FAC uses pf-train's defaults otherwise (grafted, damping 1e-5, decay 0.5,
KL-clip 1e-3). Schedules gpipe, 1f1b and chimera by default.

The staleness study (`--only staleness`, which stands for all six; not run
by default): single-process `pf-train --micro-batches N` runs, the same
batches and masks, independent of the schedule (key schedule "single",
d1), the K-FAC ones with `--kfac-refresh-warmup W` (--refresh-warmup, 50:
inverses refreshed at every one of the first W steps; -wW in their keys):
  * adamw-single    AdamW, single process: the study's target per seed
                    (the default pipeline mode is its arithmetic within
                    rounding: seed 0's held-out losses equal gpipe's and
                    1f1b's pipelined AdamW's to 4 decimals at every
                    evaluation; Chimera's end 0.0045 lower);
  * kfac-single     as above, a refresh at every step (`--kfac-refresh 1`);
  * kfac-refresh4   `--kfac-refresh 4`: after W, factors every step, the
                    inverses refreshed from them every 4 steps;
  * kfac-refresh16  `--kfac-refresh 16`: every 16 steps;
  * kfac-window2    `--kfac-window 2`: the bubbles' arithmetic with K = 2
                    (kfac-bubbles' K on gpipe and 1f1b, D = 2, N = 4, BERT-
                    mini): after W, windows of K steps, the factors updated
                    at a window's first step only, their inverses used in
                    the next window (so the first window's preconditioning
                    uses the warm-up's last inverses);
  * kfac-window10   `--kfac-window 10`: K = 10 (kfac-bubbles' K on chimera).
The report's "Staleness" section checks the kept kfac-bubbles runs' K
against these.

Text: the King James Bible as bench/text_convergence.py builds it (Debian's
bible-kjv, installed by `scripts/setup.sh --bench`; a chapter per document,
a WordPiece vocabulary learnt from it), or --text FILE... with a vocabulary
learnt from those files. Sequences of 64 tokens, the last 256 held out.
Model: BERT-mini (--config) with a --model-vocab-row output layer (30522, as
bert-base-uncased; the rows past the learnt vocabulary are never seen),
batch 32, 10 warm-up steps then linear decay. Learning rates: 1e-3 for every
configuration, --lr NAME=LR[,LR...] for one, or --grid for
bench/text_convergence.py's grids (adamw's for adamw, kfac+adamw's for the
K-FAC entries); with several, AdamW's is the one with the lowest median
final held-out loss and the others' the one reaching AdamW's final loss in
the fewest steps (then the lowest final loss).

    PYTHONPATH=python python3 bench/pipefisher_e2e.py [--config mini] [--ranks 2]
        [--microbatches 4] [--steps 200] [--seeds 3] [--schedules gpipe,1f1b,chimera]
        [--only adamw,kfac-bubbles,kfac-step,kfac-single|staleness|NAME,...] [--lr NAME=LR ...] [--grid]
        [--text FILE ...] [--workdir DIR] [--runs-dir DIR] [--max-hours H]
        [--report-md OUT.md] [--plots DIR] [--json OUT.json] [--contended] [--dry-run]

The whole table (3 schedules x 3 pipelined configurations x 3 seeds, and the
single-process reference) takes many hours on the 2-core machine: build it
in pieces with --runs-dir, which keeps each run's result as JSON under a key
naming every setting (config, model vocabulary, text, configuration,
schedule, ranks, micro-batches, lr, seed, steps, batch, eval-every,
predictions; kfac-bubbles also W) and reuses it; --only and --schedules
choose what runs, --max-hours stops starting runs after that long, and the
report also shows the kept runs of the other configurations on the chosen
schedules. Runs go seed by seed, so the first invocations give a table of
fewer seeds. --workdir keeps the text, corpus and model for the next
invocation. D = 4 (--ranks 4) is oversubscribed on a 2-core machine: for
correctness only, its times mean nothing.

Report, per schedule, the target being AdamW's final held-out loss on that
schedule (median of its seeds):
  * final held-out: the held-out loss after the last step, median (per seed);
  * steps to target: the first step whose held-out loss is at most the
    target, linearly interpolated between evaluations ("not reached" when
    none is), median (per seed), and its ratio to AdamW's;
  * s to target: those steps x the run's median ms/step (pf-train leaves the
    evaluations out of ms/step), median (per seed), ratio to AdamW's;
  * spike: the most the held-out loss rises above its lowest value so far,
    after step --spike-after, largest of the seeds (per seed);
  * ms/step: the median of the runs' progress lines (every 10 steps, after
    the first), median of the seeds, ratio to AdamW's;
  * K: kfac-bubbles' window (steps per refresh) as pf-train's plan line
    gives it, per seed.
Each run also keeps its elapsed wall time (with the evaluations and the
compilation) in its JSON. --contended marks the runs of an invocation on a
shared machine (their JSON's "contended"): the tables leave their times out
("–") and the plots' seconds panels their lines.

The "Staleness" section (when any staleness run is kept), per seed the target
being that seed's adamw-single final held-out loss (one source for every
seed; the section also gives seed 0's pipelined AdamW final losses): per
configuration, final held-out loss, steps to target (interpolated, as
above), their ratio to adamw-single's steps (to its own final loss: the
full run, unless its loss was lower before), median of the seeds (per
seed), and the largest spike; no times. Its plot, pipefisher-e2e-staleness-
s<seed>.svg (the lowest seed kept): held-out loss against steps, all of them
and from step W on, a line per configuration. A plot per schedule (SVG, next to --report-md or
in --plots): held-out loss against steps and against seconds (step x the
run's median ms/step), a line per run.

Not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "python"))
sys.path.insert(0, str(BENCH))
from pipefisher import make_bert_model, save_model  # noqa: E402
from pipefisher.tools import tool  # noqa: E402
from text_convergence import OPTIMIZERS as TEXT_OPTIMIZERS  # noqa: E402
from text_convergence import (final_loss, kjv_text, largest_spike, make_corpus,  # noqa: E402
                              median_or_inf)


@dataclass(frozen=True)
class Optimizer:
    flags: tuple[str, ...]  # pf-train's flags
    pipeline: str | None    # --pipeline's K-FAC option; None: single process
    grid: str               # the bench/text_convergence.py entry --grid takes
    label: str
    warmup: bool = False    # takes --kfac-refresh-warmup W (and -wW in its key)


OPTIMIZERS = {
    "adamw": Optimizer(("--optimizer", "adamw"), "", "adamw", "AdamW"),
    "kfac-bubbles": Optimizer(("--optimizer", "adamw", "--kfac"), "kfac=bubbles", "kfac+adamw",
                              "K-FAC in the bubbles"),
    # kfac-step and kfac-single: --kfac-refresh's default, 1 (a refresh at every step).
    "kfac-step": Optimizer(("--optimizer", "adamw", "--kfac"), "kfac=step", "kfac+adamw",
                           "K-FAC every step"),
    "kfac-single": Optimizer(("--optimizer", "adamw", "--kfac"), None, "kfac+adamw",
                             "K-FAC every step, single process"),
    # The staleness study (issue 38 item 2): single process, schedule-independent.
    "adamw-single": Optimizer(("--optimizer", "adamw"), None, "adamw", "AdamW, single process"),
    "kfac-refresh4": Optimizer(("--optimizer", "adamw", "--kfac", "--kfac-refresh", "4"), None,
                               "kfac+adamw", "K-FAC, refresh every 4 steps", warmup=True),
    "kfac-refresh16": Optimizer(("--optimizer", "adamw", "--kfac", "--kfac-refresh", "16"), None,
                                "kfac+adamw", "K-FAC, refresh every 16 steps", warmup=True),
    "kfac-window2": Optimizer(("--optimizer", "adamw", "--kfac", "--kfac-window", "2"), None,
                              "kfac+adamw", "K-FAC, bubbles' window K = 2", warmup=True),
    "kfac-window10": Optimizer(("--optimizer", "adamw", "--kfac", "--kfac-window", "10"), None,
                               "kfac+adamw", "K-FAC, bubbles' window K = 10", warmup=True),
}
# The per-schedule tables' configurations (item 1), and the staleness study's (item 2).
E2E = ("adamw", "kfac-bubbles", "kfac-step", "kfac-single")
STALENESS = ("adamw-single", "kfac-single", "kfac-refresh4", "kfac-refresh16", "kfac-window2",
             "kfac-window10")
SINGLE = "single"  # the schedule of the single-process runs
COLORS = {"adamw": "#1f77b4", "kfac-bubbles": "#d62728", "kfac-step": "#2ca02c",
          "kfac-single": "#7f7f7f", "adamw-single": "#17becf", "kfac-refresh4": "#ff7f0e",
          "kfac-refresh16": "#9467bd", "kfac-window2": "#8c564b", "kfac-window10": "#e377c2"}


@dataclass(frozen=True)
class Job:
    name: str
    schedule: str
    lr: float
    seed: int


@dataclass(frozen=True)
class Inputs:
    text: str          # the text's name in the keys
    texts: list[str]   # its files (empty: the KJV, written on first use)
    corpus: Path
    model: Path


def mpirun(ranks: int) -> list[str]:
    """`mpirun -np D`, oversubscribed (and allowed as root), as
    bench/pipeline_setup.py's mpirun_two_ranks()."""
    path = shutil.which("mpirun")
    if not path:
        raise SystemExit("mpirun not found (scripts/setup.sh installs Open MPI)")
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return [path, "--oversubscribe", *root, "-np", str(ranks)]


def text_name(files: list[str] | None) -> str:
    """"kjv", or the first file's name, the number of others and a hash of
    the contents."""
    if not files:
        return "kjv"
    digest = hashlib.sha1()
    for f in files:
        digest.update(Path(f).read_bytes())
    stem = re.sub(r"[^A-Za-z0-9_.]", "_", Path(files[0]).stem)[:32]
    more = f"+{len(files) - 1}" if len(files) > 1 else ""
    return f"{stem}{more}-{digest.hexdigest()[:8]}"


def inputs_for(args, work: Path) -> Inputs:
    text = text_name(args.text)
    corpus_dir = work / f"{text}-v{args.model_vocab}"
    return Inputs(text, args.text or [], corpus_dir / "corpus.npz",
                  work / f"{args.config}-v{args.model_vocab}.onnx")


def prepare(args, work: Path, inputs: Inputs) -> None:
    """Writes the corpus (its vocabulary learnt, at most --model-vocab
    pieces) and the model unless the work directory has them."""
    if not inputs.corpus.exists():
        inputs.corpus.parent.mkdir(parents=True, exist_ok=True)  # with the work directory
        start = time.monotonic()
        texts = inputs.texts or [str(kjv_text(work / "kjv.txt"))]
        make_corpus(inputs.corpus.parent, texts, None, args.model_vocab)
        print(f"corpus built in {time.monotonic() - start:.0f} s", flush=True)
    vocab = int(np.load(inputs.corpus)["vocab_size"])
    if vocab > args.model_vocab:
        sys.exit(f"{inputs.corpus}: vocabulary {vocab} > --model-vocab {args.model_vocab}")
    if not inputs.model.exists():
        save_model(make_bert_model(args.config, vocab_size=args.model_vocab, seed=0),
                   inputs.model)


def run_key(args, text: str, job: Job) -> str:
    ranks = 1 if job.schedule == SINGLE else args.ranks
    key = (f"{args.config}-v{args.model_vocab}-{text}-{job.name}-{job.schedule}-d{ranks}"
           f"-m{args.microbatches}-lr{job.lr:g}-s{job.seed}-n{args.steps}-b{args.batch}"
           f"-e{args.eval_every}-p{args.predictions}")
    if job.name == "kfac-bubbles" or OPTIMIZERS[job.name].warmup:
        key += f"-w{args.refresh_warmup}"
    return key


def command(args, inputs: Inputs, job: Job) -> list[str]:
    opt = OPTIMIZERS[job.name]
    cmd = [str(tool("pf-train")), str(inputs.model), "--corpus", str(inputs.corpus),
           "--batch", str(args.batch), "--steps", str(args.steps), "--lr", f"{job.lr:g}",
           "--seed", str(job.seed), "--log-every", "10", "--num-threads", "1",
           "--eval-every", str(args.eval_every), "--predictions", str(args.predictions),
           *opt.flags]
    if opt.warmup:
        cmd += ["--kfac-refresh-warmup", str(args.refresh_warmup)]
    if opt.pipeline is None:
        return [*cmd, "--micro-batches", str(args.microbatches)]
    if opt.pipeline == "kfac=bubbles":
        cmd += ["--kfac-refresh-warmup", str(args.refresh_warmup)]
    spec = f"stages={args.ranks} schedule={job.schedule} microbatches={args.microbatches}"
    return [*mpirun(args.ranks), *cmd, "--pipeline", f"{spec} {opt.pipeline}".strip()]


def execute(cmd: list[str], timeout: float) -> tuple[str, str, int | None]:
    """Runs `cmd` in its own process group; on a timeout (returncode None) or
    Ctrl-C, ends that group (mpirun and its ranks)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        return out, err, proc.returncode
    except BaseException as stop:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        if not isinstance(stop, subprocess.TimeoutExpired):
            raise
        return out, err + f"\ntimed out after {timeout:.0f} s", None


def train(cmd: list[str], job: Job, timeout: float, contended: bool = False) -> dict:
    """One run: held-out losses by step, median ms/step, wall time (the
    progress and eval lines parsed as bench/text_convergence.py's run())."""
    start = time.monotonic()
    out, err, rc = execute(cmd, timeout)
    wall = time.monotonic() - start
    ms = [float(x) for x in re.findall(r"ms/step\s+([0-9.]+)", out)]
    evals = dict((int(a), float(b))
                 for a, b in re.findall(r"eval\s+(\d+)\s+loss\s+([0-9.naninf]+)", out))
    window = re.search(r"windows of (\d+) step\(s\) from step (\d+)", out)
    return {"name": job.name, "schedule": job.schedule, "lr": job.lr, "seed": job.seed,
            "cmd": shlex.join(cmd), "diverged": rc != 0,
            "nonfinite": "the loss is" in err, "evals": sorted(evals.items()),
            "ms_per_step": statistics.median(ms[1:] or ms) if ms else float("nan"),
            "wall_s": wall, "window": int(window.group(1)) if window else None,
            "contended": contended, "stderr": err[-2000:] if rc != 0 else ""}


def steps_to(evals, target: float) -> float | None:
    """The first step whose held-out loss is at most `target`, linearly
    interpolated from the evaluation before; None when none is."""
    before = None
    for step, loss in evals:
        if loss <= target:
            if before is None or not math.isfinite(before[1]):
                return float(step)
            s0, l0 = before
            return s0 + (step - s0) * (l0 - target) / (l0 - loss)
        before = (step, loss)
    return None


def summarize(runs: list[dict], target: float | None, spike_after: int) -> dict:
    per = []
    for r in runs:
        if target is None:
            steps = float("nan")
        else:
            steps = None if r["diverged"] else steps_to(r["evals"], target)
        # A contended run's time (--contended) is left out: nan, shown as "–".
        contended = bool(r.get("contended"))
        ms = float("nan") if contended else r["ms_per_step"]
        per.append({"seed": r["seed"], "final": final_loss(r), "steps": steps,
                    "seconds": None if steps is None else steps * ms / 1e3,
                    "spike": largest_spike(r["evals"], spike_after),
                    "ms": ms, "window": r["window"], "wall_s": r["wall_s"],
                    "contended": contended})
    timed = [p for p in per if not p["contended"]]
    return {"lr": runs[0]["lr"], "seeds": per,
            "final": statistics.median(p["final"] for p in per),
            "steps": median_or_inf(p["steps"] for p in per),
            "seconds": median_or_inf(p["seconds"] for p in timed) if timed else float("nan"),
            "spike": max(p["spike"] for p in per),
            "ms": statistics.median(p["ms"] for p in timed) if timed else float("nan")}


def choose(by_lr: dict[float, list[dict]], target: float | None, spike_after: int) -> dict:
    """The learning rate reaching `target` in the fewest steps (then the
    lowest final loss; only that without a target)."""
    rows = [summarize(runs, target, spike_after) for runs in by_lr.values()]
    return min(rows, key=lambda s: (s["steps"] if target is not None else 0, s["final"]))


def schedule_summary(schedule: str, results: dict[Job, dict], spike_after: int) -> dict:
    """Per configuration on `schedule`: the chosen learning rate's summary;
    the target: AdamW's final held-out loss (median of the seeds)."""
    def by_lr(name):
        where = SINGLE if OPTIMIZERS[name].pipeline is None else schedule
        grouped: dict[float, list[dict]] = {}
        for job, r in sorted(results.items(), key=lambda item: item[0].seed):
            if job.name == name and job.schedule == where:
                grouped.setdefault(job.lr, []).append(r)
        return grouped

    rows, target, adamw = {}, None, by_lr("adamw")
    if adamw:
        best = choose(adamw, None, spike_after)
        target = best["final"] if math.isfinite(best["final"]) else None
        rows["adamw"] = summarize(adamw[best["lr"]], target, spike_after)
    for name in E2E:
        if name != "adamw" and by_lr(name):
            rows[name] = choose(by_lr(name), target, spike_after)
    return {"target": target, "rows": rows}


def fmt(x, spec: str, missing: str) -> str:
    """`x` formatted; `missing` for None and infinity (not reached, failed)."""
    if x is None or x == float("inf"):
        return missing
    return "–" if math.isnan(x) else format(x, spec)


def cell(median, values, spec: str, missing: str = "failed") -> str:
    return (f"{fmt(median, spec, missing)} "
            f"({', '.join(fmt(v, spec, missing) for v in values)})")


def ratio(x: float, base: float) -> str:
    if not (math.isfinite(x) and math.isfinite(base) and base > 0):
        return "–"
    return f"{x / base:.2f}"


def markdown(schedule: str, args, summary: dict) -> str:
    rows, target = summary["rows"], summary["target"]
    where = f"D = {args.ranks}, N = {args.microbatches}"
    if target is None:
        head = f"### {schedule} ({where}): no target (no finished AdamW run)"
    else:
        head = (f"### {schedule} ({where}): target {target:.4f}, AdamW's final held-out "
                f"loss (median of {len(rows['adamw']['seeds'])} seed(s))")
    lines = [head, "",
             "| configuration | lr | seeds | final held-out (per seed) | steps to target "
             "(per seed) | ratio | s to target (per seed) | ratio | spike (per seed) | "
             "ms/step | ratio | K |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    base = rows.get("adamw")
    for name, s in rows.items():
        per = s["seeds"]
        windows = ", ".join(str(p["window"]) for p in per if p["window"] is not None)
        lines.append(
            f"| {OPTIMIZERS[name].label} | {s['lr']:g} | {len(per)} | "
            f"{cell(s['final'], [p['final'] for p in per], '.4f')} | "
            f"{cell(s['steps'], [p['steps'] for p in per], '.0f', 'not reached')} | "
            f"{ratio(s['steps'], base['steps']) if base else '–'} | "
            f"{cell(s['seconds'], [p['seconds'] for p in per], '.0f', 'not reached')} | "
            f"{ratio(s['seconds'], base['seconds']) if base else '–'} | "
            f"{cell(s['spike'], [p['spike'] for p in per], '.3f')} | "
            f"{fmt(s['ms'], '.1f', '–')} | "
            f"{ratio(s['ms'], base['ms']) if base else '–'} | {windows} |")
    if any(p["contended"] for s in rows.values() for p in s["seeds"]):
        lines += ["", "–: a run on a shared machine (`--contended`), its time left out of "
                      "the medians."]
    return "\n".join(lines) + "\n"


def staleness_summary(results: dict[Job, dict], spike_after: int, early: int) -> dict:
    """The staleness study: per seed, the target is that seed's adamw-single
    final held-out loss; per configuration (the learning rate reaching it in
    the fewest median steps, adamw-single's the lowest median final loss),
    its steps to the target, their ratio to adamw-single's, the final
    held-out loss and the largest spike."""
    def by_lr(name):
        grouped: dict[float, list[dict]] = {}
        for job, r in sorted(results.items(), key=lambda item: item[0].seed):
            if job.name == name and job.schedule == SINGLE:
                grouped.setdefault(job.lr, []).append(r)
        return grouped

    def rows_of(runs, targets, base):
        per = []
        for r in runs:
            target = targets.get(r["seed"])
            steps = (float("nan") if target is None else
                     None if r["diverged"] else steps_to(r["evals"], target))
            base_steps = base.get(r["seed"])
            per.append({"seed": r["seed"], "final": final_loss(r), "steps": steps,
                        "ratio": (steps / base_steps if steps is not None and base_steps
                                  and math.isfinite(steps) else
                                  float("inf") if steps is None else float("nan")),
                        "spike": largest_spike(r["evals"], spike_after)})
        with_target = [p for p in per if not (p["steps"] is not None and math.isnan(p["steps"]))]
        return {"lr": runs[0]["lr"], "seeds": per,
                "final": statistics.median(p["final"] for p in per),
                "steps": (median_or_inf(p["steps"] for p in with_target) if with_target
                          else float("nan")),
                "ratio": (statistics.median(p["ratio"] for p in with_target) if with_target
                          else float("nan")),
                "spike": max(p["spike"] for p in per)}

    targets, base, rows = {}, {}, {}
    adamw = by_lr("adamw-single")
    if adamw:
        lr = min(adamw, key=lambda lr: statistics.median(final_loss(r) for r in adamw[lr]))
        targets = {r["seed"]: final_loss(r) for r in adamw[lr]
                   if math.isfinite(final_loss(r))}
        base = {r["seed"]: steps_to(r["evals"], targets[r["seed"]]) for r in adamw[lr]
                if r["seed"] in targets}
        rows["adamw-single"] = rows_of(adamw[lr], targets, base)
    for name in STALENESS:
        if name != "adamw-single" and by_lr(name):
            rows[name] = min((rows_of(runs, targets, base) for runs in by_lr(name).values()),
                             key=lambda s: (s["steps"] if targets else 0, s["final"]))
    # Each final loss, and the held-out loss at step `early` (the first
    # evaluation with stale inverses), against the same seed's kfac-single's
    # (a refresh at every step).
    runs_by = {(job.name, job.lr, job.seed): r for job, r in results.items()
               if job.schedule == SINGLE}

    def at(name, lr, seed, step):
        r = runs_by.get((name, lr, seed))
        return dict(r["evals"]).get(step, float("nan")) if r and not r["diverged"] else float("nan")

    fresh = rows.get("kfac-single")
    for name, s in rows.items():
        for p in s["seeds"]:
            if fresh and any(q["seed"] == p["seed"] for q in fresh["seeds"]):
                p["vs_fresh"] = p["final"] - next(q["final"] for q in fresh["seeds"]
                                                  if q["seed"] == p["seed"])
                p["early_vs_fresh"] = (at(name, s["lr"], p["seed"], early)
                                       - at("kfac-single", fresh["lr"], p["seed"], early))
            else:
                p["vs_fresh"] = p["early_vs_fresh"] = float("nan")
        for field in ("vs_fresh", "early_vs_fresh"):
            paired = [p[field] for p in s["seeds"] if math.isfinite(p[field])]
            s[field] = statistics.median(paired) if paired else float("nan")
    return {"targets": targets, "rows": rows, "early": early}


STALENESS_NOTES = {
    "adamw-single": "– (first order)",
    "kfac-single": "refreshed every step (`--kfac-refresh 1`)",
    "kfac-refresh4": "every step to W, then every 4 steps (`--kfac-refresh 4`)",
    "kfac-refresh16": "every step to W, then every 16 steps (`--kfac-refresh 16`)",
    "kfac-window2": "every step to W, then windows of 2 steps: factors at a window's first "
                    "step, used in the next window (`--kfac-window 2`)",
    "kfac-window10": "every step to W, then windows of 10 steps (`--kfac-window 10`)",
}


def staleness_markdown(args, summary: dict, results: dict[Job, dict]) -> str:
    rows, targets = summary["rows"], summary["targets"]
    lines = [f"### Staleness (single process, `--micro-batches {args.microbatches}`, "
             f"W = `--kfac-refresh-warmup` {args.refresh_warmup}): steps to AdamW's final "
             "held-out loss", ""]
    if targets:
        lines.append("Target per seed: the final held-out loss of single-process AdamW "
                     "(adamw-single) of that seed, for every seed (" +
                     ", ".join(f"seed {s}: {t:.4f}" for s, t in sorted(targets.items())) +
                     "); AdamW's steps are those to its own final loss (the full run).")
    else:
        lines.append("No target: no finished single-process AdamW (adamw-single) run.")
    pipe = {job.schedule: r for job, r in results.items()
            if job.name == "adamw" and job.seed == 0 and not r["diverged"]}
    if 0 in targets and pipe:
        lines.append("Seed 0's target against the pipeline's AdamW (D = "
                     f"{args.ranks}) final held-out loss: " + ", ".join(
                         f"{sched} {final_loss(r):.4f} ({targets[0] - final_loss(r):+.4f})"
                         for sched, r in sorted(pipe.items())) + ".")
    windows = {}
    for job, r in results.items():
        if job.name == "kfac-bubbles" and r["window"] is not None:
            windows.setdefault(job.schedule, set()).add(r["window"])
    if windows:
        lines.append("K of the kept kfac-bubbles runs (the scheduler's window, which "
                     "kfac-window2 and kfac-window10 reproduce): " + ", ".join(
                         f"{sched} {'/'.join(map(str, sorted(ks)))}"
                         for sched, ks in sorted(windows.items())) + ".")
    lines += ["", "| configuration | inverses | lr | seeds | final held-out (per seed) | "
                  "steps to target (per seed) | ratio to AdamW (per seed) | final − refresh-1's "
                  f"(per seed) | at step {summary['early']} − refresh-1's (per seed) | "
                  "spike (per seed) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in rows.items():
        per = s["seeds"]
        lines.append(
            f"| {OPTIMIZERS[name].label} | {STALENESS_NOTES[name]} | {s['lr']:g} | {len(per)} | "
            f"{cell(s['final'], [p['final'] for p in per], '.4f')} | "
            f"{cell(s['steps'], [p['steps'] for p in per], '.1f', 'not reached')} | "
            f"{cell(s['ratio'], [p['ratio'] for p in per], '.3f', 'not reached')} | "
            f"{cell(s['vs_fresh'], [p['vs_fresh'] for p in per], '+.4f')} | "
            f"{cell(s['early_vs_fresh'], [p['early_vs_fresh'] for p in per], '+.4f')} | "
            f"{cell(s['spike'], [p['spike'] for p in per], '.3f')} |")
    lines += ["", "Steps interpolated between held-out evaluations (every "
                  f"{args.eval_every} steps); ratio: the median of the per-seed ratios; "
                  "final − refresh-1's: the final held-out loss less that of the same seed's "
                  "K-FAC with a refresh at every step (kfac-single); at step "
                  f"{summary['early']} − refresh-1's: the same at the first evaluation after "
                  "the refresh warm-up, where the first stale inverses (the previous window's) "
                  "have preconditioned. No "
                  "time columns: these runs' times were not all measured on an idle machine "
                  "(`--contended`), and the single-process step is not the pipeline's."]
    return "\n".join(lines) + "\n"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    raw = (hi - lo) / count if hi > lo else 1.0
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if step * m >= raw)
    return [i * step for i in range(math.ceil(lo / step), math.floor(hi / step) + 1)]


def svg_panel(x0: float, series, xlabel: str, ylim, clip: str,
              xmin: float = 0.0) -> list[str]:
    """One 420 x 300 plot at (x0, 40): axes, ticks and a polyline per series
    (x from `xmin`)."""
    w, h, top = 420, 300, 40
    xs = [x for _, _, pts in series for x, _ in pts]
    xmax = max(xs) or 1.0
    ylo, yhi = ylim

    def px(x):
        return x0 + w * (x - xmin) / (xmax - xmin)

    def py(y):
        return top + h * (yhi - y) / (yhi - ylo)

    out = [f'<clipPath id="{clip}"><rect x="{x0}" y="{top}" width="{w}" height="{h}"/>'
           '</clipPath>',
           f'<rect x="{x0}" y="{top}" width="{w}" height="{h}" fill="none" stroke="black"/>',
           f'<text x="{x0 + w / 2}" y="{top + h + 36}" text-anchor="middle">{xlabel}</text>']
    for t in nice_ticks(xmin, xmax):
        out.append(f'<text x="{px(t):.1f}" y="{top + h + 16}" text-anchor="middle">{t:g}</text>')
    for t in nice_ticks(ylo, yhi):
        out.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{x0 - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
    for _, color, pts in series:
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts if math.isfinite(y))
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" '
                   f'stroke-width="1.5" clip-path="url(#{clip})"/>')
    return out


def plot(path: Path, title: str, runs: dict[str, list[dict]]) -> None:
    """Held-out loss against steps and against seconds, a line per run."""
    by_step = [(name, COLORS[name], [(s, loss) for s, loss in r["evals"]])
               for name, rs in runs.items() for r in rs]
    by_time = [(name, COLORS[name], [(s * r["ms_per_step"] / 1e3, loss) for s, loss in r["evals"]])
               for name, rs in runs.items() for r in rs
               if math.isfinite(r["ms_per_step"]) and not r.get("contended")]
    # The y range leaves out the loss before the first step (about ln(vocab)).
    ys = [y for _, _, pts in by_step for x, y in pts if x > 0 and math.isfinite(y)]
    ys = ys or [y for _, _, pts in by_step for _, y in pts if math.isfinite(y)] or [0.0, 1.0]
    pad = 0.05 * (max(ys) - min(ys) or 1.0)
    ylim = (min(ys) - pad, max(ys) + pad)
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="420" '
             'font-family="sans-serif" font-size="12">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="500" y="20" text-anchor="middle" font-size="14">{title}</text>',
             '<text x="20" y="190" transform="rotate(-90 20 190)" text-anchor="middle">'
             'held-out loss</text>',
             *svg_panel(70, by_step, "step", ylim, "steps"),
             *svg_panel(560, by_time, "seconds (step x median ms/step)", ylim, "seconds")]
    for i, name in enumerate(runs):
        x = 30 + 230 * i
        parts.append(f'<line x1="{x}" x2="{x + 24}" y1="400" y2="400" stroke="{COLORS[name]}" '
                     'stroke-width="2"/>')
        parts.append(f'<text x="{x + 30}" y="404">{OPTIMIZERS[name].label}</text>')
    path.write_text("\n".join([*parts, "</svg>"]) + "\n", encoding="utf-8")


def plot_staleness(path: Path, title: str, runs: dict[str, dict], start: int) -> None:
    """The staleness runs of one seed: held-out loss against steps, all of
    them and from step `start` (the refresh warm-up's end) on, a line per
    configuration."""
    def series(first):
        return [(name, COLORS[name], [(s, loss) for s, loss in r["evals"] if s >= first])
                for name, r in runs.items()]

    def ylim(first):
        ys = [y for _, _, pts in series(first) for x, y in pts
              if x > 0 and math.isfinite(y)] or [0.0, 1.0]
        pad = 0.05 * (max(ys) - min(ys) or 1.0)
        return (min(ys) - pad, max(ys) + pad)

    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="1000" height="450" '
             'font-family="sans-serif" font-size="12">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="500" y="20" text-anchor="middle" font-size="14">{title}</text>',
             '<text x="20" y="190" transform="rotate(-90 20 190)" text-anchor="middle">'
             'held-out loss</text>',
             *svg_panel(70, series(0), "step", ylim(1), "all"),
             *svg_panel(560, series(start), f"step (from {start})", ylim(start), "late",
                        xmin=start)]
    for i, name in enumerate(runs):
        x, y = 30 + 320 * (i % 3), 400 + 22 * (i // 3)
        parts.append(f'<line x1="{x}" x2="{x + 24}" y1="{y}" y2="{y}" stroke="{COLORS[name]}" '
                     'stroke-width="2"/>')
        parts.append(f'<text x="{x + 30}" y="{y + 4}">{OPTIMIZERS[name].label}</text>')
    path.write_text("\n".join([*parts, "</svg>"]) + "\n", encoding="utf-8")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", nargs="+", help="your own text files (default: the KJV)")
    parser.add_argument("--model-vocab", type=int, default=30522,
                        help="the model's vocabulary; the learnt one has at most this many "
                             "pieces (30522)")
    parser.add_argument("--config", default="mini")
    parser.add_argument("--ranks", type=int, default=2, help="pipeline stages D (2)")
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--schedules", default="gpipe,1f1b,chimera")
    parser.add_argument("--only", help="comma-separated configurations to run (default: "
                                       f"{', '.join(E2E)}; 'staleness' stands for "
                                       f"{', '.join(STALENESS)}; known: {', '.join(OPTIMIZERS)})")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--predictions", type=int, default=0,
                        help="pf-train --predictions P (0: the decoder everywhere)")
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--refresh-warmup", type=int, default=50,
                        help="kfac-bubbles' --kfac-refresh-warmup (pf-train's default, 50)")
    parser.add_argument("--spike-after", type=int, default=20)
    parser.add_argument("--lr", action="append", default=[], metavar="NAME=LR[,LR...]",
                        help="one configuration's learning rates; repeatable")
    parser.add_argument("--grid", action="store_true",
                        help="bench/text_convergence.py's learning-rate grids (default: 1e-3)")
    parser.add_argument("--workdir", help="where the text, corpus and model are kept and "
                                          "reused (default: a temporary directory)")
    parser.add_argument("--runs-dir", help="keep each run's result here and reuse it")
    parser.add_argument("--max-hours", type=float, default=0,
                        help="start no run after this many hours (0: no limit)")
    parser.add_argument("--run-timeout", type=float, default=3600,
                        help="seconds before a run is stopped as failed (3600)")
    parser.add_argument("--report-md", help="also write the report here")
    parser.add_argument("--plots", help="the plots' directory (default: --report-md's)")
    parser.add_argument("--json", help="write the summaries and runs here")
    parser.add_argument("--contended", action="store_true",
                        help="the machine is shared with other work: mark this invocation's runs "
                             "so (their JSON's 'contended'); their times are left out of the "
                             "tables and the plots' seconds")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the commands that would run; run nothing")
    parser.add_argument("--report-only", action="store_true",
                        help="run nothing: write the report of the kept runs (--runs-dir) of "
                             "the schedules, seeds and configurations asked for (a piece run "
                             "with fewer --schedules writes a report of those only)")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(E2E)
    args.names = list(dict.fromkeys(
        n for name in names for n in (STALENESS if name == "staleness" else [name])))
    unknown = [n for n in args.names if n not in OPTIMIZERS]
    if unknown:
        parser.error(f"--only: unknown {', '.join(unknown)} (known: {', '.join(OPTIMIZERS)})")
    args.schedules = args.schedules.split(",")
    args.grids = {n: TEXT_OPTIMIZERS[o.grid][1] if args.grid else [1e-3]
                  for n, o in OPTIMIZERS.items()}
    for item in args.lr:
        name, _, lrs = item.partition("=")
        if name not in OPTIMIZERS:
            parser.error(f"--lr {item}: unknown configuration {name!r}")
        args.grids[name] = [float(x) for x in lrs.split(",")]
    if args.batch % args.microbatches:
        parser.error(f"--microbatches {args.microbatches} must divide --batch {args.batch}")
    return args


def plan(args) -> list[Job]:
    """Every run of the report, seed by seed (the single-process reference
    once per seed)."""
    jobs = []
    for seed in range(args.seeds):
        for name, opt in OPTIMIZERS.items():
            for schedule in args.schedules if opt.pipeline is not None else [SINGLE]:
                jobs += [Job(name, schedule, lr, seed) for lr in args.grids[name]]
    return jobs


def run_all(args, inputs: Inputs, work: Path) -> dict[Job, dict]:
    """The kept results of every planned run, and those of the chosen runs
    missing from them, run now."""
    runs_dir = Path(args.runs_dir) if args.runs_dir else None
    results, missing = {}, []
    for job in plan(args):
        kept = runs_dir / f"{run_key(args, inputs.text, job)}.json" if runs_dir else None
        if kept and kept.exists():
            results[job] = json.loads(kept.read_text())
        elif job.name in args.names:
            missing.append((job, kept))
    print(f"{len(results)} run(s) kept, {len(missing)} to run", flush=True)
    if args.report_only:
        if not runs_dir:
            raise SystemExit("pipefisher_e2e.py: --report-only needs --runs-dir")
        return results
    if args.dry_run:
        for job, _ in missing:
            print(shlex.join(command(args, inputs, job)))
        return {}
    if missing:
        prepare(args, work, inputs)
    if runs_dir:
        runs_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    for i, (job, kept) in enumerate(missing, 1):
        if args.max_hours and time.monotonic() - start > 3600 * args.max_hours:
            print(f"--max-hours {args.max_hours:g} reached: {len(missing) - i + 1} run(s) left",
                  flush=True)
            break
        r = train(command(args, inputs, job), job, args.run_timeout, args.contended)
        if kept and (not r["diverged"] or r["nonfinite"]):
            kept.write_text(json.dumps(r))
        results[job] = r
        status = f" (failed: {r['stderr'].strip()[-300:]})" if r["diverged"] else ""
        print(f"[{i}/{len(missing)}] {job.name} {job.schedule} lr {job.lr:g} seed {job.seed}: "
              f"held-out {final_loss(r):.4f}, {r['ms_per_step']:.1f} ms/step, "
              f"{r['wall_s']:.0f} s{status}", flush=True)
    return results


def report(args, inputs: Inputs, results: dict[Job, dict]) -> None:
    plots = Path(args.plots) if args.plots else (
        Path(args.report_md).parent if args.report_md else None)
    text = (f"BERT-{args.config} (vocabulary {args.model_vocab}), text {inputs.text}, "
            f"batch {args.batch} x 64, {args.steps} steps, held-out loss every "
            f"{args.eval_every} steps, one runtime thread per rank\n")
    summaries = {}
    for schedule in args.schedules:
        summaries[schedule] = schedule_summary(schedule, results, args.spike_after)
        if not summaries[schedule]["rows"]:
            continue
        text += "\n" + markdown(schedule, args, summaries[schedule])
        if plots:
            plots.mkdir(parents=True, exist_ok=True)
            chosen = {name: [r for job, r in results.items()
                             if job.name == name and job.lr == s["lr"]
                             and job.schedule in (schedule, SINGLE)]
                      for name, s in summaries[schedule]["rows"].items()}
            path = plots / f"pipefisher-e2e-{schedule}-d{args.ranks}.svg"
            title = (f"{schedule}, D = {args.ranks}, N = {args.microbatches}: "
                     f"BERT-{args.config}, {inputs.text}")
            plot(path, title, chosen)
            text += f"\nPlot: {path}\n"
    early = (args.refresh_warmup // args.eval_every + 1) * args.eval_every
    summaries["staleness"] = staleness_summary(results, args.spike_after, early)
    if summaries["staleness"]["rows"]:
        text += "\n" + staleness_markdown(args, summaries["staleness"], results)
        seed = min(p["seed"] for s in summaries["staleness"]["rows"].values()
                   for p in s["seeds"])
        if plots:
            plots.mkdir(parents=True, exist_ok=True)
            chosen = {name: r for name, s in summaries["staleness"]["rows"].items()
                      for job, r in results.items()
                      if job.name == name and job.schedule == SINGLE and job.lr == s["lr"]
                      and job.seed == seed}
            path = plots / f"pipefisher-e2e-staleness-s{seed}.svg"
            title = (f"Staleness, single process, N = {args.microbatches}, seed {seed}: "
                     f"BERT-{args.config}, {inputs.text}")
            plot_staleness(path, title, chosen, args.refresh_warmup)
            text += f"\nPlot: {path}\n"
    print("\n" + text, end="")
    if args.report_md:
        Path(args.report_md).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"summaries": summaries, "runs": [{**r, "key": run_key(args, inputs.text, job)}
                                              for job, r in results.items()]},
            indent=1, default=float))


def main() -> int:
    args = parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        inputs = inputs_for(args, work)
        results = run_all(args, inputs, work)
    if not args.dry_run:
        report(args, inputs, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
