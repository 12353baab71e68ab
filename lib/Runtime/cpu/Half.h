//===- Half.h - IEEE binary16 <-> binary32 conversion ------------*- C++ -*-===//
//
// Software conversion: x86-64-v2 has no F16C, and f16 is storage-only in the
// runtime (cast and data movement), so this is not on a hot path.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_CPU_HALF_H
#define PF_RUNTIME_CPU_HALF_H

#include <cstdint>
#include <cstring>

namespace pfrt::cpu {

inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) { // inf / NaN
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) { // normal
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) { // +-0
    bits = sign;
  } else { // subnormal: renormalize
    int shift = 0;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      ++shift;
    }
    mant &= 0x3ffu;
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// Round to nearest, ties to even; overflow gives inf, NaN stays NaN.
inline uint16_t floatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t absBits = bits & 0x7fffffffu;
  if (absBits >= 0x7f800000u) // inf / NaN (keep NaN quiet and non-zero)
    return sign | (absBits > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (absBits >= 0x477ff000u) // rounds to >= 65520: overflow
    return sign | 0x7c00u;
  if (absBits < 0x38800000u) { // below 2^-14: subnormal half or zero
    if (absBits < 0x33000000u) // below 2^-25: rounds to zero
      return sign;
    // value = mant * 2^(exp - 150) and the half subnormal unit is 2^-24,
    // so the half mantissa is mant >> (126 - exp), shift in [14, 24].
    uint32_t exp = absBits >> 23;
    uint32_t mant = (absBits & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1u)))
      ++half;
    return sign | static_cast<uint16_t>(half);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits.
  uint32_t h = ((absBits - 0x38000000u) >> 13);
  uint32_t rem = absBits & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h; // may carry into the exponent, which is still correct
  return sign | static_cast<uint16_t>(h);
}

} // namespace pfrt::cpu

#endif // PF_RUNTIME_CPU_HALF_H
