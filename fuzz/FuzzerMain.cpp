//===- FuzzerMain.cpp - libFuzzer's entry for one pf fuzz target ----------===//
//
// Compiled once per target with PF_FUZZ_TARGET naming its function
// (fuzz/CMakeLists.txt) and linked with -fsanitize=fuzzer.
//
//===----------------------------------------------------------------------===//
#include "FuzzTargets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return pf::fuzz::PF_FUZZ_TARGET(data, size);
}
