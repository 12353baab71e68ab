//===- pf-run.cpp - run a model on the pf runtime ----------------------------===//
//
//   pf-run model.onnx --dim batch=2 --dim sequence=16 --inputs in.npz --outputs out.npz
//   pf-run model.mlir --inputs in.npz --repeat 10
//
// MODEL is an ONNX model (imported on the fly with the graph passes) or pf IR
// (text or bytecode). The model is lowered to the pfrt ABI, JIT-compiled with
// MLIR's ExecutionEngine and run on the CPU backend.
//
//===----------------------------------------------------------------------===//
#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Driver/OutputFiles.h"
#include "pf/Driver/Device.h"
#include "pf/Driver/Diagnostics.h"
#include "pf/Driver/ModuleFile.h"
#include "pf/Support/Npz.h"
#include "pf/Driver/Runner.h"
#include "pf/PipelineRuntime/RankExecutor.h"
#include "pf/PipelineRuntime/StageProgram.h"
#include "pf/Import/ONNXImporter.h"
#include "pf/Runtime/pfrt.h"
#include "pf/Transforms/OptionBinder.h"
#include "pf/Transforms/Passes.h"
#include "pf/Transforms/Pipeline/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <chrono>

using namespace mlir;
namespace cl = llvm::cl;
namespace drv = mlir::pf::driver;

static cl::OptionCategory category("pf-run options");
static cl::OptionCategory stepCategory("pf-run training-step options (with --training-step; "
                                       "those of pf-train and pf-opt --pf-training)");
static cl::opt<std::string> modelFile(cl::Positional, cl::desc("<model.onnx | model.mlir>"),
                                      cl::Required, cl::cat(category));
static cl::opt<std::string> inputsFile("inputs", cl::desc("Inputs as .npz keyed by input name"),
                                       cl::value_desc("in.npz"), cl::cat(category));
static cl::opt<std::string> outputsFile("outputs",
                                        cl::desc("Write the outputs as .npz keyed by output name"),
                                        cl::value_desc("out.npz"), cl::cat(category));
static cl::list<std::string> shapes("shape", cl::desc("ONNX input shape NAME=DxD (repeatable)"),
                                    cl::cat(category));
static cl::list<std::string> dims("dim", cl::desc("ONNX symbolic dimension NAME=N (repeatable)"),
                                  cl::cat(category));
// Bound to flags in main, whose --help shows the defaults.
static int repeat = 1, threads = 0;
static std::string device = "cpu";
static drv::GemmPrecision gemmPrecision = drv::GemmPrecision::FP32;
static cl::opt<std::string> entry("entry",
                                  cl::desc("Function of the pf IR to run (default: the first)"),
                                  cl::cat(category));
static cl::opt<std::string> profileFile(
    "profile", cl::desc("Time every kernel call and write per-op times as JSON "
                        "(format: docs/profile-format.md)"),
    cl::value_desc("profile.json"), cl::cat(category));
static cl::opt<std::string> aotDirectory(
    "aot", cl::desc("Compile ahead of time into DIR (model.o, model.weights, model_plan.h) "
                    "instead of running; examples/aot/driver.c shows how to link it"),
    cl::value_desc("DIR"), cl::cat(category));
static cl::opt<bool> aotProfile(
    "aot-profile",
    cl::desc("With --aot: wrap every kernel call in timing hooks, for pf-aot-run --profile"),
    cl::cat(category));
static cl::opt<bool> noRetie(
    "no-retie",
    cl::desc("An ONNX model: keep an exporter's folded transposed copy of a parameter (the "
             "tied decoder of PyTorch's TorchScript export) as a separate parameter"),
    cl::cat(category));
static cl::opt<bool> trainingStep(
    "training-step",
    cl::desc("Run one masked-LM training step instead of the forward pass: the inputs "
             "add 'labels', 'lr' (f64) and 'step' (i64); the outputs are 'loss', "
             "'grad/<parameter>' and, with --kfac, 'kfac/{A,B,A_inv,B_inv}/<weight>' (with "
             "--kfac-layer-norm also 'kfac/F/<scale>'; with --kfac-embeddings the tables' "
             "'kfac/{A,A_inv}/<table>' are [vocab], the diagonal)"),
    cl::cat(category));
static cl::opt<std::string> emitStepFile(
    "emit-step",
    cl::desc("With --training-step: also write the step (pf IR after the pf-training "
             "pipeline, before lowering) to this file"),
    cl::value_desc("FILE.mlir"), cl::cat(category));
/// The training-step options, bound to flags in main: those of pf-opt
/// --pf-training and pf-train, except that the step keeps its gradients and
/// K-FAC factors as results by default, which is what --training-step is for.
/// With --micro-batches an ONNX model is imported with --dim batch divided by
/// it; pf IR is taken as one micro-batch.
static mlir::pf::TrainingOptions training = [] {
  mlir::pf::TrainingOptions options;
  options.optimizer.keepGradients = true;
  options.precondition.exportFactors = true;
  return options;
}();
static cl::opt<bool> runStages(
    "run-stages",
    cl::desc("Run the stage functions of pf-split-stages (stage<s>_forward/_backward, or "
             "_backward_input then _backward_weight) as a single-process pipeline; with "
             "--micro-batches M the inputs hold M micro-batches (GPipe order); writes 'loss' "
             "and 'grad/<parameter>'"),
    cl::cat(category));
static cl::opt<bool> runRanks(
    "run-ranks",
    cl::desc("Under mpirun -np D: run the pf.rank_program of this rank (pf-build-rank-programs) "
             "over the stage functions, one rank per program; rank 0 writes 'loss' and "
             "'grad/<parameter>'"),
    cl::cat(category));
static cl::opt<std::string> pipelineSpec(
    "pipeline",
    cl::desc("With --training-step, under mpirun -np D: run the step pipeline-parallel, one "
             "stage per rank, as pf-train --pipeline does: \"stages=D schedule=gpipe|1f1b|"
             "zb-h1|zb-h2|interleaved microbatches=N [chunks=C] [overlap=false]\" (stages required); "
             "rank 0 writes 'loss' and the clipped 'grad/<parameter>' the updates applied"),
    cl::value_desc("OPTIONS"), cl::cat(category));
static cl::opt<bool> deviceBuffers(
    "device-buffers",
    cl::desc("Hold the weights, inputs, outputs and intermediates in backend memory, copied at "
             "the step boundary, as --device cuda does (on the CPU: a check of that path)"),
    cl::Hidden, cl::cat(category));
static cl::opt<bool> describe("describe", cl::desc("Print the model's inputs and outputs"),
                              cl::cat(category));
static cl::opt<bool> inferenceFusions(
    "inference-fusions",
    cl::desc("An ONNX model's forward pass on the CPU: run pf-inference-fusions first "
             "(attention's scaled and masked softmax, transposes folded into the batched "
             "matmuls, residual add + LayerNorm, linear + GELU); =false runs the graph as "
             "imported. pf IR runs as given (pf-opt --pf-inference-fusions fuses it)"),
    cl::init(true), cl::cat(category));
/// --pipeline, parsed in main.
static mlir::pf::PipelineRunOptions pipeline;

namespace {
int fail(const llvm::Twine &message) {
  llvm::errs() << "pf-run: error: " << message << "\n";
  return 1;
}


double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

/// Per-op median times over the runs; see docs/profile-format.md.
llvm::Error writeProfile(const drv::CompiledModel &model, const std::vector<double> &runs) {
  llvm::json::Array ops;
  double kernels = 0;
  for (auto [i, op] : llvm::enumerate(model.profile())) {
    if (op.ms.empty())
      continue;
    double mid = median(op.ms);
    kernels += mid;
    ops.push_back(llvm::json::Object{{"index", int64_t(i)},
                                     {"name", op.name},
                                     {"calls", int64_t(op.ms.size())},
                                     {"median_ms", mid}});
  }
  llvm::json::Object root{{"format", "pf-run-profile/1"},
                          {"model", modelFile.getValue()},
                          {"runs", int64_t(runs.size())},
                          {"threads", int64_t(threads)},
                          {"run_median_ms", median(runs) * 1e3},
                          {"kernel_sum_ms", kernels},
                          {"ops", std::move(ops)}};
  return drv::writeOutputFile(profileFile, "--profile", [&](llvm::raw_pwrite_stream &os) {
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  });
}

/// The passes pf-train uses (by default keeping the gradients and K-FAC
/// factors as results so one step can be checked from outside).
LogicalResult buildTrainingStep(ModuleOp module) {
  PassManager pm(module.getContext());
  mlir::pf::buildTrainingPipeline(pm, training);
  return pm.run(module);
}

/// --emit-step: the training step as pf IR text.

OwningOpRef<ModuleOp> loadModel(MLIRContext &context) {
  StringRef ext = llvm::sys::path::extension(modelFile);
  if (ext == ".onnx" || ext == ".onnxtext") {
    mlir::pf::ONNXImportOptions options;
    std::string error;
    if (!mlir::pf::parseDimensionOptions(shapes, dims, options, error)) {
      fail(error);
      return nullptr;
    }
    const int64_t stepMicrobatches =
        pipelineSpec.empty() ? training.microbatches : pipeline.microbatches;
    if (trainingStep && stepMicrobatches > 1) {
      // The model is built for one micro-batch; the step takes all of them.
      auto batch = options.dimValues.find("batch");
      if (batch == options.dimValues.end() || batch->second % stepMicrobatches != 0) {
        fail(llvm::formatv("--micro-batches {0} needs --dim batch=N with N a multiple of it",
                           stepMicrobatches));
        return nullptr;
      }
      batch->second /= stepMicrobatches;
    }
    OwningOpRef<ModuleOp> module = mlir::pf::importONNXFile(modelFile, &context, options);
    if (!module)
      return nullptr;
    PassManager pm(&context);
    mlir::pf::buildPostImportPipeline(pm, /*graphOpt=*/true, /*requireStatic=*/true,
                                      /*retie=*/!noRetie);
    if (failed(pm.run(*module)))
      return nullptr;
    return module;
  }
  llvm::SourceMgr sourceMgr;
  auto module = parseSourceFile<ModuleOp>(modelFile, sourceMgr, &context);
  if (!module)
    fail("cannot parse '" + modelFile + "' as pf IR");
  return module;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::pf::FlagBinder runFlags(category);
  runFlags.opt("repeat", repeat, "Run N times and print the median time");
  runFlags.opt("device", device, drv::kDeviceHelp);
  runFlags.opt("gemm-precision", gemmPrecision, drv::kGemmPrecisionHelp,
               drv::gemmPrecisionValues());
  runFlags.opt("num-threads", threads,
               "Runtime threads (0: all cores; at most " + std::to_string(PFRT_MAX_THREADS) +
                   ", PFRT_MAX_THREADS); they sleep at barriers (OMP_WAIT_POLICY=passive) "
                   "unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set");
  mlir::pf::FlagBinder stepFlags(stepCategory);
  training.bindOptions(stepFlags);
  cl::HideUnrelatedOptions({&category, &stepCategory});
  cl::ParseCommandLineOptions(argc, argv, "pf-run: run a model on the pf runtime (CPU; --device cuda for the GPU backend)\n");
  if (auto err = drv::checkDevice(device, "pf-run", /*runsOnCuda=*/true))
    return fail(llvm::toString(std::move(err)));
  const bool onCuda = device == "cuda";
  if (onCuda && (runStages || runRanks || !pipelineSpec.empty()))
    return fail("--device cuda runs one step (the forward pass, or --training-step); "
                "--run-stages, --run-ranks and --pipeline run on the CPU only for now");
  if ((onCuda || deviceBuffers) && !profileFile.empty())
    return fail("--profile times each kernel's host call: it needs --device cpu");
  if (repeat < 1)
    return fail("--repeat must be >= 1");
  if (aotProfile && aotDirectory.empty())
    return fail("--aot-profile needs --aot DIR");
  if (threads < 0)
    return fail("--num-threads must be >= 0");
  if (threads > PFRT_MAX_THREADS)
    return fail(llvm::formatv("--num-threads {0} exceeds the limit of {1} (PFRT_MAX_THREADS)",
                              threads, PFRT_MAX_THREADS));
  if (!trainingStep) {
    std::vector<std::string> given = stepFlags.given();
    if (runStages || runRanks) // its micro-batches: the inputs' rows, weighted as the step's
      llvm::erase(given, "--micro-batches");
    if (!emitStepFile.empty())
      given.push_back("--emit-step");
    if (!given.empty())
      return fail(llvm::join(given, ", ") + " need --training-step");
  }
  if (training.microbatches < 1)
    return fail("--micro-batches must be >= 1");
  // Before the model is compiled and run: no output over the model, the
  // inputs or another output, every destination writable.
  if (auto err = drv::checkOutputs(
          {{"--outputs", outputsFile}, {"--profile", profileFile}, {"--emit-step", emitStepFile}},
          {{"MODEL", modelFile}, {"--inputs", inputsFile}}))
    return fail(llvm::toString(std::move(err)));
  if (!pipelineSpec.empty()) {
    mlir::pf::BoundPipelineOptions<mlir::pf::PipelineRunOptions> parsed;
    if (failed(parsed.parseOnce(pipelineSpec)))
      return fail("--pipeline \"" + pipelineSpec + "\": see the messages above");
    pipeline = parsed.get();
    if (std::string err = mlir::pf::checkPipelineRunOptions(pipeline, parsed.given());
        !err.empty())
      return fail("--pipeline: " + err);
    if (!trainingStep)
      return fail("--pipeline needs --training-step");
    if (pipeline.stages < 1)
      return fail("--pipeline needs stages=D, the job's ranks (got " +
                  llvm::Twine(pipeline.stages) + ")");
    if (pipeline.microbatches < 1)
      return fail("--pipeline: microbatches must be >= 1");
    if (training.microbatches != 1 && training.microbatches != pipeline.microbatches)
      return fail(llvm::formatv("--micro-batches {0} but --pipeline has microbatches={1}",
                                training.microbatches, pipeline.microbatches));
    if (training.kfac)
      return fail("--kfac with --pipeline is not supported yet");
    if (!entry.empty() || !aotDirectory.empty() || !profileFile.empty() || runStages || runRanks)
      return fail("--pipeline takes none of --entry, --aot, --profile, --run-stages, "
                  "--run-ranks");
  }

  DialectRegistry registry;
  registry.insert<mlir::pf::PFDialect, func::FuncDialect, arith::ArithDialect,
                  cf::ControlFlowDialect, LLVM::LLVMDialect>();
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    return drv::printDiagnostic(diag, modelFile);
  });
  OwningOpRef<ModuleOp> module = loadModel(context);
  if (!module)
    return 1;
  if (runStages && (trainingStep || !entry.empty() || !aotDirectory.empty() ||
                    !profileFile.empty() || !emitStepFile.empty()))
    return fail("--run-stages takes none of --training-step, --entry, --aot, --profile, "
                "--emit-step");
  if (runRanks && (runStages || trainingStep || !entry.empty() || !aotDirectory.empty() ||
                   !profileFile.empty() || !emitStepFile.empty()))
    return fail("--run-ranks takes none of --run-stages, --training-step, --entry, --aot, "
                "--profile, --emit-step");
  if (runRanks) {
    drv::RankRunOptions rankOptions;
    rankOptions.inputsFile = inputsFile;
    rankOptions.outputsFile = outputsFile;
    rankOptions.microbatches = llvm::is_contained(stepFlags.given(), "--micro-batches")
                                   ? training.microbatches
                                   : 0;
    rankOptions.threads = threads;
    return drv::runRanksTool(*module, rankOptions);
  }
  if (runStages)
    return drv::runStagesTool(*module, inputsFile, outputsFile, training.microbatches, threads);
  if (!pipelineSpec.empty()) {
    PassManager pm(&context);
    mlir::pf::buildPipelinedTrainingPipeline(pm, training, pipeline);
    if (failed(pm.run(*module)))
      return fail("building the pipelined training step failed");
    if (!emitStepFile.empty())
      if (auto err = drv::writeModuleFile(*module, emitStepFile, "--emit-step"))
        return fail(llvm::toString(std::move(err)));
    drv::RankRunOptions rankOptions;
    rankOptions.inputsFile = inputsFile;
    rankOptions.outputsFile = outputsFile;
    rankOptions.threads = threads;
    rankOptions.overlapTransfers = pipeline.overlap;
    return drv::runRanksTool(*module, rankOptions);
  }
  if (trainingStep && failed(buildTrainingStep(*module)))
    return fail("building the training step failed");
  // The fused ops have no gradient and no CUDA kernel yet, and an --aot
  // object may run on either backend: only an ONNX model's forward pass
  // JIT-run on the CPU takes them (pf IR may hold a step built by pf-opt,
  // whose results are compared bit for bit with other schedules).
  StringRef modelExt = llvm::sys::path::extension(modelFile);
  bool onnxForward = (modelExt == ".onnx" || modelExt == ".onnxtext") && !trainingStep;
  if (inferenceFusions && onnxForward && !onCuda && aotDirectory.empty()) {
    PassManager pm(&context);
    mlir::pf::buildInferenceFusionPipeline(pm);
    if (failed(pm.run(*module)))
      return fail("the inference fusions failed");
  }
  if (!emitStepFile.empty())
    if (auto err = drv::writeModuleFile(*module, emitStepFile, "--emit-step"))
      return fail(llvm::toString(std::move(err)));

  if (!aotDirectory.empty()) {
    if (auto err = drv::CompiledModel::writeAot(*module, aotDirectory, entry, aotProfile))
      return fail(llvm::toString(std::move(err)));
    llvm::outs() << "wrote " << aotDirectory << "/model.o, model.weights, model_plan.h\n";
    return 0;
  }
  drv::CompiledModel::Options options;
  options.threads = threads;
  options.function = entry;
  options.profile = !profileFile.empty();
  // A step that updates parameters (optimizer, K-FAC state) writes them in
  // place: give it its own copies rather than the imported blobs.
  options.ownParameters = drv::CompiledModel::updatesParameters(*module);
  options.backend = onCuda ? PFRT_BACKEND_CUDA : PFRT_BACKEND_CPU;
  options.deviceBuffers = deviceBuffers;
  options.gemmPrecision = int32_t(gemmPrecision);
  auto compiled = drv::CompiledModel::compile(*module, options);
  if (!compiled)
    return fail(llvm::toString(compiled.takeError()));
  drv::CompiledModel &model = **compiled;
  if (describe) {
    for (const auto &spec : model.inputs())
      llvm::outs() << "input  " << spec.name << ": " << drv::dtypeName(spec.dtype) << " "
                   << drv::shapeText(spec.shape) << "\n";
    for (const auto &spec : model.outputs())
      llvm::outs() << "output " << spec.name << ": " << drv::dtypeName(spec.dtype) << " "
                   << drv::shapeText(spec.shape) << "\n";
    const auto &s = model.stats();
    llvm::outs() << llvm::formatv("kernels {0}, arena {1:F1} MB (peak live {2:F1} MB), "
                                  "parameters {3:F1} MB, lower {4:F2} s, jit {5:F2} s\n",
                                  s.kernelCalls, s.arenaBytes / 1e6, s.peakLiveBytes / 1e6,
                                  s.parameterBytes / 1e6, s.lowerSeconds, s.jitSeconds);
  }
  if (inputsFile.empty()) {
    if (describe || !emitStepFile.empty())
      return 0;
    return fail("--inputs FILE.npz is required (use --describe to list the inputs)");
  }
  auto inputs = drv::readNpz(inputsFile);
  if (!inputs)
    return fail(inputs.error());

  std::map<std::string, drv::NpyArray> outputs;
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (auto err = model.run(*inputs, outputs))
      return fail(llvm::toString(std::move(err)));
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (repeat > 1) {
    std::sort(times.begin(), times.end());
    llvm::outs() << llvm::formatv("median {0:F3} ms over {1} runs (min {2:F3} ms)\n",
                                  times[times.size() / 2] * 1e3, repeat, times.front() * 1e3);
  }
  for (const auto &spec : model.outputs())
    llvm::outs() << drv::outputSummary(spec.name, outputs[spec.name]);
  if (!profileFile.empty())
    if (auto err = writeProfile(model, times))
      return fail(llvm::toString(std::move(err)));
  if (!outputsFile.empty())
    if (::pf::Status written = drv::writeNpz(outputsFile, outputs); !written.ok())
      return fail(written.message());
  return 0;
}
