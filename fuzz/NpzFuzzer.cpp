//===- NpzFuzzer.cpp - bytes -> driver::readNpz ---------------------------===//
//
// What readNpz accepts, writeNpz must write and readNpz read back unchanged
// (pf-train's checkpoints take that path).
//
//===----------------------------------------------------------------------===//
#include "FuzzTargets.h"

#include "pf/Support/Npz.h"

#include "llvm/Support/raw_ostream.h"

namespace pf::fuzz {
namespace drv = mlir::pf::driver;

int fuzzNpz(const uint8_t *data, size_t size) {
  auto arrays = drv::readNpz(writeScratchFile("input.npz", data, size));
  if (!arrays)
    return 0;
  std::string copy = writeScratchFile("copy.npz", nullptr, 0);
  if (!drv::writeNpz(copy, *arrays).ok())
    return 0; // e.g. an entry name libzip will not write
  auto again = drv::readNpz(copy);
  if (!again) {
    if (verbose())
      llvm::errs() << "read back: " << again.error() << "\n";
    __builtin_trap(); // readNpz refuses what writeNpz wrote
  }
  if (again->size() != arrays->size())
    __builtin_trap();
  for (const auto &[name, array] : *arrays) {
    auto it = again->find(name);
    if (it == again->end() || it->second.dtype != array.dtype ||
        it->second.shape != array.shape || it->second.data != array.data)
      __builtin_trap(); // the round trip changed an array
  }
  return 0;
}

} // namespace pf::fuzz
