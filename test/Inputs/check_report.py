"""Checks a pipeline schedule report (pf-sched --report-json, pf-schedule
report=): the identities between its figures (docs/schedule.md), and the
values given as --expect KEY=VALUE, where VALUE may be a fraction or a
product such as 11*3*26.2 (the formulas' figures, written out in the test).
KEY may name a nested figure: utilization.without_kfac, per_device.0.pipeline_busy_ms_per_step."""
import argparse
import json
import math
import sys
from fractions import Fraction


def figure(report, key):
    value = report
    for part in key.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def number(text):
    result = Fraction(1)
    for factor in text.split("*"):
        result *= Fraction(factor)
    return float(result)


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--expect", action="append", default=[])
    args = parser.parse_args()
    r = json.load(open(args.report))
    errors = []

    def check(name, got, want):
        if not close(got, want):
            errors.append(f"{name}: {got} != {want}")

    devices, step = r["devices"], r["pipeline_step_ms"]
    busy = sum(d["pipeline_busy_ms_per_step"] for d in r["per_device"])
    if len(r["per_device"]) != devices:
        errors.append(f"per_device has {len(r['per_device'])} entries for {devices} devices")
    check("utilization.without_kfac", r["utilization"]["without_kfac"], busy / (devices * step))
    check("bubble_fraction", r["bubble_fraction"], 1 - r["utilization"]["without_kfac"])
    check("overhead.ms_per_step", r["overhead"]["ms_per_step"], r["step_time_ms"] - step)
    check("kfac_in_bubbles_ms", r["kfac_in_bubbles_ms"] + r["overhead"]["kfac_outside_bubbles_ms"],
          r["kfac_work_ms"])
    k = r["refresh_steps"]
    if k > 0:
        window = k * r["step_time_ms"]
        check("utilization.with_kfac", r["utilization"]["with_kfac"],
              (k * busy + r["kfac_work_ms"]) / (devices * window))
    if "unmovable_ms_per_step" in r:  # the overhead beyond what cannot move
        floor = step + r["unmovable_ms_per_step"]
        beyond = r["step_time_ms"] - floor
        check("overhead.beyond_unmovable_ms", r["overhead"]["beyond_unmovable_ms"], beyond)
        check("overhead.beyond_unmovable_fraction",
              r["overhead"]["beyond_unmovable_fraction"], beyond / floor)
        refresh = r["refresh"]
        if refresh["staggered"]:
            steps = refresh["layer_refresh_steps"]
            check("refresh.mean_interval", refresh["mean_interval"],
                  len(steps) * k / sum(len(s) for s in steps))
        within = beyond / floor <= r["overhead"]["max_beyond_unmovable_fraction"] + 1e-9
        if within and r["utilization"]["with_kfac"] > r["utilization"]["limit"] + 1e-9:
            errors.append("utilization.with_kfac exceeds utilization.limit")
    for d in r["per_device"]:
        check(f"device {d['device']} utilization_without_kfac", d["utilization_without_kfac"],
              d["pipeline_busy_ms_per_step"] / step)
    for expectation in args.expect:
        key, value = expectation.split("=", 1)
        got = figure(r, key)
        if isinstance(got, str):
            if got != value:
                errors.append(f"{key}: '{got}' != '{value}'")
        else:
            check(key, float(got), number(value))
    for e in errors:
        print(f"{args.report}: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
