//===- FuzzTargets.h - pf's fuzz targets, one function each -----*- C++ -*-===//
//
// Every target takes the bytes of one input and returns 0; a crash, a
// sanitizer report or a failed invariant (__builtin_trap) is the finding.
// The same functions serve libFuzzer (FuzzerMain.cpp, the PF_FUZZ build) and
// pf-fuzz-replay (the normal build), which replays the regression inputs
// under test/Fuzz in every test run.
//
//===----------------------------------------------------------------------===//
#ifndef PF_FUZZ_FUZZTARGETS_H
#define PF_FUZZ_FUZZTARGETS_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace pf::fuzz {

using Target = int (*)(const uint8_t *data, size_t size);

/// A binary .onnx model, imported with and then without its weights.
int fuzzONNX(const uint8_t *data, size_t size);
/// An ONNX text-format model (.onnxtext), imported with and without weights.
int fuzzONNXText(const uint8_t *data, size_t size);
/// A pf-sched cost profile (JSON): parsed; a parsed one must round-trip.
int fuzzProfile(const uint8_t *data, size_t size);
/// An .npz archive: read; what was read must write and read back the same.
int fuzzNpz(const uint8_t *data, size_t size);
/// A pf-train checkpoint loaded into a small fixed parameter set. The input
/// is the archive's entries ("NAME\n" .npy bytes, separated by "\n----\n"),
/// which the target packs into a valid .npz (TrainInputsFuzzer.cpp).
int fuzzCheckpoint(const uint8_t *data, size_t size);
/// A pf-train token corpus loaded and turned into a batch; the input as for
/// fuzzCheckpoint.
int fuzzCorpus(const uint8_t *data, size_t size);
/// pf IR text: parsed, verified, and run through one of a few pf pass
/// pipelines (chosen by a hash of the input).
int fuzzIR(const uint8_t *data, size_t size);
/// A PyTorch compute-only schedule CSV (pf-sched --schedule-csv): parsed and
/// verified; one that verifies must export and read back the same program.
int fuzzTorchCsv(const uint8_t *data, size_t size);
/// The option string of pf-train / pf-run --pipeline, parsed as they parse
/// it; a parsed one must print into a string that parses to the same values.
int fuzzPipelineOptions(const uint8_t *data, size_t size);
/// A model description of pf-aot-run (pf_aot_model, pf_aot.h) built from the
/// input (AotPlanFuzzer.cpp gives the layout) and checked as pf-aot-run
/// checks it; one that is accepted must have every descriptor in bounds.
int fuzzAotPlan(const uint8_t *data, size_t size);

/// The target called `name` (onnx, onnxtext, profile, npz, checkpoint,
/// corpus, ir, torchcsv, pipeline, aotplan); null when there is none.
Target findTarget(const std::string &name);
/// The names findTarget knows, comma-separated.
const char *targetNames();

/// Writes `data` to `fileName` inside this process's scratch directory (made
/// on first use, with a fixed 64 KiB `weights.bin` that seed models reference
/// as ONNX external data) and returns the file's path.
std::string writeScratchFile(const std::string &fileName, const uint8_t *data, size_t size);

/// PF_FUZZ_VERBOSE=1 in the environment: the targets print the diagnostics
/// they otherwise swallow (to see why an input goes nowhere).
bool verbose();

/// While alive (and not verbose()), file descriptor 2 goes to /dev/null: for
/// libraries that print to stderr themselves (llvm::cl's option errors
/// write to llvm::errs() whatever stream the caller passes). A sanitizer's
/// report still reaches the real stderr (its report descriptor is a copy of
/// it; where that cannot be done, as in GCC's ASan + UBSan builds, nothing
/// is silenced); scripts/fuzz.sh reproduces crashes with PF_FUZZ_VERBOSE=1,
/// so that nothing else a crash prints is lost either.
class QuietStderr {
public:
  QuietStderr();
  ~QuietStderr();
  QuietStderr(const QuietStderr &) = delete;
  QuietStderr &operator=(const QuietStderr &) = delete;

private:
  int saved = -1;
};

} // namespace pf::fuzz

#endif // PF_FUZZ_FUZZTARGETS_H
