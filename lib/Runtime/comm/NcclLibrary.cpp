//===- NcclLibrary.cpp - NCCL, loaded on first use -------------------------===//

#include "NcclLibrary.h"

#include <cstdio>
#include <dlfcn.h>
#include <mutex>
#include <string>

namespace pfrt::comm {
namespace {

NcclLibrary gNccl;

/// dlopen by soname (LD_LIBRARY_PATH, the caller's runpath, the system
/// paths), then in the toolkit directory found at configure time.
void *openNccl(std::string &errors) {
  if (void *h = dlopen(PFRT_NCCL_SONAME, RTLD_NOW | RTLD_LOCAL))
    return h;
  errors += dlerror();
  const std::string fallback = std::string(PFRT_NCCL_LIBRARY_DIR) + "/" + PFRT_NCCL_SONAME;
  if (void *h = dlopen(fallback.c_str(), RTLD_NOW | RTLD_LOCAL))
    return h;
  errors += "; ";
  errors += dlerror();
  return nullptr;
}

bool load(std::string &errors) {
  void *handle = openNccl(errors);
  if (!handle)
    return false;
#define PFRT_RESOLVE_NCCL(name)                                                                    \
  gNccl.name = reinterpret_cast<decltype(gNccl.name)>(dlsym(handle, #name));                       \
  if (!gNccl.name) {                                                                               \
    errors = "symbol " #name " not found";                                                         \
    return false;                                                                                  \
  }
  PFRT_NCCL_FUNCTIONS(PFRT_RESOLVE_NCCL)
#undef PFRT_RESOLVE_NCCL
  return true;
}

} // namespace

bool loadNccl(char *why, size_t size) {
  static std::once_flag once;
  static bool loaded = false;
  static std::string errors;
  std::call_once(once, [] { loaded = load(errors); });
  if (!loaded)
    std::snprintf(why, size, "cannot load NCCL (%s): %s", PFRT_NCCL_SONAME, errors.c_str());
  return loaded;
}

const NcclLibrary &nccl() { return gNccl; }

} // namespace pfrt::comm
