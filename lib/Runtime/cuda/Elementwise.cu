//===- Elementwise.cu - Broadcasting binary ops, unary ops, GELU, fill ----===//
//
// One grid-stride kernel per shape of work; the op is a runtime switch
// inside ElementwiseMath.h's functions (uniform across a launch, so it does
// not diverge), which keeps nvcc's instantiations to f32 and f64.
//
//===----------------------------------------------------------------------===//

#include "ElementwiseMath.h"
#include "Launch.h"

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

pfrt_status binaryEntry(pfrt_context *ctx, const char *fn, Binary kind,
                        const pfrt_tensor *a, const pfrt_tensor *b,
                        const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("a", a));
  PFRT_TRY(call.tensor("b", b));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(floatDtype(call, "a", a));
  PFRT_TRY(call.dtypeIs("b", b, a->dtype));
  PFRT_TRY(call.dtypeIs("out", out, a->dtype));
  const Shape shapes[2] = {Shape::of(*a), Shape::of(*b)};
  Shape expected;
  if (!broadcastShapes(shapes[0], shapes[1], expected))
    return call.fail(PFRT_INVALID_ARGUMENT, "shapes %s and %s do not broadcast",
                     ShapeStr(shapes[0]).c_str(), ShapeStr(shapes[1]).c_str());
  PFRT_TRY(call.shapeIs("out", out, expected));
  const BroadcastPlan plan = planBroadcast(expected, shapes, 2);
  if (plan.numel == 0)
    return PFRT_OK;
  const unsigned blocks = blocksFor(plan.numel);
  if (a->dtype == PFRT_F32)
    binaryKernel<<<blocks, kThreads, 0, streamOf(ctx)>>>(
        plan, kind, dataAs<const float>(a), dataAs<const float>(b),
        dataAs<float>(out));
  else
    binaryKernel<<<blocks, kThreads, 0, streamOf(ctx)>>>(
        plan, kind, dataAs<const double>(a), dataAs<const double>(b),
        dataAs<double>(out));
  return launched(call, "binaryKernel");
}

pfrt_status unaryEntry(pfrt_context *ctx, const char *fn, Unary kind,
                       const pfrt_tensor *x, const pfrt_tensor *out) {
  Call call(ctx, fn);
  PFRT_TRY(beginCuda(call));
  PFRT_TRY(call.tensor("x", x));
  PFRT_TRY(call.tensor("out", out));
  PFRT_TRY(floatDtype(call, "x", x));
  PFRT_TRY(call.dtypeIs("out", out, x->dtype));
  PFRT_TRY(call.shapeIs("out", out, Shape::of(*x)));
  const int64_t n = Shape::of(*x).numel();
  if (n == 0)
    return PFRT_OK;
  if (x->dtype == PFRT_F32)
    unaryKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
        n, kind, dataAs<const float>(x), dataAs<float>(out));
  else
    unaryKernel<<<blocksFor(n), kThreads, 0, streamOf(ctx)>>>(
        n, kind, dataAs<const double>(x), dataAs<double>(out));
  return launched(call, "unaryKernel");
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
  case PFRT_BOOL:
    fillKernel<<<blocks, kThreads, 0, s>>>(n, uint8_t(value != 0), dataAs<uint8_t>(out));
    break;
  default:
    return call.fail(PFRT_UNSUPPORTED, "out has dtype %s; the CUDA backend "
                     "fills f32, f64, i32, i64 and bool so far",
                     dtypeName(out->dtype));
  }
  return launched(call, "fillKernel");
}

} // namespace

void registerElementwise(KernelTable &t) {
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
}

} // namespace pfrt::cuda
