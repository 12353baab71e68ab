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

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::pf::driver {

/// The help text of --device.
extern const char *const kDeviceHelp;

/// --gemm-precision: the model GEMMs' compute precision on a GPU
/// (pfrt_context_set_gemm_precision; PFRT_GEMM_* values).
enum class GemmPrecision : int32_t { FP32 = 0, TF32 = 1, BF16 = 2 };
extern const char *const kGemmPrecisionHelp;
inline auto gemmPrecisionValues() {
  return llvm::cl::values(
      clEnumValN(GemmPrecision::FP32, "fp32", "f32 multiplies (the default)"),
      clEnumValN(GemmPrecision::TF32, "tf32", "TF32 multiplies, f32 accumulation"),
      clEnumValN(GemmPrecision::BF16, "bf16", "BF16 multiplies, f32 accumulation"));
}

/// Success when the tool can run on `device` ("cpu" or "cuda"); otherwise
/// an error whose message follows "--device <name>: ": an unknown name, a
/// CUDA backend not built, no usable GPU, or (with a GPU, unless the tool
/// `runsOnCuda`) that the tool does not run programs on the CUDA backend yet.
llvm::Error checkDevice(const std::string &device, const char *tool, bool runsOnCuda = false);

} // namespace mlir::pf::driver

#endif // PF_DRIVER_DEVICE_H
