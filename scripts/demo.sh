#!/usr/bin/env bash
# Installs what is missing, builds, generates the default model (BERT-tiny for
# masked LM, as ONNX) and runs the main job on it: import with the graph
# passes and a summary of the result.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
./scripts/setup.sh
./scripts/build.sh
OUT=${PF_DEMO_DIR:-out/demo}
mkdir -p "$OUT"
BIN=build/bin
CONFIG=${PF_DEMO_CONFIG:-tiny}
MODEL="$OUT/bert-$CONFIG.onnx"

echo "== generating the default model (BERT-$CONFIG, masked LM, seeded random weights)"
PYTHONPATH="$ROOT/python" python3 -m pipefisher.bert_onnx --config "$CONFIG" --out "$MODEL"

echo "== importing with the graph passes (batch 8, sequence 128)"
"$BIN/pf-translate" --import-onnx "$MODEL" --dim batch=8 --dim sequence=128 \
  --summary --emit-bytecode -o "$OUT/bert-$CONFIG.mlirbc"
echo "   IR written to $OUT/bert-$CONFIG.mlirbc (bytecode; view with: $BIN/pf-opt $OUT/bert-$CONFIG.mlirbc)"

echo "== running the forward pass on the CPU runtime (JIT), batch 8, sequence 128"
PYTHONPATH="$ROOT/python" python3 -m pipefisher.sample_inputs --out "$OUT/inputs.npz" \
  --batch 8 --sequence 128
"$BIN/pf-run" "$OUT/bert-$CONFIG.mlirbc" --inputs "$OUT/inputs.npz" --outputs "$OUT/outputs.npz" \
  --describe --repeat 3

echo "== training it for a short run (masked LM on a generated corpus, AdamW)"
PYTHONPATH="$ROOT/python" python3 -m pipefisher.corpus --out "$OUT/corpus.npz" \
  --sequences 4000 --seq-len 32
"$BIN/pf-train" "$MODEL" --corpus "$OUT/corpus.npz" --batch 16 --steps ${PF_DEMO_STEPS:-60} \
  --optimizer adamw --lr 2e-3 --warmup 5 --log-every 10 --checkpoint "$OUT/checkpoint.npz"

echo "== the same run with K-FAC (same batches and masks; 2 micro-batches of 8 per step)"
"$BIN/pf-train" "$MODEL" --corpus "$OUT/corpus.npz" --batch 16 --micro-batches 2 \
  --steps ${PF_DEMO_STEPS:-60} --optimizer adamw --lr 2e-3 --warmup 5 --log-every 10 --kfac

echo "== partitioning into 2 stages and scheduling (Chimera, 4 micro-batches, K-FAC in the bubbles)"
"$BIN/pf-opt" "$OUT/bert-$CONFIG.mlirbc" \
  --pf-pipeline="stages=2 microbatches=4 schedule=chimera kfac=bubbles policy=pf device=a100 print-report=true svg=$OUT/timeline.svg trace=$OUT/timeline.trace.json report=$OUT/schedule.json" \
  -o "$OUT/bert-$CONFIG.scheduled.mlir" --mlir-elide-resource-strings-if-larger=64
echo "   timeline: $OUT/timeline.svg (Perfetto trace: $OUT/timeline.trace.json)"

echo "== training it on a 2-rank pipeline with K-FAC in the bubbles (mpirun -np 2, Chimera, 4 micro-batches of 4)"
# Chimera's two replicas: each rank holds both stages (one per direction) and
# compiles its own stage functions; the replicas sum their gradients and
# K-FAC factors, and each layer's inverse is computed by one of them. Two
# warm-up steps invert every step and are measured; the scheduler then
# places each layer's inverse into a bubble of its refresh window. The
# measured timeline is written beside the simulated one; the report compares
# it with the simulation fed with the durations measured here.
MPIRUN_ROOT=()
if [ "$(id -u)" = 0 ]; then MPIRUN_ROOT=(--allow-run-as-root); fi
mpirun --oversubscribe "${MPIRUN_ROOT[@]}" -np 2 "$BIN/pf-train" "$MODEL" \
  --corpus "$OUT/corpus.npz" --batch 16 --steps ${PF_DEMO_PIPELINE_STEPS:-20} \
  --optimizer adamw --lr 2e-3 --warmup 5 --log-every 5 --num-threads 1 \
  --kfac --kfac-refresh-warmup 2 --pipeline "stages=2 schedule=chimera microbatches=4 kfac=bubbles" \
  --checkpoint "$OUT/pipeline-checkpoint.npz" \
  --svg "$OUT/pipeline-measured.svg" --trace "$OUT/pipeline-measured.trace.json"
# The simulated picture of the same schedule is the one written above.
echo "   measured timeline: $OUT/pipeline-measured.svg (one steady step above its simulation with the"
echo "   durations measured in this run; every step: $OUT/pipeline-measured.trace.json in Perfetto)"
