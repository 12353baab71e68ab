//===- Diagnostics.cpp - how the pf tools print diagnostics -----------------===//
#include "pf/Driver/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

static std::string fileOf(Location loc, StringRef defaultFile) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return fileOf(name.getChildLoc(), defaultFile);
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    if (file.getLine() == 0)
      return file.getFilename().str();
    return (file.getFilename().str() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  }
  if (auto fused = dyn_cast<FusedLoc>(loc))
    return fused.getLocations().empty() ? defaultFile.str()
                                        : fileOf(fused.getLocations().front(), defaultFile);
  return defaultFile.str();
}

LogicalResult mlir::pf::driver::printDiagnostic(Diagnostic &diag, StringRef defaultFile) {
  const char *severity = diag.getSeverity() == DiagnosticSeverity::Error     ? "error"
                         : diag.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                                                                             : "note";
  std::string message = diag.str();
  llvm::errs() << fileOf(diag.getLocation(), defaultFile) << ": " << severity << ": " << message;
  if (auto name = dyn_cast<NameLoc>(diag.getLocation()))
    if (message.find(name.getName().str()) == std::string::npos)
      llvm::errs() << " [node '" << name.getName().getValue() << "']";
  llvm::errs() << "\n";
  for (Diagnostic &note : diag.getNotes())
    llvm::errs() << "  note: " << note.str() << "\n";
  return success();
}
