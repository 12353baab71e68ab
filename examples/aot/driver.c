/* A minimal C driver for a model compiled with `pf-run MODEL --aot DIR`.
 *
 *   cc -I include -I DIR examples/aot/driver.c DIR/model.o -L build/lib -lpfrt -o run
 *   ./run DIR/model.weights input0.bin input1.bin ... -- output0.bin ...
 *
 * Inputs and outputs are raw little-endian arrays in the order of
 * pf_model_inputs / pf_model_outputs (model_plan.h), e.g. numpy's tofile(). */
#include "model_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t tensor_bytes(int64_t tensor) {
  const pf_model_tensor_info *t = &pf_model_tensors[tensor];
  int64_t n = pfrt_dtype_size(t->dtype);
  for (int d = 0; d < t->rank; ++d)
    n *= t->shape[d];
  return n;
}

static void *read_file(const char *path, int64_t expected) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "driver: cannot open %s\n", path);
    return NULL;
  }
  void *data = aligned_alloc(64, (size_t)((expected + 63) / 64 * 64 + 64));
  size_t got = fread(data, 1, (size_t)expected + 1, f);
  fclose(f);
  if ((int64_t)got != expected) {
    fprintf(stderr, "driver: %s has %zu bytes, expected %lld\n", path, got, (long long)expected);
    free(data);
    return NULL;
  }
  return data;
}

/* model.o's fingerprint of the pf-run --aot run that wrote it. */
extern const uint64_t pf_model_fingerprint;

int main(int argc, char **argv) {
  if (pf_model_fingerprint != PF_MODEL_FINGERPRINT) {
    fprintf(stderr, "driver: model.o and model_plan.h come from different pf-run --aot runs\n");
    return 1;
  }
  if (argc != 3 + PF_MODEL_NUM_INPUTS + PF_MODEL_NUM_OUTPUTS) {
    fprintf(stderr, "usage: %s model.weights <%d inputs> -- <%d outputs>\n", argv[0],
            PF_MODEL_NUM_INPUTS, PF_MODEL_NUM_OUTPUTS);
    return 2;
  }
  void *weights = read_file(argv[1], PF_MODEL_WEIGHTS_BYTES);
  void *inputs[PF_MODEL_NUM_INPUTS + 1], *outputs[PF_MODEL_NUM_OUTPUTS + 1];
  if (!weights)
    return 1;
  for (int i = 0; i < PF_MODEL_NUM_INPUTS; ++i)
    if (!(inputs[i] = read_file(argv[2 + i], tensor_bytes(pf_model_inputs[i].tensor))))
      return 1;
  for (int i = 0; i < PF_MODEL_NUM_OUTPUTS; ++i)
    outputs[i] = calloc(1, (size_t)tensor_bytes(pf_model_outputs[i].tensor));
  void *arena = aligned_alloc(64, PF_MODEL_ARENA_BYTES / 64 * 64 + 64);
  pfrt_tensor *table = calloc(PF_MODEL_NUM_TENSORS, sizeof(pfrt_tensor));

  pfrt_context_options options;
  pfrt_context_options_init(&options);
  pfrt_context *ctx = pfrt_context_create(&options);
  if (!ctx) {
    fprintf(stderr, "driver: cannot create a runtime context\n");
    return 1;
  }
  pf_model_bind(table, arena, weights, inputs, outputs);
  int64_t status = pf_main(ctx, table);
  if (status != 0) {
    fprintf(stderr, "driver: op %lld failed: %s\n", (long long)(status >> 32) - 1,
            pfrt_last_error(ctx));
    return 1;
  }
  for (int i = 0; i < PF_MODEL_NUM_OUTPUTS; ++i) {
    const char *path = argv[2 + PF_MODEL_NUM_INPUTS + 1 + i];
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(outputs[i], 1, (size_t)tensor_bytes(pf_model_outputs[i].tensor), f) !=
                  (size_t)tensor_bytes(pf_model_outputs[i].tensor)) {
      fprintf(stderr, "driver: cannot write %s\n", path);
      return 1;
    }
    fclose(f);
    printf("%s -> %s\n", pf_model_outputs[i].name, path);
  }
  pfrt_context_destroy(ctx);
  return 0;
}
