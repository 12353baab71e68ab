"""Convert a `pf-run --profile` JSON (per-op times) into the scheduler's
per-layer profile (docs/profile-format.md) that pf-sched and pf-schedule read.

    python3 -m pipefisher.profile_convert run-profile.json -o layers.json [--fill other.json]

Every op is charged to the encoder block named in its ONNX node
(".../layer.N/..."); ops before the first block (embeddings) join block 0 and
ops after the last (heads) join the last block, as pf-partition places them.

From a profile of a *training step* (pf-train's pipeline, or pf-opt with
--pf-add-masked-lm-loss --pf-insert-kfac --pf-build-gradients
--pf-kfac-precondition, run by pf-run --profile) every key is measured: ops
before the loss are the forward, ops after it the backward, and the K-FAC ops
give curvature (pf.kfac.update_factor), inversion (pf.kfac.refresh_inverses,
when they refresh every step) and preconditioning (pf.kfac.precondition);
optimizer updates are left out. From a forward-only profile the other keys
come from `--fill` (another profile with the same number of layers, e.g. from
`pf-sched --export-profile`) or are estimated from the measured forward with
the ratios of PipeFisher's P100 BERT-Large profile; the output's `source`
says which keys were estimated.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# PipeFisher's P100 BERT-Large per-block times (ms, micro-batch 32, seq 128):
# forward 16.10, backward 26.95, curvature 43.50, inversion 126.7, precondition 14.73.
REFERENCE_RATIOS = {
    "backward": 26.95 / 16.10,
    "curvature": 43.50 / 16.10,
    "inversion": 126.7 / 16.10,
    "precondition": 14.73 / 16.10,
}
BLOCK = re.compile(r"(?:^|[/._])(?:layer|layers|h|block|blocks)[._](\d+)(?:[/._]|$)")


def block_of(op_name: str) -> int | None:
    node = re.search(r"node '([^']*)'", op_name)
    match = BLOCK.search(node.group(1) if node else op_name)
    return int(match.group(1)) if match else None


def convert(run_profile: dict, fill: dict | None = None) -> dict:
    if run_profile.get("format") != "pf-run-profile/1":
        raise ValueError("not a pf-run profile (format pf-run-profile/1)")
    ops = run_profile.get("ops", [])
    blocks = sorted({b for op in ops if (b := block_of(op["name"])) is not None})
    if not blocks:
        raise ValueError("no encoder blocks found in the op names (node '.../layer.N/...')")
    if blocks != list(range(len(blocks))):
        raise ValueError(f"encoder blocks are not 0..N-1: {blocks}")
    losses = sum(op["name"].split(" ")[0] == "pf.softmax_cross_entropy" for op in ops)
    if losses > 1:
        raise ValueError(f"the step has {losses} masked-LM losses (micro-batches); the "
                         "scheduler's costs are per micro-batch: profile the step built "
                         "without --micro-batches, at the micro-batch size")
    measured = {key: [0.0] * len(blocks) for key in
                ("forward", "backward", "curvature", "inversion", "precondition")}
    seen_block = False
    after_loss = False
    for op in ops:
        kind = op["name"].split(" ")[0]
        block = block_of(op["name"])
        if block is None:
            block = len(blocks) - 1 if seen_block else 0
        else:
            seen_block = True
        if kind == "pf.softmax_cross_entropy":
            after_loss = True
            key = "forward"
        elif kind == "pf.kfac.update_factor":
            key = "curvature"
        elif kind == "pf.kfac.refresh_inverses":
            key = "inversion"
        elif kind == "pf.kfac.precondition":
            key = "precondition"
        elif kind.endswith("_update"):
            continue  # optimizer
        else:
            key = "backward" if after_loss else "forward"
        measured[key][block] += float(op["median_ms"])
    forward = measured["forward"]
    if fill is not None and len(fill.get("layers", [])) != len(blocks):
        raise ValueError(f"--fill has {len(fill.get('layers', []))} layers, the run has "
                         f"{len(blocks)} encoder blocks")
    layers, estimated = [], set()
    for b, ms in enumerate(forward):
        layer = {"name": f"block{b}", "forward": ms}
        for key, ratio in REFERENCE_RATIOS.items():
            if any(measured[key]):
                layer[key] = measured[key][b]
            elif fill is not None and key in fill["layers"][b]:
                layer[key] = fill["layers"][b][key]
            else:
                layer[key] = ms * ratio
                estimated.add(key)
        layers.append(layer)
    source = f"measured by pf-run ({run_profile.get('model', '?')})"
    if estimated:
        source += "; estimated from PipeFisher's P100 BERT-Large ratios: " + \
            ", ".join(sorted(estimated))
    return {
        "name": f"pf-run {Path(str(run_profile.get('model', 'model'))).name}",
        "source": source,
        "units": "ms",
        "p2p": fill.get("p2p", 0.0) if fill else 0.0,
        "allreduce": fill.get("allreduce", 0.0) if fill else 0.0,
        "layers": layers,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", help="pf-run --profile output")
    parser.add_argument("-o", "--output", required=True, help="scheduler profile to write")
    parser.add_argument("--fill", help="profile whose values replace the estimated keys")
    args = parser.parse_args(argv)
    try:
        run_profile = json.loads(Path(args.profile).read_text())
        fill = json.loads(Path(args.fill).read_text()) if args.fill else None
        result = convert(run_profile, fill)
    except (OSError, ValueError, KeyError) as err:
        print(f"profile_convert: error: {err}", file=sys.stderr)
        return 1
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}: {len(result['layers'])} layers ({result['source']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
