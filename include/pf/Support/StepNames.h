//===- StepNames.h - Names of a step's results the host reads ---*- C++ -*-===//
//
// The results of a compiled step that host code reads by name, for both the
// compiler (pf/Dialect/PF/IR/PFStageValues.h) and the LLVM-free training
// loop and trainer.
//
//===----------------------------------------------------------------------===//
#ifndef PF_SUPPORT_STEPNAMES_H
#define PF_SUPPORT_STEPNAMES_H

namespace mlir::pf {

/// The i32 result of a K-FAC refresh: the inverses that needed more damping
/// or kept the previous ones.
inline constexpr char kKfacIssuesOutput[] = "kfac/issues";

} // namespace mlir::pf

#endif // PF_SUPPORT_STEPNAMES_H
