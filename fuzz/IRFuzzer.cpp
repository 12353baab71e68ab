//===- IRFuzzer.cpp - pf IR text -> parse, verify, pf passes --------------===//
//
// The input is an MLIR file as the lit tests write them: the first
// `RUN: pf-opt` line's --pf-* flags name the passes to run (so each test
// seeds the fuzzing of its own pass, and mutating the line reaches the
// others and their options); without one, a default pipeline is picked by
// a hash of the input. With --split-input-file each `// -----` chunk is a
// module of its own, as in pf-opt. A pass that succeeds must leave IR that
// verifies (the pass manager's own verifier is off so that the check is
// this target's, not a diagnostic).
//
//===----------------------------------------------------------------------===//
#include "FuzzTargets.h"

#include "pf/Conversion/Passes.h"
#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <mutex>

namespace pf::fuzz {
namespace {
using llvm::StringRef;

/// Used when the input names no passes.
constexpr const char *kDefaultPipelines[] = {
    "pf-infer-shapes,pf-dce",
    "pf-fuse-layer-norm,pf-fuse-gelu,pf-fuse-linear",
    "pf-graph-opt",
    "pf-partition",
    "pf-verify-rank-programs",
    "pf-lower-to-runtime",
};

/// Pass options that name output files: dropped so that fuzzing writes none.
bool isOutputOption(StringRef option) {
  StringRef key = option.split('=').first.trim();
  return key == "report" || key == "trace" || key == "svg";
}

/// "--pf-schedule=\"stages=2 microbatches=4\"" -> "pf-schedule{stages=2 microbatches=4}".
std::string passFromFlag(StringRef flag) {
  auto [name, value] = flag.split('=');
  value = value.trim();
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\''))
    value = value.drop_front().drop_back();
  llvm::SmallVector<StringRef> options;
  value.split(options, ' ', -1, /*KeepEmpty=*/false);
  std::string kept;
  for (StringRef option : options)
    if (!isOutputOption(option) && !option.contains('{') && !option.contains('}'))
      kept += (kept.empty() ? "" : " ") + option.str();
  std::string pass = name.str();
  if (!kept.empty())
    pass += "{" + kept + "}";
  return pass;
}

/// The passes of the first `RUN: pf-opt` line, and whether it splits its
/// input; empty when there is no such line or it names no pf pass.
std::pair<std::string, bool> passesFromRunLine(StringRef text) {
  size_t at = text.find("RUN: pf-opt");
  if (at == StringRef::npos)
    return {"", false};
  StringRef line = text.drop_front(at).take_until([](char c) { return c == '\n'; });
  std::string pipeline;
  bool split = line.contains("-split-input-file");
  // Flags are separated by spaces outside quotes.
  for (size_t i = 0; i < line.size();) {
    size_t flag = line.find("--pf-", i);
    if (flag == StringRef::npos)
      break;
    size_t end = flag;
    char quote = 0;
    for (; end < line.size(); ++end) {
      char c = line[end];
      if (quote) {
        if (c == quote)
          quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == ' ' || c == '|') {
        break;
      }
    }
    StringRef name = line.slice(flag + 2, end);
    if (!name.starts_with("pf-print-summary"))
      pipeline += (pipeline.empty() ? "" : ",") + passFromFlag(name);
    i = end;
  }
  return {pipeline, split};
}

void registerOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::registerTransformsPasses();
    mlir::pf::registerPFPasses();
    mlir::pf::registerPFPipelines();
    mlir::pf::registerPFConversionPasses();
  });
}

/// `source` must end in a NUL (MLIR's lexer stops there): callers pass a
/// std::string.
void runChunk(const std::string &source, const std::string &pipeline) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::pf::PFDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &diag) {
    if (verbose())
      llvm::errs() << diag.getLocation() << ": " << diag << "\n";
  });
  mlir::ParserConfig config(&context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, config);
  if (!module || mlir::failed(mlir::verify(*module)))
    return;
  mlir::PassManager pm(&context);
  pm.enableVerifier(false);
  std::string spec = "builtin.module(" + pipeline + ")";
  if (mlir::failed(mlir::parsePassPipeline(spec, pm, verbose() ? llvm::errs() : llvm::nulls())))
    return;
  bool passed = mlir::succeeded(pm.run(*module));
  if (verbose())
    llvm::errs() << spec << (passed ? ": succeeded\n" : ": failed\n");
  if (passed && mlir::failed(mlir::verify(*module)))
    __builtin_trap(); // a pass succeeded and left IR that does not verify
}
} // namespace

int fuzzIR(const uint8_t *data, size_t size) {
  registerOnce();
  StringRef text(reinterpret_cast<const char *>(data), size);
  auto [pipeline, split] = passesFromRunLine(text);
  if (pipeline.empty())
    pipeline = kDefaultPipelines[llvm::xxh3_64bits(text) % std::size(kDefaultPipelines)];
  if (!split) {
    runChunk(text.str(), pipeline);
    return 0;
  }
  llvm::SmallVector<StringRef> chunks;
  text.split(chunks, "// -----");
  for (StringRef chunk : chunks)
    runChunk(chunk.str(), pipeline);
  return 0;
}

} // namespace pf::fuzz
