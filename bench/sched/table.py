#!/usr/bin/env python3
"""Prints the pf vs pipefisher table (issue 5, item 7) and times pf-sched at scale.

For every cell of {gpipe, 1f1b, chimera, interleaved, zb-h1, zb-h2, zb-v,
dualpipe, dualpipev} x D in {4, 8, 16} x N in {D, 2D, 4D} x {P100 BERT-Base,
P100 BERT-Large}, runs pf-sched with both K-FAC policies (and validates the
timelines) and prints utilization without / with K-FAC, the refresh interval
K and the step time; then pf with `--refresh throughput` (issue 15 item 5):
its utilization, the overhead beyond the unmovable preconditioning (budget
1%), the refresh (K, or P/Q: a staggered refresh, Q refreshes of every layer
in P steps) and the bubble limit. Cells whose stages exceed the layers, or
that the schedule does not take (DualPipe and DualPipeV need N >= 2D), are
skipped with the reason; when D does not divide the layers the min-max
partitioner balances them.

With --partition-grain G and/or --kfac-offload, the cells whose stages do
not divide the blocks run with them (both policies; the schedule column
says so), and --only-uneven prints just those cells (issue 15 item 6).

Then times pf-sched for D=64, N=512, 96 layers (target: under 1 s).

usage: bench/sched/table.py [--pf-sched build/bin/pf-sched] [--markdown]
                            [--no-timing] [--figures docs]
                            [--partition-grain half|linear] [--kfac-offload]
                            [--only-uneven]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROFILES = {
    "BERT-Base": os.path.join(HERE, "profiles", "p100-bert-base.json"),
    "BERT-Large": os.path.join(HERE, "profiles", "p100-bert-large.json"),
}
SCHEDULES = ["gpipe", "1f1b", "chimera", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe",
             "dualpipev"]
CHUNKS = 2  # interleaved: model chunks per device
V_SHAPES = ("zb-v", "dualpipev")  # two stages per device


def stages_of(schedule, d):
    if schedule == "interleaved":
        return d * CHUNKS
    return 2 * d if schedule in V_SHAPES else d


def layers_of(profile):
    with open(profile) as f:
        return len(json.load(f)["layers"])


def run(binary, profile, schedule, d, n, policy, extra=()):
    """Runs pf-sched and returns its JSON report."""
    layers = layers_of(profile)
    stages = stages_of(schedule, d)
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        cmd = [binary, "--profile", profile, "--schedule", schedule,
               "--stages", str(d), "--microbatches", str(n), "--policy", policy,
               "--report-json", report.name, "--quiet", "--validate", *extra]
        if schedule == "interleaved":
            cmd += ["--chunks", str(CHUNKS)]
        if layers % stages == 0:
            cmd += ["--layers-per-stage", str(layers // stages)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(" ".join(cmd) + "\n" + proc.stderr)
        with open(report.name) as f:
            return json.load(f)


def skip_reason(profile, schedule, d, n):
    layers = layers_of(profile)
    stages = stages_of(schedule, d)
    if stages > layers:
        return f"{stages} stages > {layers} layers"
    if schedule in ("dualpipe", "dualpipev") and n < 2 * d:
        return f"{schedule} needs N >= 2D"
    return None


def dominates(pf, ref):
    """pf refreshes at least as often, uses the devices at least as well and
    its steps are no longer."""
    return (pf["refresh_steps"] <= ref["refresh_steps"] and
            pf["utilization"]["with_kfac"] >= ref["utilization"]["with_kfac"] - 1e-9 and
            pf["step_time_ms"] <= ref["step_time_ms"] * (1 + 1e-12) + 1e-9)


def uneven(profile, schedule, d):
    stages = stages_of(schedule, d)
    return layers_of(profile) % stages != 0


def balance_options(grain, offload):
    """pf-sched options for the cells whose stages do not divide the blocks,
    and how the schedule column names them."""
    extra, label = [], []
    if grain and grain != "block":
        extra += ["--partition-grain", grain]
        label.append(grain)
    if offload:
        extra.append("--kfac-offload")
        label.append("offload")
    return extra, f" ({', '.join(label)})" if label else ""


def table(binary, markdown, grain=None, offload=False, only_uneven=False):
    sep = " | " if markdown else "  "
    header = ["model", "schedule", "D", "N", "util w/o", "pf K", "pf util",
              "pf step ms", "pipefisher K", "pipefisher util",
              "pipefisher step ms", "pf >= pipefisher", "throughput util",
              "beyond unmovable", "refresh", "limit"]
    print(sep.join(header))
    if markdown:
        print("|".join(["---"] * len(header)))
    all_ok = True
    for model, profile in PROFILES.items():
        for schedule in SCHEDULES:
            for d in (4, 8, 16):
                for n in (d, 2 * d, 4 * d):
                    reason = skip_reason(profile, schedule, d, n)
                    if reason:
                        print(sep.join([model, schedule, str(d), str(n),
                                        f"skipped: {reason}"]))
                        continue
                    extra, label = (), ""
                    if uneven(profile, schedule, d):
                        extra, label = balance_options(grain, offload)
                    elif only_uneven:
                        continue
                    pf = run(binary, profile, schedule, d, n, "pf", extra)
                    ref = run(binary, profile, schedule, d, n, "pipefisher", extra)
                    tp = run(binary, profile, schedule, d, n, "pf",
                             [*extra, "--refresh", "throughput"])
                    ok = dominates(pf, ref)
                    if pf.get("used_reference_window"):
                        print(f"note: pf kept the reference window for {model} "
                              f"{schedule} D={d} N={n}")
                    all_ok &= ok
                    print(sep.join([
                        model, schedule + label, str(d), str(n),
                        f"{100 * pf['utilization']['without_kfac']:.1f}%",
                        str(pf["refresh_steps"]),
                        f"{100 * pf['utilization']['with_kfac']:.1f}%",
                        f"{pf['step_time_ms']:.1f}",
                        str(ref["refresh_steps"]),
                        f"{100 * ref['utilization']['with_kfac']:.1f}%",
                        f"{ref['step_time_ms']:.1f}",
                        "yes" if ok else "NO",
                        f"{100 * tp['utilization']['with_kfac']:.1f}%",
                        f"{100 * tp['overhead']['beyond_unmovable_fraction']:.2f}%",
                        refresh_label(tp),
                        f"{100 * tp['utilization']['limit']:.1f}%"]))
                    sys.stdout.flush()
    return all_ok


def refresh_label(report):
    """K, or P/Q for a staggered refresh (Q refreshes per layer in P steps)."""
    refresh = report["refresh"]
    if not refresh.get("staggered"):
        return f"K={report['refresh_steps']}"
    period = refresh["period_steps"]
    return f"{period}/{round(period / refresh['mean_interval'])}"


def scale_profile(path, layers):
    """A profile of `layers` BERT-Large blocks (P100 times)."""
    with open(PROFILES["BERT-Large"]) as f:
        doc = json.load(f)
    block = {k: v for k, v in doc["layers"][0].items() if k not in ("index", "name")}
    doc["name"] = f"P100 BERT-Large blocks x {layers}"
    doc["layers"] = [dict(block, name=f"block{i}") for i in range(layers)]
    with open(path, "w") as f:
        json.dump(doc, f)


def timing(binary):
    print()
    print("pf-sched run time, D=64, N=512, 96 layers (whole process; cpu = user+sys):")
    with tempfile.TemporaryDirectory() as tmp:
        profile = os.path.join(tmp, "bert96.json")
        scale_profile(profile, 96)
        for schedule in ("1f1b", "chimera", "zb-h1", "gpipe"):
            for policy in ("pf", "pipefisher"):
                cmd = [binary, "--profile", profile, "--schedule", schedule,
                       "--stages", "64", "--microbatches", "512",
                       "--policy", policy, "--report-json",
                       os.path.join(tmp, "r.json")]
                start = time.perf_counter()
                cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                proc = subprocess.run(cmd, capture_output=True, text=True)
                wall = time.perf_counter() - start
                cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
                if proc.returncode != 0:
                    raise RuntimeError(proc.stderr)
                with open(os.path.join(tmp, "r.json")) as f:
                    r = json.load(f)
                print(f"  {schedule:8s} {policy:10s} wall {wall:6.3f} s, "
                      f"cpu {cpu:6.3f} s  (K={r['refresh_steps']}, util "
                      f"{100 * r['utilization']['with_kfac']:.1f}%, "
                      f"scheduler {r['scheduler_seconds']:.3f} s)")


def figures(binary, directory):
    """SVG timelines of the reference setup (Chimera, D = N = 8, BERT-Large)."""
    os.makedirs(directory, exist_ok=True)
    for policy in ("pf", "pipefisher"):
        path = os.path.join(directory, f"chimera-d8-bert-large-{policy}.svg")
        subprocess.run([binary, "--profile", PROFILES["BERT-Large"],
                        "--schedule", "chimera", "--stages", "8",
                        "--microbatches", "8", "--layers-per-stage", "3",
                        "--policy", policy, "--svg", path, "--quiet"],
                       check=True)
        print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pf-sched", default=os.path.join(ROOT, "build", "bin", "pf-sched"))
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--partition-grain", choices=["block", "half", "linear"],
                        help="unit of partitioning where the stages do not divide the blocks")
    parser.add_argument("--kfac-offload", action="store_true",
                        help="K-FAC offload where the stages do not divide the blocks")
    parser.add_argument("--only-uneven", action="store_true",
                        help="print only the cells whose stages do not divide the blocks")
    parser.add_argument("--figures", metavar="DIR",
                        help="also write the Chimera D=8 BERT-Large SVGs there")
    args = parser.parse_args()
    if not os.path.exists(args.pf_sched):
        sys.exit(f"{args.pf_sched} not found; build it (scripts/build.sh pf-sched)"
                 " or pass --pf-sched")
    if args.figures:
        figures(args.pf_sched, args.figures)
    ok = table(args.pf_sched, args.markdown, args.partition_grain, args.kfac_offload,
               args.only_uneven)
    if not args.no_timing:
        timing(args.pf_sched)
    if not ok:
        sys.exit("pf is worse than pipefisher on some cell")


if __name__ == "__main__":
    main()
