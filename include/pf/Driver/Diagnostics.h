//===- Diagnostics.h - how the pf tools print diagnostics --------*- C++ -*-===//
#ifndef PF_DRIVER_DIAGNOSTICS_H
#define PF_DRIVER_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::pf::driver {

/// Prints "FILE: error: message [node 'NAME']" for diagnostics whose location
/// is an ONNX node (NameLoc over the model file), and file:line:col
/// otherwise. `defaultFile` names diagnostics without a location.
mlir::LogicalResult printDiagnostic(mlir::Diagnostic &diag, llvm::StringRef defaultFile);

/// The same text, written to `os` (the C API hands it to its caller).
void formatDiagnostic(mlir::Diagnostic &diag, llvm::StringRef defaultFile, llvm::raw_ostream &os);

} // namespace mlir::pf::driver

#endif // PF_DRIVER_DIAGNOSTICS_H
