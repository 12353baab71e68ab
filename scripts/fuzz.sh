#!/usr/bin/env bash
# Builds pf's libFuzzer targets (fuzz/, a clang-22 build with ASan, UBSan and
# coverage in build-fuzz/) and runs each for SECONDS (default 60).
#
#   ./scripts/fuzz.sh [SECONDS] [TARGET...]     targets: onnx onnxtext profile
#                                               npz checkpoint corpus ir
#                                               torchcsv pipeline aotplan
#
# Each target starts from its seed corpus (scripts/fuzz-seeds.py, made from
# the test inputs) plus what earlier runs found (build-fuzz/fuzz/corpus/,
# kept). libFuzzer runs in fork mode, so a crash, sanitizer report, OOM or
# timeout is recorded and fuzzing goes on. Every new crash or OOM input is
# copied to test/Fuzz/Regressions/<target>/, where ./scripts/test.sh replays
# it (pf-fuzz-replay) and fails until the bug is fixed; commit it with the
# fix. Environment: PF_FUZZ_BUILD_DIR (build-fuzz), PF_JOBS (2),
# PF_FUZZ_RSS_MB (2048, a worker's memory limit).
#
# The text corpus builder (python/pipefisher/corpus.py) has a Python target
# of its own, with atheris (which setup.sh --fuzz installs), not built here:
#   python3 fuzz/corpus_text_fuzzer.py -max_total_time=600 CORPUS_DIR
# (fuzz/corpus_text_fuzzer.py --help; its regression inputs are
# test/Fuzz/Regressions/corpustext, replayed by pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_EACH=${1:-60}
shift || true
ALL_TARGETS=(onnx onnxtext profile npz checkpoint corpus ir torchcsv pipeline aotplan)
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=("${ALL_TARGETS[@]}")
BUILD_DIR=${PF_FUZZ_BUILD_DIR:-build-fuzz}
RSS_MB=${PF_FUZZ_RSS_MB:-2048}

./scripts/setup.sh --fuzz
export CCACHE_BASEDIR=$ROOT
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  LAUNCHER=()
  command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPF_FUZZ=ON \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DMLIR_DIR=${MLIR_DIR:-/usr/lib/llvm-22/lib/cmake/mlir} "${LAUNCHER[@]}"
fi
ninja -C "$BUILD_DIR" -j "${PF_JOBS:-2}" pf-fuzzers

WORK="$BUILD_DIR/fuzz"
mkdir -p "$WORK"
# Seeds per run (two runs may fuzz different targets at once).
SEEDS=$(mktemp -d "$WORK/seeds.XXXXXX")
trap 'rm -rf "$SEEDS"' EXIT
python3 scripts/fuzz-seeds.py "$SEEDS" >/dev/null

# LLVM's and MLIR's static objects are never freed: leak reports would be
# noise. Timeouts and OOMs are findings of their own (see the summary).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-/usr/lib/llvm-22/bin/llvm-symbolizer}

# "KIND at FILE:LINE (FUNCTION)" of a crash input: the sanitizer's or
# libFuzzer's name for what happened and the innermost frame in pf's own
# code (lib/ or tools/, else fuzz/); "no-repro" when the input alone does
# not fail (fork mode's OOMs can come from memory earlier inputs held).
# PF_FUZZ_VERBOSE=1: no target silences stderr (QuietStderr), so all that
# the crash printed is in the report.
describe() {
  local binary=$1 input=$2 report kind frame
  report=$(PF_FUZZ_VERBOSE=1 "$binary" -rss_limit_mb="$RSS_MB" -timeout=30 "$input" 2>&1 ||
           true)
  if ! grep -qE 'ERROR: (AddressSanitizer|libFuzzer)|runtime error' <<<"$report"; then
    echo "no-repro" # fork mode's memory or timing, not this input alone
    return
  fi
  kind=$(grep -m1 -oE 'ERROR: (AddressSanitizer|libFuzzer): [a-z -]+|runtime error: [^:]*' <<<"$report" |
         sed 's/^ERROR: [A-Za-z]*: //; s/^runtime error: /UB: /')
  # Sources appear as $ROOT/lib/... or $ROOT/build-fuzz/../lib/...
  local src="($ROOT/|$ROOT/[^ /]+/\\.\\./)"
  frame=$(grep -E "^ +#[0-9]+ .* in .* $src(lib|tools)/[^ ]+:[0-9]+" <<<"$report" | head -1)
  [[ -n "$frame" ]] || frame=$(grep -E "^ +#[0-9]+ .* in .* ${src}fuzz/[^ ]+:[0-9]+" <<<"$report" | head -1)
  local file func
  file=$(grep -oE "$src(lib|tools|fuzz)/[^ :]+:[0-9]+" <<<"$frame" | head -1 | sed -E "s#^$src##")
  func=$(sed -E 's/^ +#[0-9]+ 0x[0-9a-f]+ in //; s/\(.*//; s/ \/.*//' <<<"$frame")
  echo "${kind:-crash} at ${file:-?} (${func:-?})"
}

summary=()
findings=()
new_total=0
for target in "${TARGETS[@]}"; do
  binary="$BUILD_DIR/bin/pf-fuzz-$target"
  [[ -x "$binary" ]] || { echo "fuzz: no target '$target' (${ALL_TARGETS[*]})"; exit 2; }
  corpus="$WORK/corpus/$target"
  artifacts="$WORK/artifacts/$target"
  regressions="$ROOT/test/Fuzz/Regressions/$target"
  log="$WORK/logs/$target.log"
  mkdir -p "$corpus" "$artifacts" "$regressions" "$(dirname "$log")"
  echo "== fuzz $target for ${SECONDS_EACH}s (log: $log) =="
  # -fork=1: one worker process, restarted after a crash (-ignore_*).
  "$binary" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
    -max_total_time="$SECONDS_EACH" -timeout=30 -rss_limit_mb="$RSS_MB" \
    -artifact_prefix="$artifacts/" -print_final_stats=1 \
    "$corpus" "$SEEDS/$target" >"$log" 2>&1 || true
  # Fork mode's status lines: "#EXECS: cov: ... oom/timeout/crash: O/T/C ...".
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1 || true)
  execs=$(sed -n 's/^#\([0-9]*\):.*/\1/p' <<<"$last")
  counts=$(sed -n 's/.*oom\/timeout\/crash: \([0-9]*\/[0-9]*\/[0-9]*\).*/\1/p' <<<"$last")
  new=0
  declare -A landed_sites=()
  for input in "$artifacts"/crash-* "$artifacts"/oom-*; do
    [[ -f "$input" ]] || continue
    name=$(basename "$input")
    [[ -f "$regressions/$name" ]] && continue
    what=$(describe "$binary" "$input")
    [[ "$what" == no-repro ]] && continue
    site=${what#*at }
    # One input per place in pf's code: an OOM found many times over (say, a
    # size read from the file and allocated) lands once.
    if [[ -n "${landed_sites[$site]:-}" ]]; then
      continue
    fi
    landed_sites[$site]=1
    cp "$input" "$regressions/$name"
    findings+=("$target/$name: $what")
    new=$((new + 1))
  done
  unset landed_sites
  new_total=$((new_total + new))
  summary+=("$(printf '%-10s %6ss %12s execs  oom/timeout/crash %-9s  new regression inputs %d' \
    "$target" "$SECONDS_EACH" "${execs:-?}" "${counts:-?}" "$new")")
done

echo
echo "== fuzz summary =="
printf '%s\n' "${summary[@]}"
if ((new_total)); then
  echo
  printf '%s\n' "${findings[@]}"
  echo "$new_total new input(s) under test/Fuzz/Regressions: ./scripts/test.sh fails on them"
  echo "until fixed (replay one: $BUILD_DIR/bin/pf-fuzz-replay TARGET FILE)"
  exit 1
fi
