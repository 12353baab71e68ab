//===- TorchCsvFuzzer.cpp - bytes -> pf::sched::parseTorchCsv -------------===//
//
// pf-sched --schedule-csv's reader (lib/Schedule/TorchCsv.cpp) as pf-sched
// calls it: the bytes as the file's text, parsed, then verified
// (verifyProgram, lib/Schedule/Verify.cpp) with the file's columns as the
// steps. Either may refuse the schedule; neither may crash. A schedule that
// parses and verifies must export (programToTorchCsv: an imported program
// has one pipeline) into CSV that parses again to the same program (layout
// and every rank's order, overlapped pairs included) and verifies again,
// the round trip TorchCsv.h promises and docs/schedule.md's
// --export-torch-csv relies on.
//
//===----------------------------------------------------------------------===//
#include "FuzzTargets.h"

#include "pf/Schedule/TorchCsv.h"
#include "pf/Schedule/Verify.h"

#include "llvm/Support/raw_ostream.h"

namespace pf::fuzz {
namespace {
using namespace pf::sched;

bool sameOp(const PipelineOp &a, const PipelineOp &b) {
  return a.pass == b.pass && a.stage == b.stage && a.micro == b.micro &&
         a.overlapsPrevious == b.overlapsPrevious;
}

bool sameProgram(const PipelineProgram &a, const PipelineProgram &b) {
  const PipelineLayout &x = a.layout, &y = b.layout;
  if (x.kind != y.kind || x.devices != y.devices || x.stages != y.stages ||
      x.pipes != y.pipes || x.microbatches != y.microbatches || x.chunks != y.chunks ||
      x.placement != y.placement || x.splitBackward != y.splitBackward ||
      x.fullBackward != y.fullBackward || x.stageLayers != y.stageLayers)
    return false;
  if (a.order.size() != b.order.size())
    return false;
  for (size_t r = 0; r < a.order.size(); ++r) {
    if (a.order[r].size() != b.order[r].size())
      return false;
    for (size_t i = 0; i < a.order[r].size(); ++i)
      if (!sameOp(a.order[r][i], b.order[r][i]))
        return false;
  }
  return true;
}

void say(const std::string &what, const std::string &message) {
  if (verbose())
    llvm::errs() << what << ": " << message << "\n";
}
} // namespace

int fuzzTorchCsv(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  auto imported = parseTorchCsv(text, "fuzz.csv");
  if (!imported) {
    say("parse", imported.error());
    return 0;
  }
  Status valid = verifyProgram(imported->program, &imported->steps);
  if (!valid.ok()) {
    say("verify", valid.message());
    return 0;
  }
  auto csv = programToTorchCsv(imported->program);
  if (!csv)
    __builtin_trap(); // an imported program has one pipeline: it must export
  auto again = parseTorchCsv(*csv, "round-trip.csv");
  if (!again) {
    say("round trip", again.error());
    __builtin_trap(); // programToTorchCsv wrote what parseTorchCsv refuses
  }
  if (!sameProgram(imported->program, again->program))
    __builtin_trap(); // the export read back is another program
  if (!verifyProgram(again->program, &again->steps).ok())
    __builtin_trap(); // the same program, verified once: it must verify again
  say("schedule", "verified; " + std::to_string(imported->program.layout.devices) +
                      " ranks, round trip the same");
  return 0;
}

} // namespace pf::fuzz
