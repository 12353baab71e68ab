//===- Elementwise.cu - Broadcasting binary ops, unary ops, GELU, fill ----===//
//
// One grid-stride kernel per shape of work; the op is a runtime switch
// inside ElementwiseMath.h's functions (uniform across a launch, so it does
// not diverge), which keeps nvcc's instantiations to f32 and f64. Also the
// gradients of the binary and unary ops: an operand that was broadcast gets
// its gradient in the same kernel that forms it, one block per element
// summing the elements that read it (no workspace of the result's size).
//
//===----------------------------------------------------------------------===//

#include "../common/TensorChecks.h"
#include "ElementwiseMath.h"
#include "Launch.h"

#include <type_traits>

namespace pfrt::cuda {
namespace {

template <class T>
__global__ void binaryKernel(BroadcastPlan plan, Binary kind, const T *a,
                             const T *b, T *out) {
  PFRT_GRID_STRIDE(i, plan.numel) {
    out[i] = binaryOp(kind, a[broadcastOffset(plan, 0, i)],
                      b[broadcastOffset(plan, 1, i)]);
  }
}

template <class T>
__global__ void unaryKernel(int64_t n, Unary kind, const T *x, T *out) {
  PFRT_GRID_STRIDE(i, n) { out[i] = unaryOp(kind, x[i]); }
}

template <class T>
__global__ void geluGradKernel(int64_t n, bool exact, bool accumulate,
                               const T *x, const T *dy, T *dx) {
  PFRT_GRID_STRIDE(i, n) {
    const T g = geluGrad(exact, x[i], dy[i]);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

template <class T> __global__ void fillKernel(int64_t n, T value, T *out) {
  PFRT_GRID_STRIDE(i, n) { out[i] = value; }
}

/// Calls f with a value of the C type of an arithmetic dtype.
template <class F> pfrt_status byArithmetic(int32_t dtype, F &&f) {
  switch (dtype) {
  case PFRT_F32:
    return f(float());
  case PFRT_F64:
    return f(double());
  case PFRT_I32:
    return f(int32_t());
  case PFRT_I64:
    return f(int64_t());
  case PFRT_I8:
    return f(int8_t());
  default: // bool, compared as bytes
    return f(uint8_t());
  }
}

/// The dtypes each binary op takes (the CPU backend's lists and messages):
/// pow floats only; min and max also i8.
pfrt_status binaryDtype(const Call &call, Binary kind, const pfrt_tensor *a) {
  if (kind == Binary::Pow)
    return call.dtypeIn("a", a, {PFRT_F32, PFRT_F64});
  if (kind == Binary::Min || kind == Binary::Max)
    return call.dtypeIn("a", a, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64});
  return call.dtypeIn("a", a, {PFRT_F32, PFRT_F64, PFRT_I32, PFRT_I64});
}

/// The broadcast plan of out over `count` inputs, after checking that the
/// inputs broadcast to out's shape.
pfrt_status planFor(const Call &call, const pfrt_tensor *const *inputs,
                    int count, const pfrt_tensor *out, BroadcastPlan &plan) {
  Shape shapes[BroadcastPlan::kMaxInputs], expected = Shape::of(*inputs[0]);
  for (int i = 0; i < count; ++i) {
    shapes[i] = Shape::of(*inputs[i]);
    Shape joined;
    if (!broadcastShapes(expected, shapes[i], joined))
      return call.fail(PFRT_INVALID_ARGUMENT, "shapes %s and %s do not broadcast",
                       ShapeStr(expected).c_str(), ShapeStr(shapes[i]).c_str());
    expected = joined;
  }
  PFRT_TRY(call.shapeIs("out", out, expected));
  plan = planBroadcast(expected, shapes, count);
  return PFRT_OK;
}

/// Notes the first zero of an integer divisor in the context's DeviceError.
template <class T>
__global__ void zeroDivisorKernel(int64_t n, const T *b, DeviceError *error) {
  PFRT_GRID_STRIDE(i, n) {
    if (b[i] == T(0))
      noteBadElement(error, i);
  }
}

/// Queues integer division's divisor check: a zero is PFRT_NUMERIC with
/// the CPU's message at the next host wait (DeviceError.h); the quotient
/// is 0 there meanwhile.
template <class T>
pfrt_status queueDivisorCheck(const Call &call, const pfrt_tensor *b, const T *data) {
  const int64_t n = Shape::of(*b).numel();
  if (n == 0)
    return PFRT_OK;
  DeviceError *error = stateOf(call.context()).deviceError;
  cudaStream_t s = streamOf(call.context());
  zeroDivisorKernel<<<blocksFor(n), kThreads, 0, s>>>(n, data, error);
  settleCheckKernel<<<1, 1, 0, s>>>(error, PFRT_NUMERIC, DeviceCheck::IntegerDivision,
                                    static_cast<const T *>(nullptr), 0, 0);
  return launched(call, "zeroDivisorKernel");
}

pfrt_status binaryEntry(pfrt_context *ctx, const char *fn, Binary kind,
                        const pfrt_tensor *a, const pfrt_tensor *b,
                        const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(binaryDtype(call, kind, a));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("out", out, a->dtype));
  const pfrt_tensor *inputs[2] = {a, b};
  BroadcastPlan plan;
  PFRT_TRY(planFor(call, inputs, 2, out, plan));
  // Every divisor is checked, as on the CPU, even for an empty result.
  if (kind == Binary::Div && a->dtype == PFRT_I32)
    PFRT_TRY(queueDivisorCheck(call, b, dataAs<const int32_t>(b)));
  if (kind == Binary::Div && a->dtype == PFRT_I64)
    PFRT_TRY(queueDivisorCheck(call, b, dataAs<const int64_t>(b)));
  if (plan.numel == 0)
    return PFRT_OK;
  return byArithmetic(a->dtype, [&](auto tag) {
    using T = decltype(tag);
    binaryKernel<<<blocksFor(plan.numel), kThreads, 0, streamOf(ctx)>>>(
        plan, kind, dataAs<const T>(a), dataAs<const T>(b), dataAs<T>(out));
    return launched(call, "binaryKernel");
  });
}

template <class T>
__global__ void compareKernel(BroadcastPlan plan, int32_t kind, const T *a,
                              const T *b, uint8_t *out) {
  PFRT_GRID_STRIDE(i, plan.numel) {
    out[i] = compareOp(kind, a[broadcastOffset(plan, 0, i)],
                       b[broadcastOffset(plan, 1, i)]);
  }
}

pfrt_status compareEntry(pfrt_context *ctx, const pfrt_tensor *a,
                         const pfrt_tensor *b, int32_t kind,
                         const pfrt_tensor *out) {
  Call call(ctx, "pfrt_compare");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("out", out));
  if (kind < PFRT_COMPARE_EQUAL || kind > PFRT_COMPARE_LESS_EQUAL)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown comparison kind %d", kind);
  if (kind == PFRT_COMPARE_EQUAL)
    PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64, PFRT_BOOL}));
  else
    PFRT_TRY(call.dtypeIn("a", a, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64}));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("out", out, PFRT_BOOL));
  const pfrt_tensor *inputs[2] = {a, b};
  BroadcastPlan plan;
  PFRT_TRY(planFor(call, inputs, 2, out, plan));
  if (plan.numel == 0)
    return PFRT_OK;
  return byArithmetic(a->dtype, [&](auto tag) {
    using T = decltype(tag);
    compareKernel<<<blocksFor(plan.numel), kThreads, 0, streamOf(ctx)>>>(
        plan, kind, dataAs<const T>(a), dataAs<const T>(b), dataAs<uint8_t>(out));
    return launched(call, "compareKernel");
  });
}

pfrt_status equalEntry(pfrt_context *ctx, const pfrt_tensor *a,
                       const pfrt_tensor *b, const pfrt_tensor *out) {
  return compareEntry(ctx, a, b, PFRT_COMPARE_EQUAL, out);
}

/// Bool ops: logical and/or/xor (broadcasting), not, is_nan, is_inf.
__global__ void logicalKernel(BroadcastPlan plan, int32_t kind, const uint8_t *a,
                              const uint8_t *b, uint8_t *out) {
  PFRT_GRID_STRIDE(i, plan.numel) {
    out[i] = logicalOp(kind, a[broadcastOffset(plan, 0, i)] != 0,
                       b[broadcastOffset(plan, 1, i)] != 0);
  }
}

__global__ void notKernel(int64_t n, const uint8_t *x, uint8_t *out) {
  PFRT_GRID_STRIDE(i, n) { out[i] = x[i] == 0; }
}

template <class T>
__global__ void classifyKernel(int64_t n, bool nan, bool negative, bool positive,
                               const T *x, uint8_t *out) {
  PFRT_GRID_STRIDE(i, n) {
    out[i] = nan ? isNan(x[i]) : isInfOf(x[i], negative, positive);
  }
}

pfrt_status logicalEntry(pfrt_context *ctx, const pfrt_tensor *a,
                         const pfrt_tensor *b, int32_t kind,
                         const pfrt_tensor *out) {
  Call call(ctx, "pfrt_logical");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("out", out));
  if (kind < PFRT_LOGICAL_AND || kind > PFRT_LOGICAL_XOR)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown logical kind %d", kind);
  PFRT_TRY(call.dtypeIs("a", a, PFRT_BOOL));
  PFRT_TRY(call.dtypeIs("b", b, PFRT_BOOL));
  PFRT_TRY(call.dtypeIs("out", out, PFRT_BOOL));
  const pfrt_tensor *inputs[2] = {a, b};
  BroadcastPlan plan;
  PFRT_TRY(planFor(call, inputs, 2, out, plan));
  if (plan.numel == 0)
    return PFRT_OK;
  logicalKernel<<<blocksFor(plan.numel), kThreads, 0, streamOf(ctx)>>>(
      plan, kind, dataAs<const uint8_t>(a), dataAs<const uint8_t>(b),
      dataAs<uint8_t>(out));
  return launched(call, "logicalKernel");
}

pfrt_status notEntry(pfrt_context *ctx, const pfrt_tensor *x,
                     const pfrt_tensor *out) {
  Call call(ctx, "pfrt_not");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("x", x, PFRT_BOOL));
  PFRT_TRY(call.dtypeIs("out", out, PFRT_BOOL));
  PFRT_TRY(call.shapeIs("out", out, Shape::of(*x)));
  const int64_t n = Shape::of(*x).numel();
  if (n == 0)
    return PFRT_OK;
  notKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
      n, dataAs<const uint8_t>(x), dataAs<uint8_t>(out));
  return launched(call, "notKernel");
}

pfrt_status classifyEntry(pfrt_context *ctx, const char *fn, bool nan,
                          bool negative, bool positive, const pfrt_tensor *x,
                          const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(floatDtype(call, "x", x));
  PFRT_TRY(call.dtypeIs("out", out, PFRT_BOOL));
  PFRT_TRY(call.shapeIs("out", out, Shape::of(*x)));
  const int64_t n = Shape::of(*x).numel();
  if (n == 0)
    return PFRT_OK;
  if (x->dtype == PFRT_F32)
    classifyKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
        n, nan, negative, positive, dataAs<const float>(x), dataAs<uint8_t>(out));
  else
    classifyKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
        n, nan, negative, positive, dataAs<const double>(x), dataAs<uint8_t>(out));
  return launched(call, "classifyKernel");
}

pfrt_status isNanEntry(pfrt_context *ctx, const pfrt_tensor *x,
                       const pfrt_tensor *out) {
  return classifyEntry(ctx, "pfrt_is_nan", true, false, false, x, out);
}

pfrt_status isInfEntry(pfrt_context *ctx, const pfrt_tensor *x,
                       int32_t detect_negative, int32_t detect_positive,
                       const pfrt_tensor *out) {
  return classifyEntry(ctx, "pfrt_is_inf", false, detect_negative != 0,
                       detect_positive != 0, x, out);
}

/// out = cond ? x : y, moving elements of E's size.
template <class E>
__global__ void whereKernel(BroadcastPlan plan, const uint8_t *cond,
                            const E *x, const E *y, E *out) {
  PFRT_GRID_STRIDE(i, plan.numel) {
    out[i] = cond[broadcastOffset(plan, 0, i)] ? x[broadcastOffset(plan, 1, i)]
                                               : y[broadcastOffset(plan, 2, i)];
  }
}

pfrt_status whereEntry(pfrt_context *ctx, const pfrt_tensor *cond,
                       const pfrt_tensor *x, const pfrt_tensor *y,
                       const pfrt_tensor *out) {
  Call call(ctx, "pfrt_where");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("cond", cond));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("y", y));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(call.dtypeIs("cond", cond, PFRT_BOOL));
  PFRT_TRY(call.dtypeIs("y", y, x->dtype));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  const pfrt_tensor *inputs[3] = {cond, x, y};
  BroadcastPlan plan;
  PFRT_TRY(planFor(call, inputs, 3, out, plan));
  if (plan.numel == 0)
    return PFRT_OK;
  auto launch = [&](auto tag) {
    using E = decltype(tag);
    whereKernel<<<blocksFor(plan.numel), kThreads, 0, streamOf(ctx)>>>(
        plan, dataAs<const uint8_t>(cond), dataAs<const E>(x),
        dataAs<const E>(y), dataAs<E>(out));
    return launched(call, "whereKernel");
  };
  switch (dtypeSize(x->dtype)) {
  case 1:
    return launch(uint8_t());
  case 2:
    return launch(uint16_t());
  case 4:
    return launch(uint32_t());
  default:
    return launch(uint64_t());
  }
}

pfrt_status unaryEntry(pfrt_context *ctx, const char *fn, Unary kind,
                       const pfrt_tensor *x, const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  // The CPU backend's lists: neg also takes the integers (wrapping).
  if (kind == Unary::Neg)
    PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64, PFRT_I8, PFRT_I32, PFRT_I64}));
  else
    PFRT_TRY(call.dtypeIn("x", x, {PFRT_F32, PFRT_F64}));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  PFRT_TRY(call.shapeIs("out", out, Shape::of(*x)));
  const int64_t n = Shape::of(*x).numel();
  if (n == 0)
    return PFRT_OK;
  return byArithmetic(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    unaryKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(n, kind, dataAs<const T>(x),
                                                              dataAs<T>(out));
    return launched(call, "unaryKernel");
  });
}

#define PFRT_CUDA_BINARY(name, kind)                                           \
  pfrt_status name##Entry(pfrt_context *ctx, const pfrt_tensor *a,                    \
                   const pfrt_tensor *b, const pfrt_tensor *out) {             \
    return binaryEntry(ctx, "pfrt_" #name, Binary::kind, a, b, out);           \
  }
PFRT_CUDA_BINARY(add, Add)
PFRT_CUDA_BINARY(sub, Sub)
PFRT_CUDA_BINARY(mul, Mul)
PFRT_CUDA_BINARY(div, Div)
PFRT_CUDA_BINARY(pow, Pow)
PFRT_CUDA_BINARY(min, Min)
PFRT_CUDA_BINARY(max, Max)
#undef PFRT_CUDA_BINARY

#define PFRT_CUDA_UNARY(name, kind)                                            \
  pfrt_status name##Entry(pfrt_context *ctx, const pfrt_tensor *x,                    \
                   const pfrt_tensor *out) {                                   \
    return unaryEntry(ctx, "pfrt_" #name, Unary::kind, x, out);                \
  }
PFRT_CUDA_UNARY(sqrt, Sqrt)
PFRT_CUDA_UNARY(erf, Erf)
PFRT_CUDA_UNARY(tanh, Tanh)
PFRT_CUDA_UNARY(exp, Exp)
PFRT_CUDA_UNARY(neg, Neg)
PFRT_CUDA_UNARY(abs, Abs)
PFRT_CUDA_UNARY(sign, Sign)
PFRT_CUDA_UNARY(reciprocal, Reciprocal)
#undef PFRT_CUDA_UNARY

pfrt_status gelu(pfrt_context *ctx, const pfrt_tensor *x,
                 int32_t approximation, const pfrt_tensor *out) {
  if (approximation != PFRT_GELU_EXACT && approximation != PFRT_GELU_TANH)
    return Call(ctx, "pfrt_gelu").fail(PFRT_INVALID_ARGUMENT,
                                       "unknown approximation %d", approximation);
  return unaryEntry(ctx, "pfrt_gelu",
                    approximation == PFRT_GELU_EXACT ? Unary::GeluExact
                                                     : Unary::GeluTanh,
                    x, out);
}

pfrt_status geluBackward(pfrt_context *ctx, const pfrt_tensor *x,
                         const pfrt_tensor *grad_out, int32_t approximation,
                         int32_t accumulate, const pfrt_tensor *grad_in) {
  Call call(ctx, "pfrt_gelu_backward");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  PFRT_TRY(call.tensor("grad_in", grad_in));
  PFRT_TRY(floatDtype(call, "x", x));
  if (approximation != PFRT_GELU_EXACT && approximation != PFRT_GELU_TANH)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown approximation %d",
                     approximation);
  const Shape shape = Shape::of(*x);
  PFRT_TRY(call.dtypeIs("grad_out", grad_out, x->dtype));
  PFRT_TRY(call.dtypeIs("grad_in", grad_in, x->dtype));
  PFRT_TRY(call.shapeIs("grad_out", grad_out, shape));
  PFRT_TRY(call.shapeIs("grad_in", grad_in, shape));
  const int64_t n = shape.numel();
  if (n == 0)
    return PFRT_OK;
  const bool exact = approximation == PFRT_GELU_EXACT;
  if (x->dtype == PFRT_F32)
    geluGradKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
        n, exact, accumulate != 0, dataAs<const float>(x),
        dataAs<const float>(grad_out), dataAs<float>(grad_in));
  else
    geluGradKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
        n, exact, accumulate != 0, dataAs<const double>(x),
        dataAs<const double>(grad_out), dataAs<double>(grad_in));
  return launched(call, "geluGradKernel");
}

pfrt_status fill(pfrt_context *ctx, const pfrt_tensor *out, double value) {
  Call call(ctx, "pfrt_fill");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("out", out));
  const int64_t n = Shape::of(*out).numel();
  if (n == 0)
    return PFRT_OK;
  const unsigned blocks = blocksFor(n);
  cudaStream_t s = streamOf(ctx);
  switch (out->dtype) {
  case PFRT_F32:
    fillKernel<<<blocks, kThreads, 0, s>>>(n, float(value), dataAs<float>(out));
    break;
  case PFRT_F64:
    fillKernel<<<blocks, kThreads, 0, s>>>(n, value, dataAs<double>(out));
    break;
  case PFRT_I32:
    fillKernel<<<blocks, kThreads, 0, s>>>(n, int32_t(value), dataAs<int32_t>(out));
    break;
  case PFRT_I64:
    fillKernel<<<blocks, kThreads, 0, s>>>(n, int64_t(value), dataAs<int64_t>(out));
    break;
  case PFRT_I8:
    fillKernel<<<blocks, kThreads, 0, s>>>(n, int8_t(value), dataAs<int8_t>(out));
    break;
  case PFRT_BOOL:
    fillKernel<<<blocks, kThreads, 0, s>>>(n, uint8_t(value != 0), dataAs<uint8_t>(out));
    break;
  default:
    return call.fail(PFRT_UNSUPPORTED, "out has dtype %s; the CUDA backend "
                     "fills f32, f64, i8, i32, i64 and bool so far",
                     dtypeName(out->dtype));
  }
  return launched(call, "fillKernel");
}

//===------------------------------ Gradients ----------------------------===//

/// An operand's value at element i of the broadcast result, or 0 where the
/// op's gradient does not read it (add and sub).
template <class T>
__device__ inline T operandAt(const BroadcastPlan &plan, int input, bool reads, const T *data,
                              int64_t i) {
  return reads ? data[broadcastOffset(plan, input, i)] : T(0);
}

/// grad (+)= binaryGrad over the broadcast result, for an operand that was
/// not broadcast (grad has the result's shape).
template <class T>
__global__ void binaryGradKernel(BroadcastPlan plan, int32_t kind, int which, bool accumulate,
                                 const T *a, const T *b, const T *dy, T *grad) {
  const bool reads = binaryGradReadsOperands(kind);
  PFRT_GRID_STRIDE(i, plan.numel) {
    const T g = binaryGrad(kind, which, operandAt(plan, 0, reads, a, i),
                           operandAt(plan, 1, reads, b, i), dy[i]);
    grad[i] = accumulate ? grad[i] + g : g;
  }
}

/// grad[o] (+)= the sum, in double, of binaryGrad over the result elements
/// that read operand element o: one block per o (pfrt_reduce_to_shape's
/// order), the gradient formed where it is summed.
template <class T>
__global__ void binaryGradReduceKernel(BroadcastPlan plan, StridedIndex kept, StridedIndex reduced,
                                       int64_t outCount, int64_t reduceCount, int32_t kind,
                                       int which, bool accumulate, const T *a, const T *b,
                                       const T *dy, T *grad) {
  const bool reads = binaryGradReadsOperands(kind);
  PFRT_BLOCK_STRIDE(o, outCount) {
    const int64_t base = indexOffset(kept, o);
    double s = 0;
    for (int64_t r = threadIdx.x; r < reduceCount; r += blockDim.x) {
      const int64_t i = base + indexOffset(reduced, r);
      s += double(binaryGrad(kind, which, operandAt(plan, 0, reads, a, i),
                             operandAt(plan, 1, reads, b, i), dy[i]));
    }
    s = blockSum(s);
    if (threadIdx.x == 0)
      grad[o] = accumulate ? T(double(grad[o]) + s) : T(s);
  }
}

/// Queues the gradient of operand `which` (0: a, 1: b) into grad.
template <class T>
pfrt_status queueBinaryGrad(const Call &call, int32_t kind, int which, const pfrt_tensor &a,
                            const pfrt_tensor &b, const pfrt_tensor &dy, const pfrt_tensor &grad,
                            bool accumulate) {
  const Shape full = Shape::of(dy), operand = Shape::of(which == 0 ? a : b);
  const Shape shapes[2] = {Shape::of(a), Shape::of(b)};
  const BroadcastPlan plan = planBroadcast(full, shapes, 2);
  StridedIndex kept, reduced;
  splitBroadcastGradient(full, operand, kept, reduced);
  cudaStream_t s = streamOf(call.context());
  if (reduced.rank == 0) { // same shape as the result
    if (plan.numel == 0)
      return PFRT_OK;
    binaryGradKernel<<<blocksFor(plan.numel), kThreads, 0, s>>>(
        plan, kind, which, accumulate, dataAs<const T>(&a), dataAs<const T>(&b),
        dataAs<const T>(&dy), dataAs<T>(&grad));
    return launched(call, "binaryGradKernel");
  }
  const int64_t outCount = kept.count();
  if (outCount == 0)
    return PFRT_OK;
  binaryGradReduceKernel<<<blocksForRows(outCount), kThreads, 0, s>>>(
      plan, kept, reduced, outCount, reduced.count(), kind, which, accumulate, dataAs<const T>(&a),
      dataAs<const T>(&b), dataAs<const T>(&dy), dataAs<T>(&grad));
  return launched(call, "binaryGradReduceKernel");
}

pfrt_status binaryBackwardEntry(pfrt_context *ctx, int32_t kind, const pfrt_tensor *a,
                                const pfrt_tensor *b, const pfrt_tensor *grad_out,
                                int32_t accumulate_a, int32_t accumulate_b,
                                const pfrt_tensor *grad_a, const pfrt_tensor *grad_b) {
  // The CPU backend's checks, in its order and with its messages.
  Call call(ctx, "pfrt_binary_backward");
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(checkBinaryBackward(call, kind, a, b, grad_out, grad_a, grad_b));
  auto run = [&](auto tag) -> pfrt_status {
    using T = decltype(tag);
    if (grad_a)
      PFRT_TRY(queueBinaryGrad<T>(call, kind, 0, *a, *b, *grad_out, *grad_a, accumulate_a != 0));
    if (grad_b)
      PFRT_TRY(queueBinaryGrad<T>(call, kind, 1, *a, *b, *grad_out, *grad_b, accumulate_b != 0));
    return PFRT_OK;
  };
  return a->dtype == PFRT_F32 ? run(float()) : run(double());
}

template <class T>
__global__ void unaryGradKernel(int64_t n, int32_t kind, bool accumulate, const T *v, const T *dy,
                                T *dx) {
  PFRT_GRID_STRIDE(i, n) {
    const T g = unaryGrad(kind, v[i], dy[i]);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

pfrt_status unaryBackwardEntry(pfrt_context *ctx, int32_t kind, const pfrt_tensor *x_or_y,
                               const pfrt_tensor *grad_out, int32_t accumulate,
                               const pfrt_tensor *grad_in) {
  Call call(ctx, "pfrt_unary_backward");
  PFRT_TRY(beginCuda(call));
  if (kind < PFRT_UNARY_SQRT || kind > PFRT_UNARY_NEG)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown kind %d", kind);
  PFRT_TRY(call.tensor("x_or_y", x_or_y));
  PFRT_TRY(call.tensor("grad_out", grad_out));
  PFRT_TRY(call.tensor("grad_in", grad_in));
  PFRT_TRY(call.dtypeIn("x_or_y", x_or_y, {PFRT_F32, PFRT_F64}));
  const Shape shape = Shape::of(*x_or_y);
  PFRT_TRY(floatLike(call, "grad_out", grad_out, x_or_y->dtype, shape));
  PFRT_TRY(floatLike(call, "grad_in", grad_in, x_or_y->dtype, shape));
  const int64_t n = shape.numel();
  if (n == 0)
    return PFRT_OK;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    unaryGradKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
        n, kind, accumulate != 0, dataAs<const T>(x_or_y), dataAs<const T>(grad_out),
        dataAs<T>(grad_in));
    return launched(call, "unaryGradKernel");
  };
  return x_or_y->dtype == PFRT_F32 ? run(float()) : run(double());
}

} // namespace

void registerElementwise(KernelTable &t) {
  t.pfrt_binary_backward = binaryBackwardEntry;
  t.pfrt_unary_backward = unaryBackwardEntry;
  t.pfrt_add = addEntry;
  t.pfrt_sub = subEntry;
  t.pfrt_mul = mulEntry;
  t.pfrt_div = divEntry;
  t.pfrt_pow = powEntry;
  t.pfrt_min = minEntry;
  t.pfrt_max = maxEntry;
  t.pfrt_sqrt = sqrtEntry;
  t.pfrt_erf = erfEntry;
  t.pfrt_tanh = tanhEntry;
  t.pfrt_exp = expEntry;
  t.pfrt_neg = negEntry;
  t.pfrt_abs = absEntry;
  t.pfrt_sign = signEntry;
  t.pfrt_reciprocal = reciprocalEntry;
  t.pfrt_gelu = gelu;
  t.pfrt_gelu_backward = geluBackward;
  t.pfrt_fill = fill;
  t.pfrt_equal = equalEntry;
  t.pfrt_compare = compareEntry;
  t.pfrt_where = whereEntry;
  t.pfrt_logical = logicalEntry;
  t.pfrt_not = notEntry;
  t.pfrt_is_nan = isNanEntry;
  t.pfrt_is_inf = isInfEntry;
}

} // namespace pfrt::cuda
