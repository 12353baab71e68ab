//===- AbiKinds.h - C parameter lists from pfrt_abi.def's kinds --*- C++ -*-===//
//
// pfrt_abi.def lists each kernel as PFRT_KERNEL(name, Kind, Kind, ...). The
// macros here turn such a kind list into a parameter list
// (", const pfrt_tensor *a2, int32_t a1") and the matching argument list
// (", a2, a1"), so code can define functions with a kernel's signature from
// the table alone (common/Dispatch.cpp). Both start with a comma: they
// follow the leading `pfrt_context *ctx`. At most 16 kinds.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMMON_ABIKINDS_H
#define PF_RUNTIME_COMMON_ABIKINDS_H

#include "pf/Runtime/pfrt.h"

// The C type of each kind (pfrt_abi.def's header lists the same).
#define PFRT_KIND_TYPE_Tensor const pfrt_tensor *
#define PFRT_KIND_TYPE_TensorArray const pfrt_tensor *
#define PFRT_KIND_TYPE_I64Array const int64_t *
#define PFRT_KIND_TYPE_F64Out double *
#define PFRT_KIND_TYPE_I32Out int32_t *
#define PFRT_KIND_TYPE_I64Out int64_t *
#define PFRT_KIND_TYPE_Comm pfrt_comm *
#define PFRT_KIND_TYPE_I32 int32_t
#define PFRT_KIND_TYPE_I64 int64_t
#define PFRT_KIND_TYPE_F64 double

#define PFRT_KIND_CAT_(a, b) a##b
#define PFRT_KIND_CAT(a, b) PFRT_KIND_CAT_(a, b)
#define PFRT_KIND_COUNT_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12,   \
                         _13, _14, _15, _16, n, ...)                           \
  n
#define PFRT_KIND_COUNT(...)                                                   \
  PFRT_KIND_COUNT_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, \
                   3, 2, 1, )

// Parameters are numbered from the last one (a1) to the first (aN); the
// argument list uses the same numbering, so the two always line up.
#define PFRT_KIND_P1(k) , PFRT_KIND_TYPE_##k a1
#define PFRT_KIND_P2(k, ...) , PFRT_KIND_TYPE_##k a2 PFRT_KIND_P1(__VA_ARGS__)
#define PFRT_KIND_P3(k, ...) , PFRT_KIND_TYPE_##k a3 PFRT_KIND_P2(__VA_ARGS__)
#define PFRT_KIND_P4(k, ...) , PFRT_KIND_TYPE_##k a4 PFRT_KIND_P3(__VA_ARGS__)
#define PFRT_KIND_P5(k, ...) , PFRT_KIND_TYPE_##k a5 PFRT_KIND_P4(__VA_ARGS__)
#define PFRT_KIND_P6(k, ...) , PFRT_KIND_TYPE_##k a6 PFRT_KIND_P5(__VA_ARGS__)
#define PFRT_KIND_P7(k, ...) , PFRT_KIND_TYPE_##k a7 PFRT_KIND_P6(__VA_ARGS__)
#define PFRT_KIND_P8(k, ...) , PFRT_KIND_TYPE_##k a8 PFRT_KIND_P7(__VA_ARGS__)
#define PFRT_KIND_P9(k, ...) , PFRT_KIND_TYPE_##k a9 PFRT_KIND_P8(__VA_ARGS__)
#define PFRT_KIND_P10(k, ...) , PFRT_KIND_TYPE_##k a10 PFRT_KIND_P9(__VA_ARGS__)
#define PFRT_KIND_P11(k, ...) , PFRT_KIND_TYPE_##k a11 PFRT_KIND_P10(__VA_ARGS__)
#define PFRT_KIND_P12(k, ...) , PFRT_KIND_TYPE_##k a12 PFRT_KIND_P11(__VA_ARGS__)
#define PFRT_KIND_P13(k, ...) , PFRT_KIND_TYPE_##k a13 PFRT_KIND_P12(__VA_ARGS__)
#define PFRT_KIND_P14(k, ...) , PFRT_KIND_TYPE_##k a14 PFRT_KIND_P13(__VA_ARGS__)
#define PFRT_KIND_P15(k, ...) , PFRT_KIND_TYPE_##k a15 PFRT_KIND_P14(__VA_ARGS__)
#define PFRT_KIND_P16(k, ...) , PFRT_KIND_TYPE_##k a16 PFRT_KIND_P15(__VA_ARGS__)

#define PFRT_KIND_A1(k) , a1
#define PFRT_KIND_A2(k, ...) , a2 PFRT_KIND_A1(__VA_ARGS__)
#define PFRT_KIND_A3(k, ...) , a3 PFRT_KIND_A2(__VA_ARGS__)
#define PFRT_KIND_A4(k, ...) , a4 PFRT_KIND_A3(__VA_ARGS__)
#define PFRT_KIND_A5(k, ...) , a5 PFRT_KIND_A4(__VA_ARGS__)
#define PFRT_KIND_A6(k, ...) , a6 PFRT_KIND_A5(__VA_ARGS__)
#define PFRT_KIND_A7(k, ...) , a7 PFRT_KIND_A6(__VA_ARGS__)
#define PFRT_KIND_A8(k, ...) , a8 PFRT_KIND_A7(__VA_ARGS__)
#define PFRT_KIND_A9(k, ...) , a9 PFRT_KIND_A8(__VA_ARGS__)
#define PFRT_KIND_A10(k, ...) , a10 PFRT_KIND_A9(__VA_ARGS__)
#define PFRT_KIND_A11(k, ...) , a11 PFRT_KIND_A10(__VA_ARGS__)
#define PFRT_KIND_A12(k, ...) , a12 PFRT_KIND_A11(__VA_ARGS__)
#define PFRT_KIND_A13(k, ...) , a13 PFRT_KIND_A12(__VA_ARGS__)
#define PFRT_KIND_A14(k, ...) , a14 PFRT_KIND_A13(__VA_ARGS__)
#define PFRT_KIND_A15(k, ...) , a15 PFRT_KIND_A14(__VA_ARGS__)
#define PFRT_KIND_A16(k, ...) , a16 PFRT_KIND_A15(__VA_ARGS__)

/// ", T_N aN, ..., T_1 a1" for the kinds given.
#define PFRT_KIND_PARAMS(...)                                                  \
  PFRT_KIND_CAT(PFRT_KIND_P, PFRT_KIND_COUNT(__VA_ARGS__))(__VA_ARGS__)
/// ", aN, ..., a1", matching PFRT_KIND_PARAMS.
#define PFRT_KIND_ARGS(...)                                                    \
  PFRT_KIND_CAT(PFRT_KIND_A, PFRT_KIND_COUNT(__VA_ARGS__))(__VA_ARGS__)

#endif // PF_RUNTIME_COMMON_ABIKINDS_H
