#!/usr/bin/env python3
"""Whole models on the GPU, for scripts/gpu-check.sh (issue 13).

``prepare`` (the CPU machine, with MLIR): compiles BERT models ahead of time
with ``pf-run --aot`` (forward, AdamW training step, K-FAC training step,
batch 8 x 128), builds each as a shared library (examples/aot/model_library.c)
and writes its inputs, into one folder that gpu-check.sh packs with the
runner (``pf-aot-run-portable``)::

    python3 scripts/gpu_models.py prepare --build build --out STAGE [--models tiny,mini,base]

``summary`` puts pf's CUDA step times next to PyTorch's for the same
models on the same GPU (scripts/gpu_bench_torch_bert.py's JSON)::

    python3 scripts/gpu_models.py summary --models OUT/models.json --torch OUT/torch-bert.json

The K-FAC steps are also profiled op by op on the GPU and turned into the
scheduler's per-layer profile (``<model>-cuda-layers.json``: forward,
backward, curvature, inversion and preconditioning per encoder block), which
``pf-sched --profile`` reads.

``check`` (the GPU machine: no MLIR, numpy and PyTorch): runs every model with
the same runner on the CPU backend and on the CUDA backend, compares their
outputs (and, for the small training steps, the updated weights), times the
CUDA step, and writes ``models.json``::

    python3 scripts/gpu_models.py check --bundle BUNDLE --out OUT [--time-budget S]

Parity is measured per output as max |cuda - cpu| / max |cpu| (0 where both
are 0); the bar is 1e-4 for fp32 (docs/cuda-backend.md).  BERT-tiny has
random weights (vocabulary 2048); BERT-mini and BERT-base use the generator's
``--init tiled`` weights (one repeated random tile, so BERT-base's 3.7 GB of
K-FAC step state packs into a few MB) with the full 30522-word vocabulary.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BATCH, SEQUENCE = 8, 128
PREDICTIONS = 20  # BERT's max_predictions_per_seq at 128 tokens
# name -> (config, vocab, init)
CONFIGS = {"tiny": ("tiny", 2048, "random"), "mini": ("mini", 30522, "tiled"),
           "base": ("base", 30522, "tiled")}
KINDS = {"forward": [], "adamw": ["--training-step"], "kfac": ["--training-step", "--kfac"],
         # NVIDIA's BERT recipe: the decoder at the predicted positions only
         # (gather_nd and its scatter-add gradient).
         "predict": ["--training-step", "--predictions", str(PREDICTIONS)]}
PARITY_BAR = 1e-4
# --gemm-precision runs of BERT-base's forward and AdamW step: the bar on the
# loss and logits against the CPU's f32 (the 2e-2 for bf16).
PRECISION_BARS = {"tf32": 1e-2, "bf16": 2e-2}
DTYPES = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32, "i8": np.int8}


def log(message: str) -> None:
    print(f"gpu_models: {message}", flush=True)


def step_inputs(vocab: int) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
    from pipefisher.sample_inputs import make_inputs
    inputs = make_inputs(BATCH, SEQUENCE, vocab=vocab)
    rng = np.random.default_rng(7)
    labels = np.full((BATCH, SEQUENCE), -100, np.int64)
    masked = rng.random((BATCH, SEQUENCE)) < 0.15
    masked[0, 0] = True
    labels[masked] = rng.integers(0, vocab, masked.sum())
    inputs.update(labels=labels, step=np.array(1, np.int64), lr=np.array(1e-4, np.float64))
    # --predictions: each sequence's first PREDICTIONS labelled positions,
    # padded with position 0 and label -100 (as pf-train gathers them).
    positions = np.zeros((BATCH, PREDICTIONS), np.int64)
    picked = np.full((BATCH, PREDICTIONS), -100, np.int64)
    for b in range(BATCH):
        where = np.flatnonzero(labels[b] != -100)[:PREDICTIONS]
        positions[b, :where.size] = where
        picked[b, :where.size] = labels[b, where]
    inputs.update(mlm_positions=positions, predicted_labels=picked)
    return inputs


def prepare(args) -> int:
    build = Path(args.build).resolve()
    root = Path(__file__).resolve().parents[1]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(root / "python"))
    for config in args.models.split(","):
        name, vocab, init = CONFIGS[config]
        onnx = out / f"{config}.onnx"
        subprocess.run([sys.executable, "-m", "pipefisher.bert_onnx", "--config", name,
                        "--vocab", str(vocab), "--init", init, "--no-dedupe", "--out", str(onnx)],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        inputs = step_inputs(vocab)
        for kind, flags in KINDS.items():
            model = out / "models" / f"{config}-{kind}"
            shutil.rmtree(model, ignore_errors=True)
            t0 = time.perf_counter()
            subprocess.run([str(build / "bin" / "pf-run"), str(onnx), "--dim", f"batch={BATCH}",
                            "--dim", f"sequence={SEQUENCE}", *flags, "--aot", str(model),
                            "--aot-profile"],
                           check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-I", str(root / "include"), "-I",
                            str(model), str(root / "examples/aot/model_library.c"),
                            str(model / "model.o"), "-o", str(model / "model.so")], check=True)
            for f in ("model.o", "model_plan.h"):
                (model / f).unlink()
            (model / "in").mkdir()
            names = ["input_ids", "token_type_ids", "attention_mask"]
            if kind != "forward":
                names += ["labels", "step", "lr"]
            if kind == "predict":
                names += ["mlm_positions"]
            for n in names:
                source = "predicted_labels" if kind == "predict" and n == "labels" else n
                inputs[source].tofile(model / "in" / f"{n}.bin")
            info = {"config": config, "kind": kind, "vocab": vocab, "init": init,
                    "batch": BATCH, "sequence": SEQUENCE}
            (model / "info.json").write_text(json.dumps(info) + "\n")
            size = (model / "model.weights").stat().st_size
            log(f"{model.name}: compiled in {time.perf_counter() - t0:.1f} s, "
                f"weights {size / 2**20:.0f} MiB")
        onnx.unlink()
    return 0


def read_outputs(directory: Path) -> dict:
    manifest = json.loads((directory / "manifest.json").read_text())
    return {e["name"]: np.fromfile(directory / e["file"], dtype=DTYPES[e["dtype"]])
            .reshape(e["shape"]) for e in manifest}


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    got, want = got.astype(np.float64), want.astype(np.float64)
    if not np.isfinite(got).all() or not np.isfinite(want).all():
        return float("inf") if not np.array_equal(np.isfinite(got), np.isfinite(want)) else 0.0
    scale = np.abs(want).max() if want.size else 0.0
    diff = np.abs(got - want).max() if want.size else 0.0
    return float(diff / scale) if scale > 0 else float(diff)


def group_of(name: str) -> str:
    return name.split("/")[0] if "/" in name else name


def compare(cpu: dict, cuda: dict) -> dict:
    """The worst relative error per output group (loss, logits, grad, kfac)."""
    groups: dict[str, dict] = {}
    for name, want in cpu.items():
        err = relative_error(cuda[name], want)
        key = group_of(name) if not name.startswith("kfac/") else "/".join(name.split("/")[:2])
        g = groups.setdefault(key, {"outputs": 0, "max_rel": 0.0, "worst": name})
        g["outputs"] += 1
        if err > g["max_rel"]:
            g["max_rel"], g["worst"] = err, name
    return groups


def runner(bundle: Path, model: Path, device: str, *extra: str, timeout: float = 300):
    cmd = [str(bundle / "pf-aot-run-portable"), str(model / "model.so"), "--weights",
           str(model / "model.weights"), "--inputs", str(model / "in"), "--device", device,
           *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def check_model(bundle: Path, model: Path, work: Path, threads: int,
                against: str = "cuda", repeat: int = 20, out_dir: Path = Path(".")) -> dict:
    info = json.loads((model / "info.json").read_text())
    result = dict(info, model=model.name)
    keep_weights = info["config"] != "base"  # base's step state is 3.7 GB
    runs = {}
    for device in (against, "cpu"):  # the device first: it fails fast
        out = work / f"{model.name}-{device}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        extra = ["--outputs", str(out)]
        if device == "cpu":
            extra += ["--threads", str(threads)]
        if keep_weights and info["kind"] != "forward":
            extra += ["--weights-out", str(out / "weights.after")]
        proc = runner(bundle, model, device, *extra)
        if proc.returncode != 0:
            result["error"] = f"{device}: {proc.stderr.strip()[-2000:]}"
            return result
        runs[device] = out
    cpu, cuda = read_outputs(runs["cpu"]), read_outputs(runs[against])
    result["parity"] = compare(cpu, cuda)
    if "loss" in cpu:
        result["loss_cpu"], result["loss_cuda"] = float(cpu["loss"]), float(cuda["loss"])
    if keep_weights and info["kind"] != "forward":
        before = np.fromfile(model / "model.weights", np.float32)
        a = np.fromfile(runs["cpu"] / "weights.after", np.float32)
        b = np.fromfile(runs[against] / "weights.after", np.float32)
        # The update alone: weights-after minus weights-before on each side.
        result["parity"]["update"] = {"outputs": 1, "max_rel": relative_error(b - before,
                                                                               a - before),
                                      "worst": "weights after the step"}
    worst = max(g["max_rel"] for k, g in result["parity"].items() if not k.startswith("kfac/"))
    result["max_rel"] = worst
    result["pass"] = bool(worst <= PARITY_BAR)
    timing = work / f"{model.name}-timing.json"
    proc = runner(bundle, model, against, "--warmup", "3", "--repeat", str(repeat), "--json",
                  str(timing))
    if proc.returncode == 0:
        result["cuda_ms"] = json.loads(timing.read_text())["median_ms"]
    else:
        result["timing_error"] = proc.stderr.strip()[-2000:]
    if info["config"] == "base" and info["kind"] in ("forward", "adamw") and against == "cuda":
        result["precisions"] = {p: precision_run(bundle, model, work, cpu, p, repeat)
                                for p in PRECISION_BARS}
    for out in runs.values():
        shutil.rmtree(out, ignore_errors=True)
    if info["kind"] == "kfac":
        result.update(layer_profile(bundle, model, work, against, out_dir))
    return result


def precision_run(bundle: Path, model: Path, work: Path, cpu: dict, precision: str,
                  repeat: int) -> dict:
    """The model with --gemm-precision on CUDA against the CPU's f32 outputs:
    the loss and logits must stay within PRECISION_BARS; gradients are
    reported. Then timed like the f32 run."""
    out = work / f"{model.name}-{precision}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    proc = runner(bundle, model, "cuda", "--gemm-precision", precision, "--outputs", str(out))
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-2000:], "pass": False}
    groups = compare(cpu, read_outputs(out))
    shutil.rmtree(out, ignore_errors=True)
    gated = max(g["max_rel"] for k, g in groups.items() if k in ("loss", "logits"))
    result = {"parity": groups, "max_rel_loss_logits": gated,
              "pass": bool(gated <= PRECISION_BARS[precision])}
    timing = work / f"{model.name}-{precision}-timing.json"
    proc = runner(bundle, model, "cuda", "--gemm-precision", precision, "--warmup", "3",
                  "--repeat", str(repeat), "--json", str(timing))
    if proc.returncode == 0:
        result["cuda_ms"] = json.loads(timing.read_text())["median_ms"]
    return result


def layer_profile(bundle: Path, model: Path, work: Path, device: str, out_dir: Path) -> dict:
    """Per-op times of the K-FAC step on `device` (pf-aot-run --profile: the
    backend waited for around every kernel), turned into the scheduler's
    per-layer profile (docs/profile-format.md) by pipefisher.profile_convert."""
    ops = work / f"{model.name}-ops.json"
    layers = out_dir / f"{model.name}-{device}-layers.json"
    proc = runner(bundle, model, device, "--warmup", "1", "--repeat", "3", "--profile", str(ops))
    if proc.returncode != 0:
        return {"profile_error": proc.stderr.strip()[-2000:]}
    shutil.copy(ops, out_dir / ops.name)
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "pipefisher.profile_convert", str(ops), "-o",
                           str(layers)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(root / "python")))
    if proc.returncode != 0:
        return {"profile_error": proc.stderr.strip()[-2000:]}
    profile = json.loads(layers.read_text())
    keys = ("forward", "backward", "curvature", "inversion", "precondition")
    per_block = {k: sum(layer[k] for layer in profile["layers"]) / len(profile["layers"])
                 for k in keys}
    return {"layer_profile": layers.name, "per_block_ms": per_block}


def check(args) -> int:
    bundle, out = Path(args.bundle), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.time_budget
    results = []
    models = sorted((bundle / "models").iterdir(),
                    key=lambda p: (list(CONFIGS).index(p.name.split("-")[0]),
                                   list(KINDS).index(p.name.split("-")[1])))
    for model in models:
        if time.monotonic() > deadline:
            results.append({"model": model.name, "skipped": "time budget"})
            continue
        t0 = time.perf_counter()
        try:
            r = check_model(bundle, model, work, args.threads, args.against, args.repeat, out)
        except subprocess.TimeoutExpired as e:
            r = {"model": model.name, "error": f"timed out: {e}"}
        r["seconds"] = round(time.perf_counter() - t0, 1)
        results.append(r)
        summary = r.get("error") or r.get("timing_error")
        if summary is None:
            summary = (f"max rel {r['max_rel']:.2e} ({'pass' if r['pass'] else 'FAIL'}), "
                       f"cuda {r.get('cuda_ms', float('nan')):.2f} ms")
            kfac = {k: v["max_rel"] for k, v in r["parity"].items() if k.startswith("kfac/")}
            if kfac:
                summary += ", " + ", ".join(f"{k} {v:.1e}" for k, v in sorted(kfac.items()))
            for p, pr in r.get("precisions", {}).items():
                summary += (f"; {p}: loss/logits {pr.get('max_rel_loss_logits', float('nan')):.1e}"
                            f" ({'pass' if pr.get('pass') else 'FAIL'}), "
                            f"{pr.get('cuda_ms', float('nan')):.2f} ms")
            if "per_block_ms" in r:
                summary += "; per block (ms): " + ", ".join(
                    f"{k} {v:.3f}" for k, v in r["per_block_ms"].items())
            if "profile_error" in r:
                summary += "; profile failed: " + r["profile_error"][-300:]
        log(f"{model.name}: {summary} [{r['seconds']} s]")
        (out / "models.json").write_text(json.dumps(results, indent=1) + "\n")
    failed = [r["model"] for r in results if r.get("error") or r.get("pass") is False
              or any(not p.get("pass") for p in r.get("precisions", {}).values())]
    log("all models within %.0e of the CPU backend" % PARITY_BAR if not failed
        else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


def summary(args) -> int:
    models = json.loads(Path(args.models).read_text())

    def peers(path):
        data = json.loads(Path(path).read_text()) if path and Path(path).exists() else {}
        # Matched by config, case and vocabulary (BERT-tiny here has 2048 words).
        return data, {(r["config"], r["case"], r.get("vocab")): r
                      for r in data.get("results", []) if "median_ms" in r}

    torch, peer = peers(args.torch)
    rows = []
    for r in models:
        if "cuda_ms" not in r:
            continue
        # PyTorch's peers run the full decoder: the predictions step has none.
        case = {"forward": "forward", "adamw": "train_adamw", "kfac": "train_adamw"}.get(r["kind"])
        t = peer.get((r["config"], case, r.get("vocab")))
        row = {"model": r["model"], "pf_cuda_ms": r["cuda_ms"],
               "torch_case": case if t else None, "torch_ms": t["median_ms"] if t else None,
               "ratio": r["cuda_ms"] / t["median_ms"] if t else None}
        rows.append(row)
        ratio = f"{row['ratio']:.2f}x PyTorch {case} ({t['median_ms']:.2f} ms)" if t else "-"
        print(f"  {r['model']:<14} pf {r['cuda_ms']:9.2f} ms   {ratio}")
        for precision, path in (("tf32", args.torch_tf32), ("bf16", args.torch_bf16)):
            pr = r.get("precisions", {}).get(precision, {})
            if "cuda_ms" not in pr:
                continue
            t = peers(path)[1].get((r["config"], case, r.get("vocab")))
            row = {"model": f"{r['model']} {precision}", "pf_cuda_ms": pr["cuda_ms"],
                   "torch_case": f"{case} {precision}" if t else None,
                   "torch_ms": t["median_ms"] if t else None,
                   "ratio": pr["cuda_ms"] / t["median_ms"] if t else None}
            rows.append(row)
            ratio = (f"{row['ratio']:.2f}x PyTorch {case} {precision} ({t['median_ms']:.2f} ms)"
                     if t else "-")
            print(f"  {row['model']:<19} pf {pr['cuda_ms']:9.2f} ms   {ratio}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.get("device"), "rows": rows},
                                             indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--build", default="build")
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="tiny,mini,base")
    c = sub.add_parser("check")
    c.add_argument("--bundle", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--work", default="/tmp/pf-gpu-models")
    c.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    c.add_argument("--time-budget", type=float, default=240)
    c.add_argument("--repeat", type=int, default=20, help="timed CUDA runs per model")
    c.add_argument("--against", default="cuda",
                   help="the backend compared with the CPU (cpu: a check of this script)")
    m = sub.add_parser("summary")
    m.add_argument("--models", required=True)
    m.add_argument("--torch", required=True)
    m.add_argument("--torch-tf32", help="the PyTorch run with --tf32")
    m.add_argument("--torch-bf16", help="the PyTorch run with --bf16 (autocast)")
    m.add_argument("--out")
    args = ap.parse_args(argv)
    return {"prepare": prepare, "check": check, "summary": summary}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
