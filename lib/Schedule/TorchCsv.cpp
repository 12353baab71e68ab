//===- TorchCsv.cpp - PyTorch's compute-only schedule CSV ------------------===//
//
// Layer "pipeline" (docs/schedule.md). The format is PyTorch's
// (torch/distributed/pipelining/schedules.py, _Action.__repr__ and
// _Action.from_str); the cells are split on commas without quoting, as no
// action contains a comma or a quote.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/TorchCsv.h"
#include "pf/Schedule/Limits.h"
#include "pf/Schedule/Verify.h"
#include "ScheduleOrders.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pf::sched {
namespace {

const char *kOverlap = "OVERLAP_F_B";

/// A cell's location, for errors.
struct Cell {
  const std::string *source;
  int rank, column;
  std::string where() const {
    return *source + ": line " + std::to_string(rank + 1) + " (rank " +
           std::to_string(rank) + "), step " + std::to_string(column);
  }
};

std::string trim(const std::string &s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return s.substr(b, e - b);
}

std::vector<std::string> splitOn(const std::string &s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep))
    parts.push_back(part);
  if (!s.empty() && s.back() == sep)
    parts.push_back("");
  return parts;
}

/// Leading decimal digits of `s` from `pos` as a number; -1 when none.
long digitsAt(const std::string &s, size_t &pos) {
  size_t start = pos;
  long value = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
    value = value * 10 + (s[pos] - '0');
    if (value > 1000000)
      return -2;
    ++pos;
  }
  return pos == start ? -1 : value;
}

/// One action "<stage><type><micro>".
Expected<PipelineOp> parseAction(const std::string &text, const Cell &cell) {
  const std::string bad = cell.where() + ": ";
  size_t pos = 0;
  long stage = digitsAt(text, pos);
  if (stage == -2)
    return Status::error(bad + "index too large in '" + text + "'");
  if (stage < 0)
    return Status::error(bad + "malformed action '" + text +
                         "' (expected <stage><F|B|I|W><micro-batch>, e.g. 2F0)");
  size_t typeStart = pos;
  while (pos < text.size() && std::isalpha(static_cast<unsigned char>(text[pos])))
    ++pos;
  if (pos < text.size() && text[pos] == '_') // SEND_F, RECV_B, ...
    while (pos < text.size() && !std::isdigit(static_cast<unsigned char>(text[pos])))
      ++pos;
  std::string type = text.substr(typeStart, pos - typeStart);
  long micro = digitsAt(text, pos);
  PassKind pass;
  if (type == "F")
    pass = PassKind::Forward;
  else if (type == "B")
    pass = PassKind::Backward;
  else if (type == "I")
    pass = PassKind::BackwardInput;
  else if (type == "W")
    pass = PassKind::BackwardWeight;
  else if (type.empty())
    return Status::error(bad + "malformed action '" + text + "': no action type");
  else
    return Status::error(bad + "unknown action '" + type + "' in '" + text +
                         "' (a compute-only schedule has F, B, I, W and " + kOverlap +
                         ")");
  if (micro == -2)
    return Status::error(bad + "index too large in '" + text + "'");
  if (micro < 0 || pos != text.size())
    return Status::error(bad + "malformed action '" + text +
                         "' (expected <stage><F|B|I|W><micro-batch>, e.g. 2F0)");
  return PipelineOp{pass, static_cast<int>(stage), static_cast<int>(micro)};
}

/// A cell: empty, one action, or "(<F>;<B>)OVERLAP_F_B".
Status parseCell(const std::string &raw, const Cell &cell,
                 std::vector<PipelineOp> &ops) {
  std::string text = trim(raw);
  if (text.empty())
    return Status::success();
  if (text[0] != '(') {
    auto op = parseAction(text, cell);
    if (!op)
      return op.status();
    ops.push_back(*op);
    return Status::success();
  }
  size_t close = text.find(')');
  if (close == std::string::npos || text.substr(close + 1) != kOverlap)
    return Status::error(cell.where() + ": malformed overlapped pair '" + text +
                         "' (expected (<F action>;<B action>)" + kOverlap + ")");
  // A pair, as pf's simulator runs it (the second pass overlapsPrevious)
  // and as the writer writes it back: a group of one, three or more passes
  // would read as chained pairs and export as nested groups that no reader
  // takes (test/Fuzz/Regressions/torchcsv/overlap-group-of-three).
  std::vector<std::string> parts = splitOn(text.substr(1, close - 1), ';');
  if (parts.size() != 2)
    return Status::error(cell.where() + ": overlapped pair '" + text + "' holds " +
                         std::to_string(parts.size()) + " action" +
                         (parts.size() == 1 ? "" : "s") + " (expected (<F action>;<B action>)" +
                         kOverlap + ")");
  bool first = true;
  for (const std::string &part : parts) {
    auto op = parseAction(trim(part), cell);
    if (!op)
      return op.status();
    op->overlapsPrevious = !first;
    first = false;
    ops.push_back(*op);
  }
  return Status::success();
}

/// The placement every stage's rank fits, or an error naming one that fits
/// none.
Expected<Placement> inferPlacement(const std::vector<int> &rankOfStage, int ranks) {
  const int stages = static_cast<int>(rankOfStage.size());
  auto fits = [&](Placement p) {
    PipelineLayout l;
    l.devices = ranks;
    l.placement = p;
    for (int s = 0; s < stages; ++s)
      if (rankOfStage[s] >= 0 && l.deviceOf(0, s) != rankOfStage[s])
        return false;
    return true;
  };
  if (stages == ranks && fits(Placement::Linear))
    return Placement::Linear;
  if (stages == 2 * ranks && fits(Placement::VShape))
    return Placement::VShape;
  if (stages % ranks == 0 && fits(Placement::Looped))
    return Placement::Looped;
  for (int s = 0; s < stages; ++s)
    if (rankOfStage[s] < 0)
      return Status::error("no rank runs stage " + std::to_string(s) + " of " +
                           std::to_string(stages));
  return Status::error(
      "the stages' ranks fit none of pf's placements (stage s on rank s; on "
      "rank s mod " + std::to_string(ranks) + "; or in a V, stage s and " +
      std::to_string(2 * ranks - 1) + "-s on rank s)");
}

/// D, stages, micro-batches, placement and split from the parsed actions.
Status inferLayout(ImportedSchedule &out, const std::string &source) {
  PipelineProgram &p = out.program;
  const int ranks = static_cast<int>(p.order.size());
  int stages = 0, micros = 0;
  bool split = false;
  for (const auto &ops : p.order)
    for (const PipelineOp &op : ops) {
      stages = std::max(stages, op.stage + 1);
      micros = std::max(micros, op.micro + 1);
      split |= op.pass == PassKind::BackwardInput || op.pass == PassKind::BackwardWeight;
    }
  if (stages == 0)
    return Status::error(source + ": the schedule has no actions");
  for (Status s : {checkLimit("the schedule's ranks", ranks, kMaxStages, "kMaxStages"),
                   checkLimit("the schedule's stages", stages, kMaxStages, "kMaxStages"),
                   checkLimit("the schedule's micro-batches", micros, kMaxMicrobatches,
                              "kMaxMicrobatches")})
    if (!s.ok())
      return Status::error(source + ": " + s.message());
  std::vector<int> rankOfStage(stages, -1);
  for (int r = 0; r < ranks; ++r)
    for (size_t i = 0; i < p.order[r].size(); ++i) {
      const PipelineOp &op = p.order[r][i];
      if (rankOfStage[op.stage] >= 0 && rankOfStage[op.stage] != r)
        return Status::error(source + ": stage " + std::to_string(op.stage) +
                             " runs on rank " + std::to_string(rankOfStage[op.stage]) +
                             " and on rank " + std::to_string(r) + " (line " +
                             std::to_string(r + 1) + ", step " +
                             std::to_string(out.steps[r][i]) + ")");
      rankOfStage[op.stage] = r;
    }
  auto placement = inferPlacement(rankOfStage, ranks);
  if (!placement)
    return Status::error(source + ": " + placement.error());
  PipelineLayout &l = p.layout;
  l.kind = ScheduleKind::Imported;
  l.devices = ranks;
  l.stages = stages;
  l.microbatches = micros;
  l.chunks = stages / ranks;
  l.placement = *placement;
  l.splitBackward = split;
  detail::markFullBackwards(l, p.order);
  return Status::success();
}

} // namespace

Expected<ImportedSchedule> parseTorchCsv(const std::string &text,
                                         const std::string &source) {
  ImportedSchedule out;
  std::istringstream in(text);
  std::string line;
  for (int rank = 0; std::getline(in, line); ++rank) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    out.program.order.emplace_back();
    out.steps.emplace_back();
    std::vector<std::string> cells = splitOn(line, ',');
    for (int column = 0; column < static_cast<int>(cells.size()); ++column) {
      std::vector<PipelineOp> &ops = out.program.order.back();
      if (Status s = parseCell(cells[column], Cell{&source, rank, column}, ops); !s.ok())
        return s;
      out.steps.back().resize(ops.size(), column);
    }
  }
  // Blank lines at the end are no ranks (every rank holds a stage).
  while (!out.program.order.empty() && out.program.order.back().empty()) {
    out.program.order.pop_back();
    out.steps.pop_back();
  }
  if (out.program.order.empty())
    return Status::error(source + ": empty schedule (expected one line per rank)");
  if (Status s = inferLayout(out, source); !s.ok())
    return s;
  return out;
}

Expected<ImportedSchedule> loadTorchCsv(const std::string &path) {
  // A folder opens as a stream that reads nothing ("empty schedule").
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Status::error("cannot open schedule '" + path + "': it is a directory, not a CSV file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open schedule '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parseTorchCsv(text.str(), path);
}

Expected<std::string> programToTorchCsv(const PipelineProgram &program) {
  if (program.layout.pipes != 1)
    return Status::error(std::string(scheduleKindName(program.layout.kind)) +
                         " runs two pipelines; PyTorch's schedule format has one");
  std::string out;
  for (const auto &ops : program.order) {
    std::vector<std::string> cells;
    for (const PipelineOp &op : ops) {
      if (op.overlapsPrevious && !cells.empty()) {
        cells.back() = "(" + cells.back() + ";" + actionName(op) + ")" + kOverlap;
        continue;
      }
      cells.push_back(actionName(op));
    }
    for (size_t i = 0; i < cells.size(); ++i)
      out += (i ? "," : "") + cells[i];
    out += "\n";
  }
  return out;
}

} // namespace pf::sched
