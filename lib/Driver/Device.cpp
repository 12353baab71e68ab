//===- Device.cpp - The tools' --device option -----------------------------===//

#include "pf/Driver/Device.h"

#include "pf/Runtime/pfrt.h"

#include "llvm/Support/FormatVariadic.h"

namespace mlir::pf::driver {

const char *const kDeviceHelp =
    "Runtime backend: cpu, or cuda (an NVIDIA GPU; the CUDA backend must be "
    "built into libpfrt)";

const char *const kGemmPrecisionHelp =
    "Compute precision of the model's GEMMs (matmul, gemm, linear) on the GPU; K-FAC's "
    "factors, inverses and preconditioning and all other kernels stay f32, and the CPU "
    "computes f32 whatever is chosen";

llvm::Error checkDevice(const std::string &device, const char *tool, bool runsOnCuda) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError("--device " + device + ": " + why);
  };
  if (device == "cpu")
    return llvm::Error::success();
  if (device != "cuda")
    return fail("unknown device (expected cpu or cuda)");
  if (!pfrt_backend_built(PFRT_BACKEND_CUDA))
    return fail("this libpfrt was built without the CUDA backend (no CUDA toolkit "
                "was found when it was configured)");
  // Creating a context is the check: it finds the driver, the GPU and the
  // libraries, and says which is missing.
  pfrt_context_options options;
  pfrt_context_options_init(&options);
  options.backend = PFRT_BACKEND_CUDA;
  pfrt_context *ctx = pfrt_context_create(&options);
  if (!ctx)
    return fail(pfrt_last_error(nullptr));
  pfrt_context_destroy(ctx);
  if (runsOnCuda)
    return llvm::Error::success();
  // The kernels exist, but this tool still hands its programs host buffers
  // (parameters and optimizer state it reads back): running would read host
  // memory on the GPU. Say so instead of crashing.
  return fail(llvm::formatv("a GPU is usable, but {0} does not run programs on "
                            "the CUDA backend yet (see docs/cuda-backend.md)",
                            tool)
                  .str());
}

} // namespace mlir::pf::driver
