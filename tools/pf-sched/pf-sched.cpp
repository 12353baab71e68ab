//===- pf-sched.cpp - What-if pipeline + K-FAC scheduling from the command line ===//
//
// Builds a pipeline schedule from a measured profile (or the analytic cost
// model), places the K-FAC work into its bubbles and writes the report, a
// Chrome trace and an SVG timeline. Errors: a message on stderr, exit code 1.
//
//===----------------------------------------------------------------------===//

#include "pf/Schedule/Grain.h"
#include "pf/Schedule/KfacOffload.h"
#include "pf/Schedule/Scheduler.h"
#include "pf/Schedule/TorchCsv.h"
#include "pf/Schedule/Verify.h"
#include "pf/Support/OutputFiles.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <limits>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

using namespace pf::sched;
using pf::Expected;
using pf::Status;

namespace {

const char *kHelp = R"(usage: pf-sched [options]

Schedules one pipeline-parallel training step and places the K-FAC work
(curvature, inversion, preconditioning) into its bubbles.

Cost model (one of):
  --profile FILE            measured per-layer times (docs/profile-format.md)
  --device NAME --model NAME
                            analytic model; devices: p100, v100, a100, h100,
                            h200; models: bert-base, bert-large
  --microbatch-size B       analytic: sequences per micro-batch (default 32)
  --seq-len S               analytic: sequence length (default 128)
  --precision P             analytic: fp32 (default) or tf32

Pipeline:
  --schedule NAME           gpipe, 1f1b, interleaved, chimera, zb-h1, zb-h2,
                            zb-v, dualpipe, dualpipev (default 1f1b); zb-v and
                            dualpipev run two stages per device (a V),
                            dualpipe two pipelines like chimera
  --schedule-csv FILE       run the schedule in FILE instead: PyTorch's
                            compute-only CSV (torch.distributed.pipelining
                            _dump_csv; docs/schedule.md), verified first;
                            --stages/--microbatches may be left out
  --stages D                devices (required; at most 1024, kMaxStages, also
                            for the stages: devices x chunks, 2 x devices for
                            zb-v and dualpipev)
  --microbatches N          micro-batches per step (required; chimera and
                            dualpipe: N/2 each way; dualpipe(v): N >= 2D; at
                            most 1024, kMaxMicrobatches)
  --layers-per-stage K      layers in every stage; stages*K must equal the
                            model's layers. Omitted: min-max partition
  --chunks V                interleaved: model chunks per device (default 2)
  --partition-grain G       unit of partitioning: block (default, the
                            profile's layers), half (attention and FFN half
                            of every block), linear (its 6 linears); the
                            block's times are split by the analytic FLOP
                            shares (needs the block's shape: profile key
                            'block', or the analytic model). Layers, also for
                            --layers-per-stage, are then these units

K-FAC:
  --policy NAME             pf (default), pipefisher (reference greedy), none
  --refresh-steps K         steps per inverse refresh; default: automatic
                            (at most 1024, kMaxRefreshSteps)
  --max-overhead F          pf automatic K: allowed step lengthening as a
                            fraction of the bare step (default: the time of
                            preconditioning after the flush)
  --refresh CHOICE          pf without --refresh-steps: interval (default;
                            the smallest K within the budget above) or
                            throughput (the highest utilization with K-FAC
                            whose step exceeds T_pipe + the unmovable
                            preconditioning by at most --max-overhead-beyond;
                            integer K or a staggered refresh, each layer at
                            its own steps of a period)
  --max-overhead-beyond F   throughput: allowed step beyond T_pipe + the
                            unmovable, as a fraction of it (default 0.01)
  --max-stagger-period W    throughput: longest period of a staggered
                            refresh in steps (default 24; at least 2K)
  --margin F                bubble safety margin (default 0.05)
  --split-pieces P          pf: smallest piece = 1/P of a task (default 8;
                            1 = never split; at most 1024, kMaxSplitPieces)
  --no-steady-state         pf: do not overlap consecutive refreshes
  --kfac-offload            let devices that idle more run inversions of
                            other devices' layers (factor sent there, inverse
                            sent back over the link: profile key link_gbs);
                            one-pipeline schedules; the moves are listed

Memory (per device, peak of a step; the report shows it):
  --memory-cap-gb X         refuse a schedule or partition that needs more
                            than X GB (1e9 bytes) on any device; the message
                            names the devices and by how much they exceed it.
                            Needs a cost model with memory (the analytic one,
                            or a profile with activation_bytes, parameters,
                            kfac_linears)
  --optimizer-states K      optimizer state per parameter in fp32 copies
                            (default 2, AdamW's m and v; SGD momentum 1)

Output:
  --report-json FILE        report as JSON
  --trace FILE              Chrome trace / Perfetto JSON of the window
  --svg FILE                SVG timeline of the window
  --export-profile FILE     write the cost model in the profile format
  --export-torch-csv FILE   write the schedule as PyTorch's compute-only CSV
                            (one line per rank; not for chimera, dualpipe)
  --validate                verify the schedule (placement, every pass once,
                            dependency order, no deadlock) and check the
                            timeline (dependencies, overlaps)
  --quiet                   no text report on stdout
  --help                    this text

Limits (docs/limits.md): a profile holds at most 4096 layers (kMaxLayers),
each time at most 1e9 ms (kMaxProfileTimeMs); numbers must be finite.
)";

struct Options {
  std::map<std::string, std::string> values;
  bool validate = false, quiet = false, help = false, noSteadyState = false;
  bool kfacOffload = false;
};

/// Options that take a value; everything else is a flag.
const std::vector<std::string> kValued = {
    "profile",      "device",        "model",          "microbatch-size",
    "seq-len",      "precision",     "schedule",       "stages",
    "microbatches", "layers-per-stage", "chunks",      "policy",
    "refresh-steps", "max-overhead", "margin",         "split-pieces",
    "refresh",      "max-overhead-beyond", "max-stagger-period",
    "report-json",  "trace",         "svg",            "export-profile",
    "schedule-csv", "export-torch-csv", "memory-cap-gb", "optimizer-states",
    "partition-grain"};

Expected<Options> parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0)
      return Status::error("unexpected argument '" + arg + "' (see --help)");
    std::string name = arg.substr(2), value;
    bool inlineValue = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inlineValue = true;
    }
    bool valued = false;
    for (const std::string &v : kValued)
      valued |= v == name;
    if (valued) {
      if (!inlineValue) {
        if (i + 1 >= argc)
          return Status::error("option --" + name + " needs a value");
        value = argv[++i];
      }
      o.values[name] = value;
    } else if (name == "validate" && !inlineValue) {
      o.validate = true;
    } else if (name == "quiet" && !inlineValue) {
      o.quiet = true;
    } else if (name == "help" && !inlineValue) {
      o.help = true;
    } else if (name == "no-steady-state" && !inlineValue) {
      o.noSteadyState = true;
    } else if (name == "kfac-offload" && !inlineValue) {
      o.kfacOffload = true;
    } else {
      return Status::error("unknown option '--" + name + "' (see --help)");
    }
  }
  return o;
}

/// An integer option; values outside int (what the library takes) are
/// refused, not narrowed (4294967298 is not 2).
Expected<int> intOption(const Options &o, const std::string &name, int fallback,
                        bool required = false) {
  auto it = o.values.find(name);
  if (it == o.values.end()) {
    if (required)
      return Status::error("missing required option --" + name);
    return fallback;
  }
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0')
    return Status::error("--" + name + " expects an integer, got '" +
                         it->second + "'");
  if (errno == ERANGE || v < std::numeric_limits<int>::min() ||
      v > std::numeric_limits<int>::max())
    return Status::error("--" + name + " " + it->second + " is out of range (at most " +
                         std::to_string(std::numeric_limits<int>::max()) + ")");
  return static_cast<int>(v);
}

Expected<double> doubleOption(const Options &o, const std::string &name,
                              double fallback) {
  auto it = o.values.find(name);
  if (it == o.values.end())
    return fallback;
  char *end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0')
    return Status::error("--" + name + " expects a number, got '" + it->second +
                         "'");
  if (!std::isfinite(v))
    return Status::error("--" + name + " expects a finite number, got '" + it->second +
                         "'");
  return v;
}

std::string stringOption(const Options &o, const std::string &name,
                         const std::string &fallback) {
  auto it = o.values.find(name);
  return it == o.values.end() ? fallback : it->second;
}

Expected<CostModel> costModel(const Options &o) {
  bool profile = o.values.count("profile");
  bool analytic = o.values.count("device") || o.values.count("model");
  if (profile && analytic)
    return Status::error("give either --profile or --device/--model, not both");
  if (profile)
    return loadProfile(o.values.at("profile"));
  if (!o.values.count("device") || !o.values.count("model"))
    return Status::error(
        "a cost model is required: --profile FILE, or --device and --model");
  auto device = findDevice(o.values.at("device"));
  if (!device)
    return device.status();
  auto model = findModel(o.values.at("model"));
  if (!model)
    return model.status();
  auto precision = parsePrecision(stringOption(o, "precision", "fp32"));
  if (!precision)
    return precision.status();
  auto batch = intOption(o, "microbatch-size", model->microBatch);
  auto seq = intOption(o, "seq-len", model->seqLen);
  if (!batch)
    return batch.status();
  if (!seq)
    return seq.status();
  if (*batch < 1 || *seq < 1)
    return Status::error("--microbatch-size and --seq-len must be positive");
  model->microBatch = *batch;
  model->seqLen = *seq;
  return analyticCostModel(*device, *model, *precision);
}

/// The cost model at the unit of --partition-grain.
Expected<CostModel> grainedCostModel(const Options &o) {
  auto costs = costModel(o);
  if (!costs)
    return costs;
  auto grain = parsePartitionGrain(stringOption(o, "partition-grain", "block"));
  if (!grain)
    return grain.status();
  return splitCostModel(*costs, *grain);
}

/// The schedule of --schedule-csv, verified; none without the option.
Expected<ImportedSchedule> importedSchedule(const Options &o) {
  if (!o.values.count("schedule-csv"))
    return ImportedSchedule{};
  if (o.values.count("schedule"))
    return Status::error("give either --schedule or --schedule-csv, not both");
  auto imported = loadTorchCsv(o.values.at("schedule-csv"));
  if (!imported)
    return imported.status();
  Status valid = verifyProgram(imported->program, &imported->steps);
  if (!valid.ok())
    return Status::error(o.values.at("schedule-csv") + ": " + valid.message());
  return imported;
}

/// --memory-cap-gb and --optimizer-states.
Status memoryOptions(const Options &o, MemoryOptions &memory) {
  auto cap = doubleOption(o, "memory-cap-gb", 0);
  if (!cap)
    return cap.status();
  if (o.values.count("memory-cap-gb")) {
    if (*cap <= 0)
      return Status::error("--memory-cap-gb must be positive, got '" +
                           o.values.at("memory-cap-gb") + "'");
    memory.capBytes = *cap * 1e9;
  }
  auto states = doubleOption(o, "optimizer-states", memory.optimizerStates);
  if (!states)
    return states.status();
  if (*states < 0)
    return Status::error("--optimizer-states must not be negative, got '" +
                         o.values.at("optimizer-states") + "'");
  memory.optimizerStates = *states;
  return Status::success();
}

/// --refresh, --max-overhead-beyond and --max-stagger-period.
Status refreshOptions(const Options &o, KfacOptions &kfac) {
  const std::string choice = stringOption(o, "refresh", "interval");
  if (choice == "throughput")
    kfac.refresh = RefreshChoice::Throughput;
  else if (choice != "interval")
    return Status::error("unknown --refresh '" + choice +
                         "' (known: interval, throughput)");
  auto beyond = doubleOption(o, "max-overhead-beyond", kfac.maxOverheadBeyond);
  if (!beyond)
    return beyond.status();
  if (*beyond < 0)
    return Status::error("--max-overhead-beyond must not be negative");
  kfac.maxOverheadBeyond = *beyond;
  auto period = intOption(o, "max-stagger-period", kfac.maxStaggerPeriod);
  if (!period)
    return period.status();
  if (*period < 1)
    return Status::error("--max-stagger-period must be positive");
  kfac.maxStaggerPeriod = *period;
  return Status::success();
}

Expected<ScheduleRequest> request(const Options &o, const ImportedSchedule &imported) {
  ScheduleRequest r;
  auto kind = parseScheduleKind(stringOption(o, "schedule", "1f1b"));
  if (!kind)
    return kind.status();
  r.kind = *kind;
  const bool fromFile = !imported.program.order.empty();
  if (fromFile) {
    r.kind = ScheduleKind::Imported;
    r.imported = &imported.program;
  }
  auto policy = parsePolicy(stringOption(o, "policy", "pf"));
  if (!policy)
    return policy.status();
  r.kfac.policy = *policy;
  auto stages = intOption(o, "stages", 0, !fromFile);
  auto micro = intOption(o, "microbatches", 0, !fromFile);
  auto lps = intOption(o, "layers-per-stage", 0);
  auto chunks = intOption(o, "chunks", 2);
  auto refresh = intOption(o, "refresh-steps", 0);
  auto pieces = intOption(o, "split-pieces", r.kfac.splitPieces);
  for (auto *v : {&stages, &micro, &lps, &chunks, &refresh, &pieces})
    if (!*v)
      return v->status();
  if (o.values.count("layers-per-stage") && *lps < 1)
    return Status::error("--layers-per-stage must be positive");
  if (o.values.count("refresh-steps") && *refresh < 1)
    return Status::error("--refresh-steps must be positive");
  r.devices = *stages;
  r.microbatches = *micro;
  r.layersPerStage = *lps;
  r.chunks = *chunks;
  r.kfac.refreshSteps = *refresh;
  r.kfac.splitPieces = *pieces;
  auto overhead = doubleOption(o, "max-overhead", r.kfac.maxOverhead);
  auto margin = doubleOption(o, "margin", r.kfac.margin);
  if (!overhead)
    return overhead.status();
  if (!margin)
    return margin.status();
  if (o.values.count("max-overhead") && *overhead < 0)
    return Status::error("--max-overhead must not be negative");
  r.kfac.maxOverhead = *overhead;
  r.kfac.margin = *margin;
  if (Status s = refreshOptions(o, r.kfac); !s.ok())
    return s;
  r.kfac.steadyState = !o.noSteadyState;
  r.kfacOffload = o.kfacOffload;
  r.validate = o.validate;
  Status memory = memoryOptions(o, r.memory);
  if (!memory.ok())
    return memory;
  return r;
}

Status writeOutputs(const Options &o, const ScheduleResult &result,
                    const CostModel &costs) {
  for (const char *key :
       {"report-json", "trace", "svg", "export-profile", "export-torch-csv"})
    if (o.values.count(key) && o.values.at(key).empty())
      return Status::error(std::string("--") + key + " needs a file name");
  ScheduleOutputs outputs;
  outputs.reportJson = stringOption(o, "report-json", "");
  outputs.chromeTrace = stringOption(o, "trace", "");
  outputs.svg = stringOption(o, "svg", "");
  Status written = writeScheduleOutputs(result, outputs);
  if (written.ok() && o.values.count("export-profile"))
    written = writeTextFile(o.values.at("export-profile"), profileToJson(costs));
  if (!written.ok() || !o.values.count("export-torch-csv"))
    return written;
  auto csv = programToTorchCsv(result.program);
  if (!csv)
    return csv.status();
  return writeTextFile(o.values.at("export-torch-csv"), *csv);
}

int fail(const std::string &message) {
  std::cerr << "pf-sched: error: " << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  auto options = parseArgs(argc, argv);
  if (!options)
    return fail(options.error());
  if (options->help || argc == 1) {
    std::cout << kHelp;
    return 0;
  }
  // Before the schedule is searched (minutes with --refresh throughput): no
  // output over an input or another output, every destination writable.
  auto given = [&](const char *key) {
    return pf::NamedPath{std::string("--") + key, stringOption(*options, key, "")};
  };
  if (std::string err = pf::checkOutputFiles(
          {given("report-json"), given("trace"), given("svg"), given("export-profile"),
           given("export-torch-csv")},
          {given("profile"), given("schedule-csv")});
      !err.empty())
    return fail(err);
  auto costs = grainedCostModel(*options);
  if (!costs)
    return fail(costs.error());
  for (const std::string &w : costs->warnings)
    std::cerr << "pf-sched: warning: " << w << "\n";
  auto imported = importedSchedule(*options);
  if (!imported)
    return fail(imported.error());
  auto req = request(*options, *imported);
  if (!req)
    return fail(req.error());
  auto result = schedulePipeline(*costs, *req);
  if (!result)
    return fail(result.error());
  if (options->validate) {
    Status verified = verifyProgram(result->program);
    if (!verified.ok())
      return fail("invalid schedule: " + verified.message());
  }
  if (!options->quiet) {
    std::cout << reportToText(result->report);
    if (options->kfacOffload)
      std::cout << "K-FAC offload: " << result->step.kfacMoves.size()
                << " factors moved\n"
                << describeKfacMoves(result->step.kfacMoves, *costs);
    if (options->validate)
      std::cout << "schedule verified: placement, every pass once, dependency "
                   "order, no deadlock\n"
                << "timeline valid: dependencies, device exclusivity, steps\n";
  }
  Status written = writeOutputs(*options, *result, *costs);
  if (!written.ok())
    return fail(written.message());
  return 0;
}
