/*===- pf-capi-dlopen-test.c - the C API loaded with RTLD_LOCAL ------------===*\
|*                                                                            *|
|* pf-capi-dlopen-test LIBPFCAPI MODEL loads libPFCAPI with                   *|
|* dlopen(RTLD_LOCAL), as Python loads an extension module linking it, so     *|
|* that neither it nor its dependencies (libPFMLIRCAPI, libMLIR, libpfrt) are *|
|* in the global symbol scope; takes MLIR's C API through the same handle;    *|
|* imports MODEL (pf-capi-test's: X is batch x 3, batch=2), compiles it and   *|
|* runs it: the JIT must find the runtime's kernels all the same.             *|
|*                                                                            *|
|* pf-capi-dlopen-test --libmlir-first LIBMLIR LIBPFCAPI MODEL loads          *|
|* libMLIR.so into a local scope of its own first, the order the C API does   *|
|* not support (docs/embedding.md): the import must fail with the message     *|
|* that says so.                                                              *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#include "pf-c/Import.h"
#include "pf-c/Runtime.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef MlirContext (*ContextCreateFn)(void);
typedef void (*ContextDestroyFn)(MlirContext);
typedef PfImportOptions (*ImportOptionsFn)(void);
typedef MlirModule (*ImportFn)(MlirContext, MlirStringRef, const PfImportOptions *,
                               MlirStringCallback, void *);
typedef PfExecutable (*CompileFn)(MlirModule, const PfCompileOptions *, MlirStringCallback,
                                  void *);
typedef MlirLogicalResult (*RunFn)(PfExecutable, const PfTensor *, intptr_t, const PfTensor *,
                                   intptr_t, MlirStringCallback, void *);

static void printError(MlirStringRef text, void *userData) {
  (void)userData;
  fwrite(text.data, 1, text.length, stderr);
}

static void *symbol(void *library, const char *name) {
  void *address = dlsym(library, name);
  if (!address)
    fprintf(stderr, "pf-capi-dlopen-test: no %s: %s\n", name, dlerror());
  return address;
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "--libmlir-first") == 0) {
    if (!dlopen(argv[2], RTLD_NOW | RTLD_LOCAL)) {
      fprintf(stderr, "pf-capi-dlopen-test: %s\n", dlerror());
      return 1;
    }
    argv += 2;
    argc -= 2;
  }
  if (argc != 3) {
    fprintf(stderr, "usage: pf-capi-dlopen-test [--libmlir-first LIBMLIR] LIBPFCAPI MODEL\n");
    return 2;
  }
  /* dlsym on this handle searches libPFCAPI's dependencies too. */
  void *pfCAPI = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  void *mlirCAPI = pfCAPI;
  if (!pfCAPI) {
    fprintf(stderr, "pf-capi-dlopen-test: %s\n", dlerror());
    return 1;
  }
  ContextCreateFn contextCreate = (ContextCreateFn)symbol(mlirCAPI, "mlirContextCreate");
  ContextDestroyFn contextDestroy = (ContextDestroyFn)symbol(mlirCAPI, "mlirContextDestroy");
  ImportOptionsFn importOptions = (ImportOptionsFn)symbol(pfCAPI, "pfImportOptionsGetDefault");
  ImportFn import = (ImportFn)symbol(pfCAPI, "pfImportONNXFile");
  CompileFn compile = (CompileFn)symbol(pfCAPI, "pfCompile");
  RunFn run = (RunFn)symbol(pfCAPI, "pfExecutableRun");
  if (!contextCreate || !contextDestroy || !importOptions || !import || !compile || !run)
    return 1;

  MlirContext ctx = contextCreate();
  PfImportOptions options = importOptions();
  const char *dims[1] = {"batch=2"};
  options.dims = dims;
  options.numDims = 1;
  MlirStringRef path = {argv[2], 0};
  while (argv[2][path.length])
    ++path.length;
  MlirModule module = import(ctx, path, &options, printError, NULL);
  if (!module.ptr)
    return 1;
  PfExecutable executable = compile(module, NULL, printError, NULL);
  if (!executable.ptr)
    return 1;
  float x[6] = {0, 0, 0, 0, 0, 0}, y[4];
  int64_t shapeX[2] = {2, 3}, shapeY[2] = {2, 2};
  PfTensor input = {"X", PF_DTYPE_FLOAT32, 2, shapeX, x};
  PfTensor output = {"Y", PF_DTYPE_FLOAT32, 2, shapeY, y};
  if (mlirLogicalResultIsFailure(run(executable, &input, 1, &output, 1, printError, NULL)))
    return 1;
  /* X = 0: Y = tanh(B) = tanh(0.5), tanh(-1.5) in every row. */
  int ok = fabsf(y[0] - tanhf(0.5f)) < 1e-6f && fabsf(y[3] - tanhf(-1.5f)) < 1e-6f;
  printf("ran with the runtime found by the JIT: %s\n", ok ? "outputs right" : "OUTPUTS WRONG");
  /* The process ends here; the executable and module go with it. */
  return ok ? 0 : 1;
}
