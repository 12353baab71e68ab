//===- Diagnostics.h - diagnostics handed to a C API caller -----*- C++ -*-===//
//
// The C API reports problems as text through an MlirStringCallback rather
// than on stderr: a DiagnosticCapture collects the context's diagnostics
// while one call runs (formatted as the pf tools print them) and the call's
// own messages, and hands the text over at the end.
//
//===----------------------------------------------------------------------===//
#ifndef PF_LIB_CAPI_DIAGNOSTICS_H
#define PF_LIB_CAPI_DIAGNOSTICS_H

#include "pf/Driver/Diagnostics.h"

#include "mlir-c/Support.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::pf::capi {

class DiagnosticCapture {
public:
  /// Captures the diagnostics of `context` until destroyed; `file` names
  /// those without a location. Operations are not printed into the notes
  /// meanwhile (as in the pf tools): a whole model would flood the message.
  DiagnosticCapture(MLIRContext *context, llvm::StringRef file)
      : context(context), file(file.str()),
        printedOps(context->shouldPrintOpOnDiagnostic()),
        handler(context, [this](Diagnostic &diag) {
          llvm::raw_string_ostream os(text);
          driver::formatDiagnostic(diag, this->file, os);
          return success();
        }) {
    context->printOpOnDiagnostic(false);
  }
  ~DiagnosticCapture() { context->printOpOnDiagnostic(printedOps); }

  /// Adds "error: MESSAGE".
  void error(const llvm::Twine &message) { text += ("error: " + message + "\n").str(); }
  void error(llvm::Error err) { error(llvm::toString(std::move(err))); }

  /// Hands what was collected to `callback` (when there is text and a
  /// callback).
  void report(MlirStringCallback callback, void *userData) const {
    if (callback && !text.empty())
      callback(MlirStringRef{text.data(), text.size()}, userData);
  }

  /// Reports a failure: what was collected, or `fallback` when nothing was.
  void fail(const llvm::Twine &fallback, MlirStringCallback callback, void *userData) {
    if (text.empty())
      error(fallback);
    report(callback, userData);
  }

private:
  MLIRContext *context;
  std::string file;
  std::string text;
  bool printedOps;
  ScopedDiagnosticHandler handler;
};

/// Whether pf's code and libMLIR.so agree on MLIR's implicit TypeIDs (see
/// docs/embedding.md): false when the dynamic linker gave libPFCAPI.so its
/// own copies of their statics, which happens when libMLIR.so was loaded
/// into another local scope first. Then `diagnostics` gets an error saying
/// so, instead of the verifier failures that would follow.
bool checkSharedTypeIDs(MLIRContext *context, DiagnosticCapture &diagnostics);

} // namespace mlir::pf::capi

#endif // PF_LIB_CAPI_DIAGNOSTICS_H
