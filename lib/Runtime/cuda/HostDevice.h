//===- HostDevice.h - Functions compiled for both host and device -*- C++ -*-===//
//
// The *Math.h headers hold each CUDA kernel's per-element and per-row
// arithmetic as PFRT_HD functions: nvcc compiles them into the kernels, and
// GCC compiles the same text into unittests/Runtime/CudaMathTest.cpp, which
// runs them on the CPU against the CPU backend on every CI run (no GPU).
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CUDA_HOSTDEVICE_H
#define PF_RUNTIME_CUDA_HOSTDEVICE_H

#include <math.h> // ::sqrt(float) etc.: the overloads CUDA also has on the device
#include <stdint.h>

#ifdef __CUDACC__
#define PFRT_HD __host__ __device__ __forceinline__
#else
#define PFRT_HD inline
#endif

#endif // PF_RUNTIME_CUDA_HOSTDEVICE_H
