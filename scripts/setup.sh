#!/usr/bin/env bash
# Installs everything pf needs on a Debian 12 machine. Idempotent: packages that are
# already present are not reinstalled, so a second run takes a few seconds.
#   --fuzz   also clang-22 with libFuzzer and its sanitizer runtimes (scripts/fuzz.sh)
#   --bench  also BLIS, the third library bench/gemm_libraries.sh compares, and
#            bible-kjv, the offline English text of bench/text_convergence.py
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ=0 BENCH=0
for arg in "$@"; do
  case "$arg" in
    --fuzz) FUZZ=1 ;;
    --bench) BENCH=1 ;;
    *) echo "setup: unknown option '$arg' (expected --fuzz or --bench)" >&2; exit 2 ;;
  esac
done

DEB_PACKAGES=(
  cmake ninja-build ccache g++ pkg-config python3 python3-pip
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  libopenblas-dev libopenblas-openmp-dev liblapacke-dev libdnnl-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev nlohmann-json3-dev zlib1g-dev libzstd-dev libzip-dev libssl-dev
)
# libFuzzer is clang's (libclang-rt-22-dev); clang's OpenMP header comes with
# libomp-22-dev.
((FUZZ)) && DEB_PACKAGES+=(clang-22 libclang-rt-22-dev libomp-22-dev)
((BENCH)) && DEB_PACKAGES+=(libblis-openmp-dev bible-kjv)

missing=()
for pkg in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" - <<'PY' 2>/dev/null
import importlib.metadata as md, sys
want = {}
for line in open("python/requirements.txt"):
    line = line.split("#")[0].strip()
    if line:
        name, ver = line.split("==")
        want[name] = ver
for name, ver in want.items():
    if md.version(name) != ver:
        sys.exit(1)
PY
then
  echo "setup: installing Python packages from python/requirements.txt"
  "$PYTHON" -m pip install -q --disable-pip-version-check -r python/requirements.txt
fi

# --fuzz: atheris for the Python fuzz target (fuzz/corpus_text_fuzzer.py);
# 3.0.0 is its newest release with a prebuilt wheel for CPython 3.11. Not
# fatal: the libFuzzer targets need none of it.
if ((FUZZ)) && ! "$PYTHON" -c 'import importlib.metadata as md, sys
sys.exit(md.version("atheris") != "3.0.0")' 2>/dev/null; then
  echo "setup: installing atheris 3.0.0 (the Python fuzz target)"
  "$PYTHON" -m pip install -q --disable-pip-version-check --only-binary=:all: atheris==3.0.0 ||
    echo "setup: atheris not installed (no wheel for this Python?): only" \
      "fuzz/corpus_text_fuzzer.py --mutate runs"
fi
