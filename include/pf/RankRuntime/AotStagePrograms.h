//===- AotStagePrograms.h - A rank's stage functions from its library -*- C++ -*-===//
//
// An artifact's rank library (CompiledProgram::writeRankLibrary): the stage
// functions one rank calls, each an entry of pf_aot.h's format exported as
// `pf_aot_model_describe__<function>`, all binding one weights file in which
// every parameter lies once. Loaded and run as the rank runner's
// StagePrograms, on any backend. On the C++ standard library, dlopen and
// the runtime's C API only.
//
//===----------------------------------------------------------------------===//
#ifndef PF_RANKRUNTIME_AOTSTAGEPROGRAMS_H
#define PF_RANKRUNTIME_AOTSTAGEPROGRAMS_H

#include "pf/RankRuntime/RankRunner.h"
#include "pf/RankRuntime/StagePrograms.h"
#include "pf/Support/AotModel.h"

#include <memory>

namespace mlir::pf::driver {

/// One entry of a rank library as its manifest records it.
struct AotStageEntry {
  std::string function;       ///< the stage function
  std::string describeSymbol; ///< its exported description
  std::vector<TensorSpec> inputs, outputs;
};

/// Loads `library` and `weights` (their sizes and hashes checked already by
/// the caller): every entry's description checked against `entries`, the
/// library's fingerprint against `fingerprint`, the parameters' places
/// inside the weights.
::pf::Expected<std::unique_ptr<StagePrograms>>
loadAotStagePrograms(const std::string &library, const std::string &weights,
                     const std::vector<AotStageEntry> &entries,
                     const std::vector<AotParameter> &parameters, uint64_t fingerprint,
                     const AotModel::Options &options);

/// The lowered rank program `symbol` (pf_rank<r>) the rank library
/// `library` exports; its calls into pfrt_rank.h resolve to the loading
/// executable's (which must export them).
::pf::Expected<LoweredRankProgram> loadRankProgram(const std::string &library,
                                                   const std::string &symbol);

} // namespace mlir::pf::driver

#endif // PF_RANKRUNTIME_AOTSTAGEPROGRAMS_H
