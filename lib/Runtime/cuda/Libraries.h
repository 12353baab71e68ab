//===- Libraries.h - cuBLAS and cuSOLVER, loaded on first use -----*- C++ -*-===//
//
// libpfrt does not link cuBLAS and cuSOLVER: loading them costs every
// process ~0.15 s and ~250 MB of mapped pages at start-up, and most
// processes (every CPU run, every test) never create a CUDA context. They
// are dlopen'ed when the first CUDA context is created, and called through
// the table below, whose entries have the toolkit headers' exact types.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_LIBRARIES_H
#define PF_RUNTIME_CUDA_LIBRARIES_H

#include <cublas_v2.h>
#include <cusolverDn.h>

#include <cstddef>

// The functions the backend calls, by their exported names (cublas_v2.h
// maps cublasSgemm to cublasSgemm_v2 with macros, so calls written
// lib().cublasSgemm(...) reach the _v2 entries below).
#define PFRT_CUBLAS_FUNCTIONS(X)                                               \
  X(cublasCreate_v2)                                                           \
  X(cublasDestroy_v2)                                                          \
  X(cublasSetStream_v2)                                                        \
  X(cublasSetPointerMode_v2)                                                   \
  X(cublasGetStatusString)                                                     \
  X(cublasSgemm_v2)                                                            \
  X(cublasDgemm_v2)                                                            \
  X(cublasSgemmStridedBatched)                                                 \
  X(cublasDgemmStridedBatched)                                                 \
  X(cublasSsyrk_v2)                                                            \
  X(cublasDsyrk_v2)
// cublasGemmEx and cublasGemmStridedBatchedEx have C++ overloads (a legacy
// cudaDataType compute type), so their slots spell out the exported types.
#define PFRT_CUBLAS_OVERLOADED_FUNCTIONS(X)                                                        \
  X(cublasGemmEx, cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,    \
                                     int, int, const void *, const void *, cudaDataType, int,      \
                                     const void *, cudaDataType, int, const void *, void *,        \
                                     cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t))    \
  X(cublasGemmStridedBatchedEx,                                                                    \
    cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,        \
                       const void *, const void *, cudaDataType, int, long long, const void *,     \
                       cudaDataType, int, long long, const void *, void *, cudaDataType, int,      \
                       long long, int, cublasComputeType_t, cublasGemmAlgo_t))
#define PFRT_CUSOLVER_FUNCTIONS(X)                                             \
  X(cusolverDnCreate)                                                          \
  X(cusolverDnDestroy)                                                         \
  X(cusolverDnSetStream)                                                       \
  X(cusolverDnSpotrf_bufferSize)                                               \
  X(cusolverDnDpotrf_bufferSize)                                               \
  X(cusolverDnSpotrf)                                                          \
  X(cusolverDnDpotrf)                                                          \
  X(cusolverDnSpotri_bufferSize)                                               \
  X(cusolverDnDpotri_bufferSize)                                               \
  X(cusolverDnSpotri)                                                          \
  X(cusolverDnDpotri)                                                          \
  X(cusolverDnCreateParams)                                                    \
  X(cusolverDnDestroyParams)                                                   \
  X(cusolverDnXsyevd_bufferSize)                                               \
  X(cusolverDnXsyevd)

namespace pfrt::cuda {

struct Libraries {
#define PFRT_LIBRARY_SLOT(name) decltype(&::name) name = nullptr;
  PFRT_CUBLAS_FUNCTIONS(PFRT_LIBRARY_SLOT)
  PFRT_CUSOLVER_FUNCTIONS(PFRT_LIBRARY_SLOT)
#undef PFRT_LIBRARY_SLOT
#define PFRT_TYPED_LIBRARY_SLOT(name, ...)                                                         \
  using name##_type = __VA_ARGS__;                                                                 \
  name##_type name = nullptr;
  PFRT_CUBLAS_OVERLOADED_FUNCTIONS(PFRT_TYPED_LIBRARY_SLOT)
#undef PFRT_TYPED_LIBRARY_SLOT
};

/// Loads both libraries once per process (thread-safe). False, with the
/// reason in `why`, when either or one of its functions is missing.
bool loadLibraries(char *why, size_t size);

/// The loaded functions; only valid after loadLibraries returned true (a
/// CUDA context exists).
const Libraries &lib();

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_LIBRARIES_H
