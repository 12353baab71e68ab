//===- Libraries.cpp - cuBLAS and cuSOLVER, loaded on first use ------------===//

#include "Libraries.h"

#include <cstdio>
#include <dlfcn.h>
#include <mutex>
#include <string>

namespace pfrt::cuda {
namespace {

Libraries gLibraries;

/// dlopen by soname (LD_LIBRARY_PATH, the caller's runpath, the system
/// paths), then in the toolkit directory found at configure time.
void *openLibrary(const char *soname, std::string &errors) {
  if (void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL))
    return h;
  errors += dlerror();
  const std::string fallback = std::string(PFRT_CUDA_LIBRARY_DIR) + "/" + soname;
  if (void *h = dlopen(fallback.c_str(), RTLD_NOW | RTLD_LOCAL))
    return h;
  errors += "; ";
  errors += dlerror();
  return nullptr;
}

/// Fills every slot from `handle`; the first missing symbol is an error.
template <class Slot>
bool resolve(void *handle, const char *name, Slot &slot, std::string &errors) {
  slot = reinterpret_cast<Slot>(dlsym(handle, name));
  if (slot)
    return true;
  errors = std::string("symbol ") + name + " not found";
  return false;
}

bool load(std::string &errors) {
  void *blas = openLibrary(PFRT_CUBLAS_SONAME, errors);
  if (!blas)
    return false;
  void *solver = openLibrary(PFRT_CUSOLVER_SONAME, errors);
  if (!solver)
    return false;
  bool ok = true;
#define PFRT_RESOLVE_BLAS(name) ok = ok && resolve(blas, #name, gLibraries.name, errors);
#define PFRT_RESOLVE_SOLVER(name) ok = ok && resolve(solver, #name, gLibraries.name, errors);
#define PFRT_RESOLVE_TYPED_BLAS(name, ...) PFRT_RESOLVE_BLAS(name)
  PFRT_CUBLAS_FUNCTIONS(PFRT_RESOLVE_BLAS)
  PFRT_CUBLAS_OVERLOADED_FUNCTIONS(PFRT_RESOLVE_TYPED_BLAS)
  PFRT_CUSOLVER_FUNCTIONS(PFRT_RESOLVE_SOLVER)
#undef PFRT_RESOLVE_TYPED_BLAS
#undef PFRT_RESOLVE_BLAS
#undef PFRT_RESOLVE_SOLVER
  return ok;
}

} // namespace

// The spelled-out types of the overloaded functions are those of their
// exported declarations: the casts select an overload or fail to compile
// (unevaluated, so nothing links against cuBLAS).
#define PFRT_CHECK_TYPED_SLOT(name, ...)                                                           \
  static_assert(sizeof(static_cast<Libraries::name##_type>(&::name)) > 0);
PFRT_CUBLAS_OVERLOADED_FUNCTIONS(PFRT_CHECK_TYPED_SLOT)
#undef PFRT_CHECK_TYPED_SLOT

bool loadLibraries(char *why, size_t size) {
  static std::once_flag once;
  static bool loaded = false;
  static std::string errors;
  std::call_once(once, [] { loaded = load(errors); });
  if (!loaded)
    std::snprintf(why, size, "cannot load cuBLAS/cuSOLVER (%s, %s): %s",
                  PFRT_CUBLAS_SONAME, PFRT_CUSOLVER_SONAME, errors.c_str());
  return loaded;
}

const Libraries &lib() { return gLibraries; }

} // namespace pfrt::cuda
