//===- PFPlugin.cpp - the pf dialect and passes as an mlir-opt plugin -----===//
//
//   mlir-opt --load-dialect-plugin=build/lib/PFPlugin.so \
//            --load-pass-plugin=build/lib/PFPlugin.so \
//            --pass-pipeline='builtin.module(pf-graph-opt)' model.mlir
//
// One library serves as both plugin kinds, the way MLIR's
// examples/standalone does: the dialect entry point adds the pf dialect to
// the tool's registry, the pass entry point registers every pf pass and the
// pipelines pf-opt has (pf-graph-opt, pf-training, pf-pipeline,
// pf-pipelined-training). The library links libMLIR.so, as Debian's
// mlir-opt does, so the plugin and the tool share one copy of MLIR's
// registries; everything but the two entry points is hidden (PFPlugin.exports).
//
//===----------------------------------------------------------------------===//
#include "pf/Conversion/Passes.h"
#include "pf/Dialect/PF/IR/PFDialect.h"
#include "pf/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"

namespace {
/// Both entry points register the passes (a tool may load the library as a
/// dialect plugin only); pipelines may be registered once only.
void registerPFPassesOnce() {
  static const bool registered = [] {
    mlir::pf::registerPFPasses();
    mlir::pf::registerPFPipelines();
    mlir::pf::registerPFConversionPasses();
    return true;
  }();
  (void)registered;
}
} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK LLVM_ATTRIBUTE_VISIBILITY_DEFAULT
mlir::DialectPluginLibraryInfo mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "PF", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            registry->insert<mlir::pf::PFDialect>();
            registerPFPassesOnce();
          }};
}

extern "C" LLVM_ATTRIBUTE_WEAK LLVM_ATTRIBUTE_VISIBILITY_DEFAULT
mlir::PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "PFPasses", LLVM_VERSION_STRING,
          []() { registerPFPassesOnce(); }};
}
