//===- FastMath.h - Vectorizable f32 exp, erf and tanh -----------*- C++ -*-===//
//
// glibc's expf/erff/tanhf are opaque calls, so a loop using them is not
// vectorized (libmvec's variants need -ffast-math, which would also change
// the reductions). These are branch-free polynomial versions that GCC
// vectorizes (with -fno-trapping-math) and that a CUDA backend can copy:
//  - exp: Cephes' expf (range reduction by ln 2, degree-6 polynomial),
//    relative error < 2e-7; results below e^-86.5 flush to 0.
//  - erf, tanh: the rational approximations Eigen and XLA use, clamped
//    where the f32 result saturates; relative error < 1e-6.
// The unit tests measure these bounds against double-precision libm.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CPU_FASTMATH_H
#define PF_RUNTIME_CPU_FASTMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace pfrt::cpu {

/// On a function: also compile it for AVX-512 and AVX2 and pick the widest
/// the processor has when the library is loaded (an ifunc). The library's
/// baseline is x86-64-v2 (SSE4.2, 4 floats); the exp/erf/tanh polynomials
/// and row statistics are compute-bound there. The runtime is compiled with
/// -ffp-contract=off (AVX-512F has FMA instructions), so no multiply-add is
/// fused: elementwise loops give the baseline's results bit for bit, and
/// only vectorized reductions may sum in another order.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PFRT_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PFRT_VECTOR_CLONES
#endif

inline float bitsToFloat(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float clampf(float x, float lo, float hi) {
  x = x > hi ? hi : x;
  return x < lo ? lo : x;
}

inline float fastExp(float x) {
  const float hi = 88.72283935546875f; // ln(FLT_MAX)
  const float lo = -86.5f;             // keeps 2^(n-1) a normal float
  // NaN is replaced here (and restored at the end) so that the integer
  // conversion below never sees it.
  float xc = x != x ? 0.0f : clampf(x, lo, hi);
  // x = n ln2 + r, |r| <= ln2 / 2; ln2 split in two for an exact product.
  float n = std::floor(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  // Scale by 2^(n-1) * 2: n can be 128 near the top, whose 2^n is not a
  // finite float on its own.
  float scale = bitsToFloat(
      static_cast<int32_t>(static_cast<uint32_t>(static_cast<int32_t>(n) + 126)
                           << 23));
  float result = (y * scale) * 2.0f;
  result = x < lo ? 0.0f : result;
  result = x > hi ? INFINITY : result;
  return x != x ? x : result; // NaN propagates
}

inline float fastErf(float x) {
  // erf(+-4) rounds to +-1 in f32.
  float xc = clampf(x, -4.0f, 4.0f);
  float x2 = xc * xc;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * xc;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return p / q;
}

inline float fastTanh(float x) {
  // tanh(+-7.9053) rounds to +-1 in f32.
  const float c = 7.90531110763549805f;
  float xc = clampf(x, -c, c);
  float x2 = xc * xc;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * xc;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  float r = p / q;
  // Below 4e-4, tanh(x) == x to f32 precision and the rational form would
  // lose the low bits.
  return (x < 0.0004f && x > -0.0004f) ? x : r;
}

/// Overloads so templated kernels pick the approximation for float and
/// libm for double (where there is no f32 vectorization to gain).
inline float expOf(float x) { return fastExp(x); }
inline double expOf(double x) { return std::exp(x); }
inline float erfOf(float x) { return fastErf(x); }
inline double erfOf(double x) { return std::erf(x); }
inline float tanhOf(float x) { return fastTanh(x); }
inline double tanhOf(double x) { return std::tanh(x); }

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_FASTMATH_H
