#!/bin/sh
# Fails when BINARY links an LLVM or MLIR library, dynamically (ldd) or
# statically (LLVM's or MLIR's own symbols; pf's namespace mlir::pf is not
# MLIR). The MLIR-free trainer and the loop library must pass it.
set -u
bin=$1
libs=$(ldd "$bin") || { echo "ldd $bin failed"; exit 1; }
# A positive control: a dynamically linked C++ binary lists libstdc++.
echo "$libs" | grep -q 'libstdc++' || { echo "ldd $bin lists no libstdc++:"; echo "$libs"; exit 1; }
if echo "$libs" | grep -Ei 'libLLVM|libMLIR'; then
  echo "$bin links an LLVM or MLIR library"
  exit 1
fi
symbols=$(nm -C "$bin" 2>/dev/null | grep -E '(^|[^a-zA-Z_:])(llvm::|mlir::)' | grep -v 'mlir::pf::')
if [ -n "$symbols" ]; then
  echo "$bin holds LLVM or MLIR code:"
  echo "$symbols" | head -5
  exit 1
fi
echo "$bin: no LLVM or MLIR library"
