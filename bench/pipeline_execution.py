#!/usr/bin/env python3
"""Pipeline execution figures (issue 36, "Figures"): for each configuration,
`mpirun -np 2 pf-train ... --pipeline "stages=2 schedule=S microbatches=N
[kfac=bubbles] [deterministic=true]" --trace T.json --svg S.svg --emit-step P.mlir`
(one thread per rank), and from its stdout, its Chrome trace and its rank
programs: the measured step, T_pipe, utilization measured / simulated, the
step's time outside T_pipe, the executed stage imbalance, the all-reduce time
and bytes (and their bandwidth against an OSU-style MPI measurement), and
each rank's host time between stage calls.

    PYTHONPATH=python python3 bench/pipeline_execution.py [--configs demo mini]
        [--schedules gpipe 1f1b chimera] [--microbatches 4 8] [--kfac none bubbles]
        [--deterministic both|true|false] [--steps 12] [--demo-steps 20]
        [--osu osu.json] [--runs-dir DIR] [--workdir DIR] [--json FILE]
        [--no-programs] [--timeout 1800] [--dry-run]

    bench/allreduce_bandwidth.sh --json osu.json     # the --osu reference

Configurations:
  demo  scripts/demo.sh's last pf-train run: BERT-tiny (vocabulary 30 522,
        `python -m pipefisher.bert_onnx --config tiny`), the generated corpus
        of 4000 sequences of 32 tokens, batch 16, AdamW lr 2e-3 warm-up 5,
        Chimera, 4 micro-batches, `--kfac --kfac-refresh-warmup 2` and
        `kfac=bubbles`; --demo-steps steps (20, as the demo).
  mini  BERT-mini (vocabulary 30 522), batch 16 x 64 (bench/pipeline_setup.py's
        model and corpus), each of --schedules x --microbatches x --kfac
        (`none`: AdamW only; `bubbles`: `--kfac --kfac-refresh-warmup 2` and
        `kfac=bubbles`); --steps steps.
Every configuration runs once per --deterministic value: `true` appends
`deterministic=true` to --pipeline (the bit-exact exchange of every
micro-batch's piece, "before"), `false` leaves the default (each replica's
weighted partial sum through one MPI all-reduce, "after"); `both` runs both.

Figures per run (means per step over the steps pf-train's measured report
uses: after the first, and with K-FAC in the bubbles the windows after the
warm-up; the trace holds every step):
  step          the trace's step period: the "step k" markers (a step starts at
                its first traced op on any rank) of consecutive steps, so it
                holds the untraced host loop (batch, loss sum, logging) too;
                beside it pf-train's progress-line ms/step (the mean over the
                same steps, bench/pipeline_training.py's rule).
  T_pipe        first start to last end of the step's forward/backward passes
                on all ranks (the trace; the same as pf-train's report).
  outside       step - T_pipe, in ms and % of T_pipe.
  util m / s    pf-train's "measured vs simulated" report (the simulation fed
                with the durations measured in the run): utilization with
                K-FAC (without K-FAC in the JSON).
  busy, imb     per rank the summed durations of its compute lane (stage
                calls: passes, K-FAC, update, other) per step; imbalance = the
                largest rank's over the mean ("imb passes": forward/backward
                only).
  all-reduce    the comm lane's collective events (pf.all_reduce, broadcast,
                reduce_microbatch, clip_gradients, kfac_kl_clip; pf-train
                traces them as all-reduce, broadcast, reduce and clip), ms per
                step: the rank mean,
                waits for the peer included. The rank programs (--emit-step)
                say which op each event is: the k-th collective event of a
                rank in a step is the k-th collective op of its program (ops
                run in program order); when the counts match, each event gets
                its op's value name and bytes. Bytes are the payload: the
                all-reduced value's elements x dtype size (f64 x len(order)
                for the clipping norm); the bit-exact exchange of
                deterministic=true sends per-micro-batch pieces (row-sparse
                for the embedding), whose wire bytes the trace does not give:
                "wire <=" is the upper bound (pieces sent + 1) x payload.
  grad AR       the gradient all-reduces (values grad/*): payload MB per step
                and the time of each op on its least-waiting rank (min of the
                two ranks' durations of the matched op: the later-arriving
                rank barely waits), their sum per step and the bandwidth
                payload / that time; with --osu, "vs OSU" = sum over ops of
                the time the OSU-style MPI_Allreduce of the nearest size
                (log2) takes (median) / sum of the measured times, i.e. the
                achieved bandwidth as a fraction of MPI's at those sizes.
  grad reduce+bcast  the other collectives of gradients (pf.reduce_microbatch
                and pf.broadcast of grad/*: the tied embedding's per-micro-batch
                reduce and the broadcast of its sum under gpipe/1f1b; the
                preconditioned gradients' broadcast under Chimera): the summed
                least-waiting-rank time per step and the payload MB (the
                reduce sends the tokens' rows only: payload is an upper bound).
  host gap      per rank: the time between consecutive stage calls of a step
                (compute lane) not covered by any of that rank's traced ops
                (recv waits, collectives), summed per step, % of the step; the
                table shows the largest rank's. "between" is each rank's time
                from its last traced op of a step to its first of the next
                (the host loop, the loss all-reduce), % of the step.

Each run's result is a JSON file in --runs-dir (its stdout, trace and SVG
beside it); a run whose JSON exists is not rerun (resumable, like
bench/text_convergence.py --runs-dir); a failed run is recorded in the table
and retried next time. Without --runs-dir the files go to a temporary
directory. --osu is applied when the table is made, so it can be given
later on the same --runs-dir. --json writes every run's result to one file.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipeline_setup import mpirun_two_ranks, prepare, tool  # noqa: E402
from pipeline_training import ms_per_step  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PASSES = {"forward", "backward", "backward-input", "backward-weight"}
KFAC = {"curvature-A", "curvature-B", "inversion", "inversion-A", "inversion-B",
        "precondition"}
COLLECTIVE_OPS = ("pf.all_reduce", "pf.broadcast", "pf.reduce_microbatch",
                  "pf.clip_gradients", "pf.kfac_kl_clip")
# Their trace categories (pf-train's measured timeline).
COLLECTIVE_CATS = {"all-reduce", "broadcast", "reduce", "clip"}
DTYPE_BYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i8": 1, "i1": 1}


# --------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------

def demo_inputs(work: Path) -> tuple[Path, Path]:
    """scripts/demo.sh's model and corpus (the same generators and seeds)."""
    model, corpus = work / "demo-bert-tiny.onnx", work / "demo-corpus.npz"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    if not model.exists():
        subprocess.run([sys.executable, "-m", "pipefisher.bert_onnx", "--config", "tiny",
                        "--out", str(model)], check=True, env=env, capture_output=True)
    if not corpus.exists():
        subprocess.run([sys.executable, "-m", "pipefisher.corpus", "--out", str(corpus),
                        "--sequences", "4000", "--seq-len", "32"], check=True, env=env,
                       capture_output=True)
    return model, corpus


def mini_inputs(work: Path, args: argparse.Namespace) -> list[str]:
    """bench/pipeline_setup.py's BERT-mini and corpus, made once per workdir."""
    sub = work / f"mini-v{args.vocab}-s{args.seq}"
    sub.mkdir(parents=True, exist_ok=True)
    setup = argparse.Namespace(config="mini", vocab=args.vocab, batch=args.batch, seq=args.seq,
                               steps=args.steps)
    if (sub / "m.onnx").exists() and (sub / "corpus.npz").exists():
        return [str(sub / "m.onnx"), "--corpus", str(sub / "corpus.npz"), "--batch",
                str(args.batch), "--steps", str(args.steps), "--log-every", "1",
                "--num-threads", "1", "--lr", "1e-3"]
    return prepare(sub, setup)


def configurations(args: argparse.Namespace) -> list[dict]:
    """Every configuration, its "before" (deterministic) and "after" runs
    side by side."""
    dets = {"both": [True, False], "true": [True], "false": [False]}[args.deterministic]
    base = []
    if "demo" in args.configs:
        base.append({"config": "demo", "schedule": "chimera", "microbatches": 4,
                     "kfac": "bubbles"})
    if "mini" in args.configs:
        base += [{"config": "mini", "schedule": schedule, "microbatches": n, "kfac": kfac}
                 for schedule in args.schedules for n in args.microbatches
                 for kfac in args.kfac]
    return [dict(cfg, deterministic=det) for cfg in base for det in dets]


def key_of(cfg: dict, args: argparse.Namespace) -> str:
    steps = args.demo_steps if cfg["config"] == "demo" else args.steps
    shape = "" if cfg["config"] == "demo" else f"-b{args.batch}x{args.seq}-v{args.vocab}"
    return (f"{cfg['config']}{shape}-{cfg['schedule']}-N{cfg['microbatches']}-{cfg['kfac']}-"
            f"{'det' if cfg['deterministic'] else 'lib'}-s{steps}")


def command_of(cfg: dict, args: argparse.Namespace, work: Path, files: dict) -> list[str]:
    if cfg["config"] == "demo":
        model, corpus = demo_inputs(work)
        common = [str(model), "--corpus", str(corpus), "--batch", "16", "--steps",
                  str(args.demo_steps), "--optimizer", "adamw", "--lr", "2e-3", "--warmup", "5",
                  "--log-every", "1", "--num-threads", "1"]
    else:
        common = mini_inputs(work, args)
    spec = f"stages=2 schedule={cfg['schedule']} microbatches={cfg['microbatches']}"
    flags = []
    if cfg["kfac"] == "bubbles":
        spec += " kfac=bubbles"
        flags = ["--kfac", "--kfac-refresh-warmup", "2"]
    if cfg["deterministic"]:
        spec += " deterministic=true"
    try:
        pf_train = str(tool("pf-train"))
    except FileNotFoundError:
        if not args.dry_run:
            raise
        pf_train = "build/bin/pf-train"
    cmd = [*mpirun_two_ranks(), pf_train, *common, *flags, "--pipeline", spec,
           "--trace", str(files["trace"]), "--svg", str(files["svg"])]
    if "programs" in files:
        cmd += ["--emit-step", str(files["programs"])]
    return cmd


# --------------------------------------------------------------------------
# pf-train's stdout
# --------------------------------------------------------------------------

def two_figures(text: str, name: str) -> tuple[float | None, float | None]:
    m = re.search(rf"^{re.escape(name)}\s+([-0-9.]+)%?\s+([-0-9.]+)%?\s*$", text, re.M)
    if m:
        return float(m.group(1)), float(m.group(2))
    m = re.search(rf"^{re.escape(name)}\s+([-0-9.]+)%?", text, re.M)
    return (float(m.group(1)), None) if m else (None, None)


def parse_stdout(out: str) -> dict:
    report: dict = {}
    m = re.search(r"^measured(?: vs simulated:)? .*?steps (\d+)\.\.(-?\d+)", out, re.M)
    if m:
        report["first_step"], report["last_step"] = int(m.group(1)), int(m.group(2))
    for key, name in [("t_pipe_ms", "pipeline span T_pipe (ms)"),
                      ("step_span_ms", "step time (ms)"),
                      ("util_without_kfac", "utilization without K-FAC"),
                      ("util_with_kfac", "utilization with K-FAC"),
                      ("bubble_fraction", "bubble fraction"),
                      ("bubble_fill", "bubble fill (K-FAC)")]:
        measured, simulated = two_figures(out, name)
        report[key] = {"measured": measured, "simulated": simulated}
    sim = re.search(r"^simulated with the measured durations \(ms\):(.*)$", out, re.M)
    if sim:
        report["simulated_costs"] = sim.group(1).strip()
    busy = re.search(r"^rank\s+busy measured\s+busy simulated.*\n((?:\s*\d+\s+[0-9.]+\s+[0-9.]+\n)+)",
                     out, re.M)
    if busy:
        report["busy_per_rank_ms"] = [
            {"measured": float(b), "simulated": float(c)}
            for _, b, c in (line.split() for line in busy.group(1).strip().splitlines())]
    why = re.search(r"\(no simulated comparison: (.*)\)", out)
    if why:
        report["no_simulation"] = why.group(1)
    plan = re.search(r"windows of (\d+) step\(s\) from step (\d+)", out)
    if plan:
        report["window_steps"], report["window_from"] = int(plan.group(1)), int(plan.group(2))
    try:
        report["progress_ms_per_step"] = ms_per_step(out)
    except (statistics.StatisticsError, ValueError):
        report["progress_ms_per_step"] = None
    return report


# --------------------------------------------------------------------------
# The rank programs (--emit-step): the collective ops and their bytes
# --------------------------------------------------------------------------

def tensor_bytes(type_text: str) -> int:
    m = re.search(r"tensor<([^>]*)>", type_text)
    if not m:
        return 0
    *dims, dtype = m.group(1).split("x")
    n = 1
    for d in dims:
        n *= int(d) if d.isdigit() else 1
    return n * DTYPE_BYTES.get(dtype.strip(), 4)


def parse_programs(path: Path) -> list[dict]:
    """[{rank, window_step, collectives: [{op, value, bytes, order, ranks}]}] in
    program order. Streams the file: the IR's resource blob can be large."""
    programs: list[dict] = []
    current = None
    with open(path, errors="replace") as f:
        for line in f:
            if len(line) > 200000:  # a resource blob
                continue
            s = line.strip()
            if s.startswith("pf.rank_program"):
                m = re.search(r"rank\((\d+)\)", s)
                w = re.search(r"window_step\s*=\s*(\d+)", s)
                current = {"rank": int(m.group(1)) if m else -1,
                           "window_step": int(w.group(1)) if w else None,
                           "collectives": [], "stage_calls": 0}
                programs.append(current)
                continue
            if current is None:
                continue
            if s == "}":
                current = None
                continue
            # An op with results: "%a, %b = pf.run_stage ...".
            s = re.sub(r"^%[^=]*=\s*", "", s)
            if s.startswith("pf.run_stage"):
                current["stage_calls"] += 1
                continue
            # The op's name ends at a space or its operand list ("pf.clip_gradients(%a, ...").
            op = re.match(r"[\w.]*", s).group(0)
            if op not in COLLECTIVE_OPS:
                continue
            value = re.match(r'\S+\s+"([^"]*)"', s)
            order = re.search(r"order\((library|microbatch)\)", s)
            ranks = re.search(r"ranks\(\[([^\]]*)\]\)", s)
            entry = {"op": op, "value": value.group(1) if value else "",
                     "order": order.group(1) if order else None,
                     "ranks": [int(x) for x in ranks.group(1).split(",")] if ranks else None}
            if op in ("pf.clip_gradients", "pf.kfac_kl_clip"):
                names = re.search(r"order\(\[(.*?)\]\)", s)
                entry["bytes"] = 8 * (names.group(1).count('"') // 2 if names else 0)
            else:
                entry["bytes"] = tensor_bytes(s.rsplit(":", 1)[-1])
            current["collectives"].append(entry)
    return programs


def category(entry: dict) -> str:
    if entry["value"].startswith("grad/"):
        if entry["op"] == "pf.all_reduce":
            return "gradient"  # Chimera's replicas (or a tied weight's all-reduce)
        # pf.reduce_microbatch / pf.broadcast of a gradient: the tied
        # embedding's per-micro-batch reduce and the combined value's
        # broadcast (gpipe, 1f1b), a preconditioned gradient's broadcast
        # (Chimera's split preconditioning).
        return "reduce/broadcast"
    return {"pf.clip_gradients": "clip", "pf.kfac_kl_clip": "kl-clip",
            "pf.broadcast": "broadcast", "pf.reduce_microbatch": "reduce"}.get(
                entry["op"], "other")


# --------------------------------------------------------------------------
# The Chrome trace
# --------------------------------------------------------------------------

def union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def covered(gap: tuple[float, float], cover: list[tuple[float, float]]) -> float:
    s, e = gap
    return union_length([(max(s, a), min(e, b)) for a, b in cover if b > s and a < e])


def analyse_trace(path: Path, first: int, last: int, programs: list[dict] | None,
                  microbatches: int, schedule: str) -> dict:
    data = json.loads(path.read_text())
    markers: dict[int, float] = {}
    events = []
    for e in data["traceEvents"]:
        if e.get("ph") == "i" and e.get("name", "").startswith("step "):
            markers[int(e["name"].split()[1])] = e["ts"] / 1e3
        elif e.get("ph") == "X":
            a = e.get("args", {})
            events.append({"rank": e["tid"] // 2, "comm": e["tid"] % 2 == 1, "cat": e["cat"],
                           "step": a.get("step", -1), "start": e["ts"] / 1e3,
                           "end": (e["ts"] + e["dur"]) / 1e3})
    ranks = 1 + max(e["rank"] for e in events)
    trace_last = max(e["step"] for e in events)
    if last < 0 or last > trace_last:
        last = trace_last
    steps = [k for k in range(first, last + 1) if any(e["step"] == k for e in events)]
    by = {}
    for e in events:
        by.setdefault((e["step"], e["rank"]), []).append(e)
    for lst in by.values():
        lst.sort(key=lambda e: e["start"])

    per_step = []
    for k in steps:
        ev = [e for e in events if e["step"] == k]
        passes = [e for e in ev if e["cat"] in PASSES]
        t_pipe = (max(e["end"] for e in passes) - min(e["start"] for e in passes)) if passes else 0
        span = max(e["end"] for e in ev) - min(e["start"] for e in ev)
        period = markers[k + 1] - markers[k] if (k + 1) in markers and k in markers else None
        ranks_out = []
        for r in range(ranks):
            mine = by.get((k, r), [])
            compute = [e for e in mine if not e["comm"]]
            comm = [(e["start"], e["end"]) for e in mine if e["comm"]]
            dur = lambda pred: sum(e["end"] - e["start"] for e in mine if pred(e))  # noqa: E731
            gaps = 0.0
            for a, b in zip(compute, compute[1:]):
                if b["start"] > a["end"]:
                    g = (a["end"], b["start"])
                    gaps += (g[1] - g[0]) - covered(g, comm)
            nxt = by.get((k + 1, r), [])
            between = (min(e["start"] for e in nxt) - max(e["end"] for e in mine)
                       if nxt and mine else None)
            ranks_out.append({
                "busy_ms": dur(lambda e: not e["comm"]),
                "passes_ms": dur(lambda e: e["cat"] in PASSES),
                "kfac_ms": dur(lambda e: e["cat"] in KFAC),
                "update_ms": dur(lambda e: e["cat"] == "update"),
                "other_compute_ms": dur(lambda e: not e["comm"] and
                                        e["cat"] in ("other", "accumulate")),
                "all_reduce_ms": dur(lambda e: e["cat"] in COLLECTIVE_CATS),
                "recv_ms": dur(lambda e: e["cat"] == "recv"),
                "send_ms": dur(lambda e: e["cat"] == "send"),
                "host_gap_ms": gaps,
                "between_steps_ms": between,
                "collectives": [e for e in mine if e["cat"] in COLLECTIVE_CATS],
            })
        per_step.append({"step": k, "t_pipe": t_pipe, "span": span, "period": period,
                         "ranks": ranks_out})

    def mean(xs):
        xs = [x for x in xs if x is not None]
        return statistics.mean(xs) if xs else None

    period = mean([s["period"] for s in per_step])
    result = {
        "steps": [steps[0], steps[-1]] if steps else None,
        "period_ms": period,
        "period_steps": sum(1 for s in per_step if s["period"] is not None),
        "t_pipe_ms": mean([s["t_pipe"] for s in per_step]),
        "span_ms": mean([s["span"] for s in per_step]),
        "per_rank": [],
    }
    for r in range(ranks):
        row = {}
        for field in ["busy_ms", "passes_ms", "kfac_ms", "update_ms", "other_compute_ms",
                      "all_reduce_ms", "recv_ms", "send_ms", "host_gap_ms",
                      "between_steps_ms"]:
            row[field] = mean([s["ranks"][r][field] for s in per_step])
        result["per_rank"].append(row)
    busy = [row["busy_ms"] for row in result["per_rank"]]
    passes = [row["passes_ms"] for row in result["per_rank"]]
    result["imbalance"] = max(busy) / statistics.mean(busy) if busy and min(busy) > 0 else None
    result["imbalance_passes"] = (max(passes) / statistics.mean(passes)
                                  if passes and min(passes) > 0 else None)

    # The collectives: match each rank's k-th collective event of a step with
    # the k-th collective op of its program.
    ops: dict = {}
    matched_steps, unmatched = 0, []
    if programs:
        for s in per_step:
            labelled = []
            for r in range(ranks):
                evs = s["ranks"][r]["collectives"]
                cands = [p for p in programs if p["rank"] == r
                         and len(p["collectives"]) == len(evs)]
                if not cands:
                    labelled = None
                    unmatched.append({"step": s["step"], "rank": r, "events": len(evs),
                                      "program_ops": sorted({len(p["collectives"]) for p in
                                                             programs if p["rank"] == r})})
                    break
                labelled.append(list(zip(cands[0]["collectives"], evs)))
            if labelled is None:
                continue
            matched_steps += 1
            # The i-th collective of every rank is one collective (the programs
            # over the same members run them in one order: the verifier's
            # deadlock check); with 2 ranks every collective spans both.
            n = min(len(x) for x in labelled) if labelled else 0
            for i in range(n):
                entries = [labelled[r][i] for r in range(ranks)]
                entry = entries[0][0]
                durs = [ev["end"] - ev["start"] for _, ev in entries]
                inside = (min(ev["end"] for _, ev in entries)
                          - max(ev["start"] for _, ev in entries))
                o = ops.setdefault((i, entry["op"], entry["value"]), {
                    "op": entry["op"], "value": entry["value"], "bytes": entry["bytes"],
                    "order": entry["order"], "category": category(entry), "n": 0,
                    "min_rank_ms": 0.0, "mean_rank_ms": 0.0, "both_inside_ms": 0.0})
                o["n"] += 1
                o["min_rank_ms"] += min(durs)
                o["mean_rank_ms"] += statistics.mean(durs)
                o["both_inside_ms"] += max(0.0, inside)
    op_list = []
    for o in ops.values():
        for f in ("min_rank_ms", "mean_rank_ms", "both_inside_ms"):
            o[f] /= max(1, matched_steps)
        o["n"] = o["n"] / max(1, matched_steps)
        op_list.append(o)
    result["collective_ops"] = op_list
    result["matched_steps"] = matched_steps
    result["unmatched"] = unmatched[:4]
    categorize(result, microbatches, schedule)
    return result


def categorize(trace: dict, microbatches: int, schedule: str) -> None:
    """The collectives per category (recomputed when the table is made, so a
    reused run's JSON follows this file's rules)."""
    cats = {}
    for o in trace.get("collective_ops", []):
        o["category"] = category(o)
        c = cats.setdefault(o["category"], {"ops": 0, "bytes": 0, "min_rank_ms": 0.0,
                                            "mean_rank_ms": 0.0})
        c["ops"] += o["n"]
        c["bytes"] += o["bytes"] * o["n"]
        c["min_rank_ms"] += o["min_rank_ms"]
        c["mean_rank_ms"] += o["mean_rank_ms"]
    trace["collectives_by_category"] = cats
    grad = [o for o in trace.get("collective_ops", []) if o["category"] == "gradient"]
    trace.pop("gradient_wire_bytes_upper", None)
    if grad:
        pieces = microbatches // 2 if schedule == "chimera" else microbatches
        trace["gradient_wire_bytes_upper"] = sum(
            o["bytes"] * o["n"] * ((pieces + 1) if o["order"] != "library" else 1)
            for o in grad)


# --------------------------------------------------------------------------
# OSU reference
# --------------------------------------------------------------------------

def load_osu(path: str | None) -> list[tuple[int, float]] | None:
    if not path:
        return None
    sizes = json.loads(Path(path).read_text())["sizes"]
    return sorted((int(s["bytes"]), float(s["median_us"]) / 1e3) for s in sizes)


def osu_ms(osu: list[tuple[int, float]], nbytes: int) -> float:
    """The OSU median time of the nearest measured size (in log2), scaled to
    `nbytes` at that size's bandwidth."""
    sizes = [b for b, _ in osu]
    i = bisect.bisect_left(sizes, nbytes)
    cands = [j for j in (i - 1, i) if 0 <= j < len(sizes)]
    j = min(cands, key=lambda j: abs(math.log2(sizes[j]) - math.log2(max(nbytes, 1))))
    b, t = osu[j]
    return t * nbytes / b


def gradient_figures(trace: dict, osu) -> dict:
    grad = [o for o in trace.get("collective_ops", []) if o["category"] == "gradient"]
    if not grad:
        return {}
    nbytes = sum(o["bytes"] * o["n"] for o in grad)
    t = sum(o["min_rank_ms"] for o in grad)
    out = {"ops": sum(o["n"] for o in grad), "bytes": nbytes, "ms": t,
           "MBps": nbytes / 1e3 / t if t > 0 else None}
    if osu:
        ref = sum(osu_ms(osu, o["bytes"]) * o["n"] for o in grad)
        out["osu_ms"] = ref
        out["vs_osu"] = ref / t if t > 0 else None
    return out


# --------------------------------------------------------------------------
# Table
# --------------------------------------------------------------------------

def fmt(x, spec=".1f", suffix=""):
    return "-" if x is None else f"{x:{spec}}{suffix}"


def table(results: list[dict], osu) -> str:
    head = ("| config | schedule | N | K-FAC | all-reduce | step ms (progress) | T_pipe ms | "
            "util meas / sim | T_pipe meas / sim | step - T_pipe ms (% T_pipe) | busy ms r0 / r1 | "
            "imb (passes) | all-reduce ms/step (ops) | grad AR MB/step (wire <=) | "
            "grad AR ms, MB/s | vs OSU | grad reduce+bcast ms (MB) | host gap % (between) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for res in results:
        cfg = res["cfg"]
        label = "library" if not cfg["deterministic"] else "exact (det.)"
        if "error" in res:
            lines.append(f"| {cfg['config']} | {cfg['schedule']} | {cfg['microbatches']} | "
                         f"{cfg['kfac']} | {label} | failed: {res['error'][:80]} |")
            continue
        rep, tr = res["report"], res["trace"]
        categorize(tr, cfg["microbatches"], cfg["schedule"])
        kfac = cfg["kfac"] != "none"
        util = rep["util_with_kfac" if kfac else "util_without_kfac"]
        period = tr["period_ms"] or tr["span_ms"]
        outside = period - tr["t_pipe_ms"] if period and tr["t_pipe_ms"] else None
        busy = " / ".join(fmt(r["busy_ms"]) for r in tr["per_rank"])
        ar = statistics.mean(r["all_reduce_ms"] for r in tr["per_rank"])
        nops = sum(c["ops"] for c in tr.get("collectives_by_category", {}).values())
        g = gradient_figures(tr, osu)
        wire = tr.get("gradient_wire_bytes_upper")
        gap = max((r["host_gap_ms"] or 0) / period * 100 for r in tr["per_rank"])
        between = [r["between_steps_ms"] for r in tr["per_rank"] if r["between_steps_ms"]]
        between_pct = max(between) / period * 100 if between else None
        tied = tr.get("collectives_by_category", {}).get("reduce/broadcast")
        tied_text = (f"{tied['min_rank_ms']:.1f} ({tied['bytes'] / 1e6:.1f})" if tied else "-")
        grad_mb = (f"{g['bytes'] / 1e6:.2f}"
                   + (f" ({wire / 1e6:.1f})" if wire and cfg["deterministic"] else "")
                   if g else "-")
        lines.append(
            f"| {cfg['config']} | {cfg['schedule']} | {cfg['microbatches']} | {cfg['kfac']} | "
            f"{label} | {fmt(period)} ({fmt(rep.get('progress_ms_per_step'))}) | "
            f"{fmt(tr['t_pipe_ms'])} | {fmt(util['measured'], '.1f', '%')} / "
            f"{fmt(util['simulated'], '.1f', '%')} | "
            f"{fmt(rep['t_pipe_ms']['measured'])} / {fmt(rep['t_pipe_ms']['simulated'])} | "
            f"{fmt(outside)} ({fmt(outside / tr['t_pipe_ms'] * 100 if outside else None, '.0f', '%')}) | "
            f"{busy} | {fmt(tr['imbalance'], '.2f')} ({fmt(tr['imbalance_passes'], '.2f')}) | "
            f"{fmt(ar)} ({nops:g}) | {grad_mb} | "
            f"{fmt(g.get('ms'))}, {fmt(g.get('MBps'), '.0f')} | "
            f"{fmt(g.get('vs_osu'), '.2f')} | {tied_text} | {gap:.1f}% ({fmt(between_pct, '.1f', '%')}) |")
    return "\n".join(lines)


# --------------------------------------------------------------------------

def run_one(cfg: dict, args: argparse.Namespace, work: Path, out_dir: Path) -> dict:
    key = key_of(cfg, args)
    files = {"trace": out_dir / f"{key}.trace.json", "svg": out_dir / f"{key}.svg"}
    programs_file = work / f"{key}.programs.mlir"
    if not args.no_programs:
        files["programs"] = programs_file
    cmd = command_of(cfg, args, work, files)
    if args.dry_run:
        print(" ".join(cmd))
        return {"cfg": cfg, "error": "dry run"}
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        return {"cfg": cfg, "key": key, "error": f"timed out after {args.timeout} s"}
    elapsed = time.time() - t0
    (out_dir / f"{key}.log").write_text(proc.stdout + "\n--- stderr\n" + proc.stderr)
    result = {"cfg": cfg, "key": key, "command": cmd, "elapsed_s": elapsed,
              "date": time.strftime("%Y-%m-%d %H:%M:%S"),
              "load": Path("/proc/loadavg").read_text().split()[:3]}
    if proc.returncode != 0:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-3:]
        result["error"] = f"exit {proc.returncode}: " + " / ".join(tail)
        return result
    result["report"] = rep = parse_stdout(proc.stdout)
    programs = None
    if programs_file.exists():
        programs = parse_programs(programs_file)
        programs_file.unlink()
        result["programs"] = [{"rank": p["rank"], "window_step": p["window_step"],
                               "stage_calls": p["stage_calls"],
                               "collectives": len(p["collectives"]),
                               "collective_bytes": sum(c["bytes"] for c in p["collectives"])}
                              for p in programs]
    first = rep.get("first_step", 1)
    last = rep.get("last_step", -1)
    result["trace"] = analyse_trace(files["trace"], first, last, programs, cfg["microbatches"],
                                    cfg["schedule"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["demo", "mini"],
                        choices=["demo", "mini"])
    parser.add_argument("--schedules", nargs="+", default=["gpipe", "1f1b", "chimera"],
                        choices=["gpipe", "1f1b", "chimera", "zb-h1", "interleaved"],
                        help="BERT-mini's schedules (the demo is Chimera)")
    parser.add_argument("--microbatches", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--kfac", nargs="+", default=["none", "bubbles"],
                        choices=["none", "bubbles"],
                        help="BERT-mini: AdamW only, and K-FAC in the bubbles")
    parser.add_argument("--deterministic", choices=["both", "true", "false"], default="both",
                        help="true: deterministic=true (before: the bit-exact exchange); "
                             "false: the default library all-reduce (after); both (default)")
    parser.add_argument("--vocab", type=int, default=30522)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--steps", type=int, default=12, help="BERT-mini's steps per run")
    parser.add_argument("--demo-steps", type=int, default=20, help="the demo's steps (20)")
    parser.add_argument("--osu", help="bench/allreduce_bandwidth.sh --json output: the "
                                      "reference bandwidth of the 'vs OSU' column")
    parser.add_argument("--runs-dir", help="keep each run's JSON, stdout, trace and SVG here "
                                           "and reuse the JSON (resumable)")
    parser.add_argument("--workdir", help="models and corpora, kept and reused "
                                          "(default: a temporary directory)")
    parser.add_argument("--json", help="write all runs' results to this file")
    parser.add_argument("--no-programs", action="store_true",
                        help="no --emit-step: no per-op names and bytes (the IR holds the "
                             "weights: ~2x the model's bytes are written at start-up, and "
                             "with kfac=bubbles again when the window starts)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args()
    osu = load_osu(args.osu)

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        out_dir = Path(args.runs_dir or tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        results = []
        for cfg in configurations(args):
            key = key_of(cfg, args)
            cached = out_dir / f"{key}.json"
            if args.runs_dir and cached.exists():
                results.append(json.loads(cached.read_text()))
                print(f"{key}: reused {cached}", flush=True)
                continue
            result = run_one(cfg, args, work, out_dir)
            results.append(result)
            if "error" in result:
                print(f"{key}: {result['error']}", flush=True)
                continue
            if args.runs_dir:
                cached.write_text(json.dumps(result, indent=1))
            tr = result["trace"]
            print(f"{key}: {result['elapsed_s']:.0f} s, step {fmt(tr['period_ms'])} ms, "
                  f"T_pipe {fmt(tr['t_pipe_ms'])} ms", flush=True)
        if args.dry_run:
            return 0
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        print()
        print(f"# {time.strftime('%Y-%m-%d %H:%M')}, load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}"
              f"{', OSU reference ' + args.osu if args.osu else ''}")
        print(table(results, osu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
