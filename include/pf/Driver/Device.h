//===- Device.h - The tools' --device option ----------------------*- C++ -*-===//
//
// pf-run and pf-train take --device cpu|cuda. The lowered program is the
// same for both; the device only selects the runtime backend of the
// contexts the driver creates. checkDevice runs before any model is loaded
// so that an unusable device fails fast, with the runtime's reason.
//
//===----------------------------------------------------------------------===//

#ifndef PF_DRIVER_DEVICE_H
#define PF_DRIVER_DEVICE_H

#include "llvm/Support/Error.h"

#include <string>

namespace mlir::pf::driver {

/// The help text of --device.
extern const char *const kDeviceHelp;

/// Success when the tool can run on `device` ("cpu" or "cuda"); otherwise
/// an error whose message follows "--device <name>: ": an unknown name, a
/// CUDA backend not built, no usable GPU, or (with a GPU, unless the tool
/// `runsOnCuda`) that the tool does not run programs on the CUDA backend yet.
llvm::Error checkDevice(const std::string &device, const char *tool, bool runsOnCuda = false);

} // namespace mlir::pf::driver

#endif // PF_DRIVER_DEVICE_H
