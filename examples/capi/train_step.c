/*===- train_step.c - pf's C API: import, schedule, train one step ---------===*\
|*                                                                            *|
|*   train_step MODEL.onnx                                                    *|
|*                                                                            *|
|* Imports a BERT-style masked-LM model (pipefisher.bert_onnx writes one)     *|
|* with batch 4 and sequence 8, schedules it on 2 pipeline stages (1F1B, 4    *|
|* micro-batches, K-FAC work in the bubbles) and prints the schedule's        *|
|* figures, then builds the training step with K-FAC (the pf-training         *|
|* pipeline), compiles it and runs one step on made-up tokens. The step's     *|
|* outputs are printed as pf-run prints them, so that                         *|
|*   pf-run MODEL.onnx --dim batch=4 --dim sequence=8 --training-step --kfac  *|
|* on the same inputs can be compared line by line.                           *|
|*                                                                            *|
|* Build: CMake builds it as build/bin/pf-example-train-step; by hand,        *|
|*   cc train_step.c -Iinclude -I/usr/lib/llvm-22/include                     *|
|*      -Lbuild/lib -lPFCAPI -lPFMLIRCAPI -Wl,-rpath,$PWD/build/lib           *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
#include "pf-c/Import.h"
#include "pf-c/Registration.h"
#include "pf-c/Runtime.h"

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kBatch = 4, kSequence = 8, kTokens = kBatch * kSequence, kIgnore = -100 };

static void printError(MlirStringRef text, void *userData) {
  (void)userData;
  fwrite(text.data, 1, text.length, stderr);
}

static int runPipeline(MlirContext ctx, MlirOperation op, const char *pipeline) {
  MlirPassManager pm = mlirPassManagerCreate(ctx);
  MlirLogicalResult result =
      mlirParsePassPipeline(mlirPassManagerGetAsOpPassManager(pm),
                            mlirStringRefCreateFromCString(pipeline), printError, NULL);
  if (mlirLogicalResultIsSuccess(result))
    result = mlirPassManagerRunOnOp(pm, op);
  mlirPassManagerDestroy(pm);
  if (mlirLogicalResultIsFailure(result))
    fprintf(stderr, "train_step: error: the pipeline %s failed\n", pipeline);
  return mlirLogicalResultIsSuccess(result);
}

/* The first op named `name` under `op` (a pre-order search). */
static MlirOperation findOp(MlirOperation op, const char *name) {
  MlirStringRef opName = mlirIdentifierStr(mlirOperationGetName(op));
  if (opName.length == strlen(name) && memcmp(opName.data, name, opName.length) == 0)
    return op;
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op); ++r)
    for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
         !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
      for (MlirOperation o = mlirBlockGetFirstOperation(b); !mlirOperationIsNull(o);
           o = mlirOperationGetNextInBlock(o)) {
        MlirOperation found = findOp(o, name);
        if (!mlirOperationIsNull(found))
          return found;
      }
  return (MlirOperation){NULL};
}

static double floatAttr(MlirOperation op, const char *name) {
  MlirAttribute attr = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString(name));
  return mlirAttributeIsAFloat(attr) ? mlirFloatAttrGetValueDouble(attr) : NAN;
}

/* Schedules a copy of the forward graph and prints what pf-pipeline found. */
static int schedule(MlirContext ctx, MlirModule module) {
  MlirOperation copy = mlirOperationClone(mlirModuleGetOperation(module));
  int ok = runPipeline(ctx, copy,
                       "builtin.module(pf-pipeline{graph-opt=false stages=2 microbatches=4 "
                       "schedule=1f1b kfac=bubbles})");
  MlirOperation pipeline = ok ? findOp(copy, "pf.pipeline") : (MlirOperation){NULL};
  if (ok && mlirOperationIsNull(pipeline)) {
    fprintf(stderr, "train_step: error: pf-pipeline made no pf.pipeline\n");
    ok = 0;
  }
  if (ok)
    printf("schedule: 1f1b on 2 stages, 4 micro-batches: step %.4f ms, utilization %.1f%%\n",
           floatAttr(pipeline, "pf.step_time_ms"), 100 * floatAttr(pipeline, "pf.utilization"));
  mlirOperationDestroy(copy);
  return ok;
}

/* Made-up tokens: every fourth position is masked and must be predicted. */
static void makeInputs(int64_t ids[kTokens], int64_t types[kTokens], int64_t mask[kTokens],
                       int64_t labels[kTokens]) {
  for (int i = 0; i < kTokens; ++i) {
    ids[i] = (7 * i + 3) % 100;
    types[i] = i % kSequence < kSequence / 2 ? 0 : 1;
    mask[i] = 1;
    labels[i] = i % 4 == 0 ? (5 * i + 1) % 100 : kIgnore;
  }
}

static float sum(const float *data, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += data[i];
  return (float)s;
}

static int trainOneStep(MlirModule module) {
  PfCompileOptions options = pfCompileOptionsGetDefault();
  options.numThreads = 1;
  PfExecutable step = pfCompile(module, &options, printError, NULL);
  if (pfExecutableIsNull(step))
    return 0;
  int64_t ids[kTokens], types[kTokens], mask[kTokens], labels[kTokens], stepNumber = 1;
  double lr = 1e-3;
  makeInputs(ids, types, mask, labels);
  int64_t tokens[2] = {kBatch, kSequence};
  PfTensor inputs[6] = {{"input_ids", PF_DTYPE_INT64, 2, tokens, ids},
                        {"token_type_ids", PF_DTYPE_INT64, 2, tokens, types},
                        {"attention_mask", PF_DTYPE_INT64, 2, tokens, mask},
                        {"labels", PF_DTYPE_INT64, 2, tokens, labels},
                        {"step", PF_DTYPE_INT64, 0, NULL, &stepNumber},
                        {"lr", PF_DTYPE_FLOAT64, 0, NULL, &lr}};
  float loss = NAN;
  PfTensor outputs[1] = {{"loss", PF_DTYPE_FLOAT32, 0, NULL, &loss}};

  /* The step updates its own copy of the weights: watch one of them. */
  PfTensor bias = {0};
  for (intptr_t i = 0; i < pfExecutableGetNumParameters(step); ++i)
    if (strcmp(pfExecutableGetParameter(step, i).name, "cls.predictions.bias") == 0)
      bias = pfExecutableGetParameter(step, i);
  float before = bias.data ? sum(bias.data, bias.shape[0]) : NAN;

  int ok = mlirLogicalResultIsSuccess(
      pfExecutableRun(step, inputs, 6, outputs, 1, printError, NULL));
  if (ok) {
    /* pf-run's line for the output (sum of its elements, %.6E). */
    printf("output loss: float32 scalar, sum %.6E\n", (double)loss);
    printf("cls.predictions.bias: sum %.6f before the step, %.6f after\n", before,
           bias.data ? sum(bias.data, bias.shape[0]) : NAN);
  }
  pfExecutableDestroy(step);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.onnx (e.g. python -m pipefisher.bert_onnx --config tiny "
                    "--layers 2 --vocab 100 --out model.onnx)\n", argv[0]);
    return 2;
  }
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  pfRegisterAllDialects(registry);
  MlirContext ctx = mlirContextCreate();
  mlirContextAppendDialectRegistry(ctx, registry);
  mlirDialectRegistryDestroy(registry);
  pfRegisterAllPasses();

  const char *dims[2] = {"batch=4", "sequence=8"};
  PfImportOptions importOptions = pfImportOptionsGetDefault();
  importOptions.dims = dims;
  importOptions.numDims = 2;
  MlirModule module = pfImportONNXFile(ctx, mlirStringRefCreateFromCString(argv[1]),
                                       &importOptions, printError, NULL);
  int ok = !mlirModuleIsNull(module);
  ok = ok && schedule(ctx, module);
  ok = ok && runPipeline(ctx, mlirModuleGetOperation(module), "builtin.module(pf-training{kfac=true})");
  ok = ok && trainOneStep(module);
  if (!mlirModuleIsNull(module))
    mlirModuleDestroy(module);
  mlirContextDestroy(ctx);
  return ok ? 0 : 1;
}
