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

void mlir::pf::driver::formatDiagnostic(Diagnostic &diag, StringRef defaultFile,
                                        llvm::raw_ostream &os) {
  const char *severity = diag.getSeverity() == DiagnosticSeverity::Error     ? "error"
                         : diag.getSeverity() == DiagnosticSeverity::Warning ? "warning"
                                                                             : "note";
  std::string message = diag.str();
  os << fileOf(diag.getLocation(), defaultFile) << ": " << severity << ": " << message;
  if (auto name = dyn_cast<NameLoc>(diag.getLocation()))
    if (message.find(name.getName().str()) == std::string::npos)
      os << " [node '" << name.getName().getValue() << "']";
  os << "\n";
  for (Diagnostic &note : diag.getNotes())
    os << "  note: " << note.str() << "\n";
}

LogicalResult mlir::pf::driver::printDiagnostic(Diagnostic &diag, StringRef defaultFile) {
  formatDiagnostic(diag, defaultFile, llvm::errs());
  return success();
}
