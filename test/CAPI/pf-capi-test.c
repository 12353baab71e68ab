/*===- pf-capi-test.c - pf's C API, used from C ----------------------------===*\
|*                                                                            *|
|* pf-capi-test DIR writes a small ONNX text model into DIR and then, through *|
|* libPFCAPI only: registers the dialects and parses pf IR, imports the model *|
|* (dims, no-weights, with and without the graph passes), prints the module,  *|
|* runs a pass pipeline with MlirPassManager + mlirParsePassPipeline,         *|
|* compiles and runs it, checks the outputs against values computed here in  *|
|* C, and goes through the error paths. It prints what capi.test checks and  *|
|* exits non-zero when a value or an expected failure does not come out.     *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#include "pf-c/Dialects.h"
#include "pf-c/Import.h"
#include "pf-c/Registration.h"
#include "pf-c/Runtime.h"

#include "mlir-c/Dialect/Func.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/Support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Y = tanh(X W + B) and Z = X * X, with batch a symbolic dimension. */
static const char *const kModel =
    "<\n  ir_version: 8,\n  opset_import: [\"\" : 14]\n>\n"
    "g (float[batch, 3] X) => (float[batch, 2] Y, float[batch, 3] Z)\n"
    "<float[3, 2] W = {1.0, -2.0, 0.5, 3.0, -1.0, 0.25}, float[2] B = {0.5, -1.5}>\n"
    "{\n  M = MatMul(X, W)\n  A = Add(M, B)\n  Y = Tanh(A)\n  Z = Mul(X, X)\n}\n";
static const float kW[3][2] = {{1.0f, -2.0f}, {0.5f, 3.0f}, {-1.0f, 0.25f}};
static const float kB[2] = {0.5f, -1.5f};

static int failures = 0;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

/* Collects the pieces an MlirStringCallback gets. */
typedef struct Text {
  char data[8192];
  size_t size;
} Text;

static void append(MlirStringRef piece, void *userData) {
  Text *text = (Text *)userData;
  size_t room = sizeof(text->data) - 1 - text->size;
  size_t n = piece.length < room ? piece.length : room;
  memcpy(text->data + text->size, piece.data, n);
  text->size += n;
  text->data[text->size] = '\0';
}

static void clear(Text *text) {
  text->size = 0;
  text->data[0] = '\0';
}

static void printToStdout(MlirStringRef piece, void *userData) {
  (void)userData;
  fwrite(piece.data, 1, piece.length, stdout);
}

static void printModule(const char *title, MlirModule module) {
  printf("== %s\n", title);
  mlirOperationPrint(mlirModuleGetOperation(module), printToStdout, NULL);
  printf("\n");
}

/* The error text of an expected failure, on one "== title" line each. */
static void printError(const char *title, const Text *text) {
  printf("== %s\n%s", title, text->data);
  check(text->size > 0, title);
}

static MlirModule import(MlirContext ctx, const char *path, const char *dim, bool weights,
                         bool graphPasses, Text *errors) {
  PfImportOptions options = pfImportOptionsGetDefault();
  const char *dims[1] = {dim};
  options.dims = dims;
  options.numDims = dim ? 1 : 0;
  options.loadWeights = weights;
  options.graphPasses = graphPasses;
  clear(errors);
  return pfImportONNXFile(ctx, mlirStringRefCreateFromCString(path), &options, append, errors);
}

/* pf IR parsed in a context that has the dialects through their handles. */
static void parseWithHandles(void) {
  MlirContext ctx = mlirContextCreate();
  mlirDialectHandleRegisterDialect(mlirGetDialectHandle__pf__(), ctx);
  mlirDialectHandleRegisterDialect(mlirGetDialectHandle__func__(), ctx);
  MlirModule module = mlirModuleCreateParse(
      ctx, mlirStringRefCreateFromCString(
               "func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
               "  %n = pf.neg %a : (tensor<2xf32>) -> tensor<2xf32>\n"
               "  return %n : tensor<2xf32>\n}\n"));
  check(!mlirModuleIsNull(module), "parse pf IR with the dialect handles");
  if (!mlirModuleIsNull(module)) {
    printModule("parsed", module);
    mlirModuleDestroy(module);
  }
  mlirContextDestroy(ctx);
}

/* X (2x3), the outputs computed in C, and the run's check against them. */
static const float kX[2][3] = {{0.5f, -1.0f, 2.0f}, {1.5f, 0.25f, -0.75f}};

static float maxErrorY(const float y[2][2]) {
  float worst = 0;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float a = kB[j];
      for (int k = 0; k < 3; ++k)
        a += kX[i][k] * kW[k][j];
      float e = fabsf(tanhf(a) - y[i][j]);
      worst = e > worst ? e : worst;
    }
  return worst;
}

static float maxErrorZ(const float z[2][3]) {
  float worst = 0;
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) {
      float e = fabsf(kX[i][k] * kX[i][k] - z[i][k]);
      worst = e > worst ? e : worst;
    }
  return worst;
}

static void printTensor(const char *kind, PfTensor t) {
  printf("%s %s: dtype %d shape", kind, t.name, t.dtype);
  for (int32_t d = 0; d < t.rank; ++d)
    printf("%s%lld", d ? "x" : " ", (long long)t.shape[d]);
  printf("\n");
}

static void compileAndRun(MlirModule module) {
  Text errors;
  clear(&errors);
  PfCompileOptions options = pfCompileOptionsGetDefault();
  options.numThreads = 1;
  PfExecutable exe = pfCompile(module, &options, append, &errors);
  check(!pfExecutableIsNull(exe), "compile");
  if (pfExecutableIsNull(exe)) {
    fprintf(stderr, "%s", errors.data);
    return;
  }
  printf("== executable\n");
  for (intptr_t i = 0; i < pfExecutableGetNumInputs(exe); ++i)
    printTensor("input", pfExecutableGetInput(exe, i));
  for (intptr_t i = 0; i < pfExecutableGetNumOutputs(exe); ++i)
    printTensor("output", pfExecutableGetOutput(exe, i));
  for (intptr_t i = 0; i < pfExecutableGetNumParameters(exe); ++i) {
    PfTensor p = pfExecutableGetParameter(exe, i);
    printTensor("parameter", p);
    check(p.data != NULL, "parameter data");
  }

  int64_t shapeX[2] = {2, 3}, shapeY[2] = {2, 2};
  float y[2][2], z[2][3];
  PfTensor input = {"X", PF_DTYPE_FLOAT32, 2, shapeX, (void *)kX};
  PfTensor outputs[2] = {{"Z", PF_DTYPE_FLOAT32, 2, shapeX, z},
                         {"Y", PF_DTYPE_FLOAT32, 2, shapeY, y}};
  memset(y, 0xff, sizeof(y));
  memset(z, 0xff, sizeof(z));
  check(mlirLogicalResultIsSuccess(pfExecutableRun(exe, &input, 1, outputs, 2, append, &errors)),
        "run");
  float errorY = maxErrorY((const float(*)[2])y), errorZ = maxErrorZ((const float(*)[3])z);
  printf("== run\nY = %.6f %.6f / %.6f %.6f\n", y[0][0], y[0][1], y[1][0], y[1][1]);
  printf("Y max error %s, Z max error %s\n", errorY <= 1e-6f ? "<= 1e-6" : "TOO LARGE",
         errorZ == 0 ? "0" : "NONZERO");
  check(errorY <= 1e-6f && errorZ == 0, "outputs match the values computed in C");

  /* Only Y asked for: Z goes to scratch. */
  memset(y, 0, sizeof(y));
  check(mlirLogicalResultIsSuccess(pfExecutableRun(exe, &input, 1, &outputs[1], 1, append,
                                                   &errors)),
        "run with one output");
  check(maxErrorY((const float(*)[2])y) <= 1e-6f, "Y alone");
  printf("%s", errors.data);

  /* Bad runs: a wrong shape, an unknown output, a missing input. */
  int64_t wrongShape[2] = {3, 3};
  PfTensor wrong = {"X", PF_DTYPE_FLOAT32, 2, wrongShape, (void *)kX};
  clear(&errors);
  check(mlirLogicalResultIsFailure(pfExecutableRun(exe, &wrong, 1, &outputs[1], 1, append,
                                                   &errors)),
        "run with a wrong shape fails");
  printError("wrong shape", &errors);
  PfTensor wrongDtype = {"X", PF_DTYPE_INT64, 2, shapeX, (void *)kX};
  clear(&errors);
  check(mlirLogicalResultIsFailure(pfExecutableRun(exe, &wrongDtype, 1, NULL, 0, append,
                                                   &errors)),
        "run with a wrong dtype fails");
  printError("wrong dtype", &errors);
  PfTensor unknown = {"W", PF_DTYPE_FLOAT32, 2, shapeY, y};
  clear(&errors);
  check(mlirLogicalResultIsFailure(pfExecutableRun(exe, &input, 1, &unknown, 1, append,
                                                   &errors)),
        "run with an unknown output fails");
  printError("unknown output", &errors);
  clear(&errors);
  check(mlirLogicalResultIsFailure(pfExecutableRun(exe, NULL, 0, NULL, 0, append, &errors)),
        "run without inputs fails");
  printError("missing input", &errors);
  /* Positions outside the lists: a tensor without a name, never a read
   * outside them. */
  check(pfExecutableGetInput(exe, -1).name == NULL, "input -1 has no name");
  check(pfExecutableGetOutput(exe, pfExecutableGetNumOutputs(exe)).name == NULL,
        "output past the end has no name");
  check(pfExecutableGetParameter(exe, -7).name == NULL, "parameter -7 has no name");
  pfExecutableDestroy(exe);

  /* A null executable and a null module: messages, never a crash. */
  PfExecutable none = {NULL};
  check(pfExecutableGetNumInputs(none) == 0 && pfExecutableGetInput(none, 0).name == NULL,
        "a null executable has no inputs");
  clear(&errors);
  check(mlirLogicalResultIsFailure(pfExecutableRun(none, NULL, 0, NULL, 0, append, &errors)),
        "running a null executable fails");
  printError("null executable", &errors);
  clear(&errors);
  check(mlirLogicalResultIsFailure(pfExecutableCopyParameters(none, true, append, &errors)),
        "copying a null executable's parameters fails");
  printError("null executable parameters", &errors);
  pfExecutableDestroy(none);
  MlirModule nullModule = {NULL};
  clear(&errors);
  check(pfExecutableIsNull(pfCompile(nullModule, NULL, append, &errors)),
        "compiling a null module fails");
  printError("null module", &errors);

  /* A function the module does not have. */
  options.function = "nope";
  clear(&errors);
  exe = pfCompile(module, &options, append, &errors);
  check(pfExecutableIsNull(exe), "compile of a missing function fails");
  printError("missing function", &errors);
}

/* MLIR's C API functions that test op traits (SymbolTable, IsTerminator) on
 * pf modules: libPFMLIRCAPI and libPFCAPI must agree with libMLIR.so on the
 * traits' TypeIDs (lib/CAPI/CMakeLists.txt). */
static void checkMLIRCAPIOnPF(MlirModule module) {
  MlirSymbolTable symbols = mlirSymbolTableCreate(mlirModuleGetOperation(module));
  check(!mlirSymbolTableIsNull(symbols), "the module is a symbol table");
  if (mlirSymbolTableIsNull(symbols))
    return;
  MlirOperation param = mlirSymbolTableLookup(symbols, mlirStringRefCreateFromCString("W"));
  MlirOperation main = mlirSymbolTableLookup(symbols, mlirStringRefCreateFromCString("main"));
  check(!mlirOperationIsNull(param) && !mlirOperationIsNull(main), "lookup of W and main");
  if (!mlirOperationIsNull(param) && !mlirOperationIsNull(main)) {
    MlirIdentifier name = mlirOperationGetName(param);
    MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(main, 0));
    MlirOperation terminator = mlirBlockGetTerminator(body);
    check(!mlirOperationIsNull(terminator), "main's body has a terminator");
    MlirIdentifier terminatorName = mlirOperationGetName(terminator);
    MlirStringRef paramOp = mlirIdentifierStr(name);
    MlirStringRef lastOp = mlirIdentifierStr(terminatorName);
    printf("== symbols\nW: %.*s, main ends with %.*s\n", (int)paramOp.length, paramOp.data,
           (int)lastOp.length, lastOp.data);
  }
  mlirSymbolTableDestroy(symbols);
}

/* Pipelines through MLIR's C API over the passes pfRegisterAllPasses adds. */
static MlirLogicalResult runPipeline(MlirContext ctx, MlirModule module, const char *pipeline,
                                     Text *errors) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  clear(errors);
  MlirLogicalResult result =
      mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(pm),
                            mlirStringRefCreateFromCString(pipeline), append, errors);
  if (mlirLogicalResultIsSuccess(result))
    result = mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module));
  mlirPassManagerDestroy(pm);
  return result;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: pf-capi-test DIR (a writable directory)\n");
    return 2;
  }
  char path[4096], missing[4096];
  snprintf(path, sizeof(path), "%s/model.onnxtext", argv[1]);
  snprintf(missing, sizeof(missing), "%s/missing.onnx", argv[1]);
  FILE *file = fopen(path, "w");
  if (!file || fputs(kModel, file) < 0 || fclose(file) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    return 2;
  }

  parseWithHandles();

  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  pfRegisterAllDialects(registry);
  MlirContext ctx = mlirContextCreate();
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  pfRegisterAllPasses();
  pfRegisterAllPasses(); /* twice is fine */
  Text errors;

  /* Raw import (shape inference only), then pf-graph-opt as a pipeline. */
  MlirModule module = import(ctx, path, "batch=2", true, false, &errors);
  check(!mlirModuleIsNull(module), "import");
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "%s", errors.data);
    return 1;
  }
  printModule("imported", module);
  checkMLIRCAPIOnPF(module);
  check(mlirLogicalResultIsSuccess(runPipeline(ctx, module, "builtin.module(pf-graph-opt)",
                                               &errors)),
        "pf-graph-opt");
  printModule("pf-graph-opt", module);
  compileAndRun(module);
  /* The module is still the pf IR after compiling. */
  printModule("after compile", module);
  mlirModuleDestroy(module);

  /* Bad pipelines: an option value pf refuses, an unknown pass. */
  module = import(ctx, path, "batch=2", true, true, &errors);
  check(!mlirModuleIsNull(module), "import with the graph passes");
  check(mlirLogicalResultIsFailure(
            runPipeline(ctx, module, "builtin.module(pf-training{optimizer=adagrad})", &errors)),
        "a bad pipeline option fails");
  printError("bad pipeline option", &errors);
  check(mlirLogicalResultIsFailure(
            runPipeline(ctx, module, "builtin.module(pf-no-such-pass)", &errors)),
        "an unknown pass fails");
  printError("unknown pass", &errors);
  mlirModuleDestroy(module);

  /* Shapes only: printable, not runnable. */
  module = import(ctx, path, "batch=4", false, true, &errors);
  check(!mlirModuleIsNull(module), "import without weights");
  printModule("no weights", module);
  clear(&errors);
  PfExecutable exe = pfCompile(module, NULL, append, &errors);
  check(pfExecutableIsNull(exe), "compile without weights fails");
  printError("compile without weights", &errors);
  mlirModuleDestroy(module);

  /* Bad imports: a missing file, a malformed dim, a dim left dynamic. */
  module = import(ctx, missing, "batch=2", true, true, &errors);
  check(mlirModuleIsNull(module), "import of a missing file fails");
  printError("missing file", &errors);
  module = import(ctx, path, "batch", true, true, &errors);
  check(mlirModuleIsNull(module), "import with a malformed dim fails");
  printError("malformed dim", &errors);
  module = import(ctx, path, NULL, true, true, &errors);
  check(mlirModuleIsNull(module), "import with a dynamic dim fails");
  printError("dynamic dim", &errors);

  mlirContextDestroy(ctx);
  printf("== %d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
