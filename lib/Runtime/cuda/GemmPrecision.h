//===- GemmPrecision.h - The compute type of a model GEMM -------*- C++ -*-===//
//
// One rule for every cuBLAS call of the model's matmul, gemm and linear
// (forward and backward, Linalg.cu and MatmulBackward.cu); K-FAC's GEMMs
// stay exact and never ask.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_GEMMPRECISION_H
#define PF_RUNTIME_CUDA_GEMMPRECISION_H

#include "State.h"

namespace pfrt::cuda {

/// cuBLAS's compute type of an f32 model GEMM at the context's precision
/// (pfrt_context_set_gemm_precision), or false: exact f32.
inline bool modelGemmCompute(const Call &call, cublasComputeType_t &type) {
  switch (call.context()->gemmPrecision) {
  case PFRT_GEMM_TF32:
    type = CUBLAS_COMPUTE_32F_FAST_TF32;
    return true;
  case PFRT_GEMM_BF16:
    type = CUBLAS_COMPUTE_32F_FAST_16BF;
    return true;
  default:
    return false;
  }
}

} // namespace pfrt::cuda

#endif // PF_RUNTIME_CUDA_GEMMPRECISION_H
