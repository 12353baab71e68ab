//===- State.h - A CUDA context's device, stream and handles -----*- C++ -*-===//
//
// Included by the CUDA backend's sources only (it pulls in the toolkit's
// headers). Every kernel of a context runs on the context's one stream, so
// kernels of one context are ordered without events; the host waits only
// at pfrt_copy_to_host, pfrt_synchronize and scalar results (pfrt_dot).
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_STATE_H
#define PF_RUNTIME_CUDA_STATE_H

#include "../common/Call.h"
#include "../common/Context.h"
#include "DeviceError.h"
#include "Libraries.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

namespace pfrt::cuda {

struct State {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  /// cuSOLVER's info output (one int on the device) and the host buffer it
  /// is read back into.
  int *deviceInfo = nullptr;
  /// Errors kernels found (DeviceError.h), zeroed at creation; read and
  /// cleared at each host wait.
  DeviceError *deviceError = nullptr;
  /// Scratch device memory reused by kernels that need a workspace (grown
  /// on demand, freed with the context).
  void *scratch = nullptr;
  size_t scratchBytes = 0;
  char description[320] = "cuda";
};

inline State &stateOf(pfrt_context *ctx) { return *ctx->cuda; }
inline cudaStream_t streamOf(pfrt_context *ctx) { return ctx->cuda->stream; }

/// PFRT_INTERNAL with CUDA's message unless `err` is cudaSuccess.
pfrt_status check(const Call &call, cudaError_t err, const char *what);
/// The same for cuBLAS and cuSOLVER status codes.
pfrt_status check(const Call &call, cublasStatus_t err, const char *what);
pfrt_status check(const Call &call, cusolverStatus_t err, const char *what);
/// After a kernel launch: reports a bad launch configuration (the kernel's
/// own faults surface at the next synchronizing call).
pfrt_status launched(const Call &call, const char *kernel);
/// A device workspace of at least `bytes` owned by the context (valid until
/// the next call that asks for one).
pfrt_status scratch(const Call &call, size_t bytes, void **out);

/// Each family file fills its kernels' slots of the table.
void registerElementwise(KernelTable &table);
void registerRows(KernelTable &table);
void registerDataMovement(KernelTable &table);
void registerIndexing(KernelTable &table);
void registerLinalg(KernelTable &table);
void registerMatmulBackward(KernelTable &table);
void registerOptimizer(KernelTable &table);
/// The pfrt_comm_* slots (Communication.cpp): the communicator moves the
/// context's memory.
void registerCommunication(KernelTable &table);

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_STATE_H
