//===- Format.cpp - printf into a std::string -----------------------------===//
#include "pf/Support/Status.h"

#include <cstdarg>
#include <cstdio>

std::string pf::formatText(const char *format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string text;
  if (n > 0) {
    text.resize(size_t(n) + 1);
    std::vsnprintf(text.data(), text.size(), format, args);
    text.resize(size_t(n));
  }
  va_end(args);
  return text;
}
