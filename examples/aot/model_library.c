/* A model compiled with `pf-run MODEL --aot DIR` as a shared library that
 * pf-aot-run (or any driver) loads with dlopen:
 *
 *   cc -shared -fPIC -I include -I DIR examples/aot/model_library.c DIR/model.o \
 *      -o DIR/model.so
 *   pf-aot-run DIR/model.so --weights DIR/model.weights --device cuda ...
 *
 * The library leaves the pfrt_* symbols undefined: the process that loads it
 * provides them (libpfrt, or a runner linked with the runtime). */
#include "model_plan.h"

__attribute__((visibility("default"))) const pf_aot_model *pf_aot_model_describe(void) {
  static const pf_aot_model model = {PF_AOT_MODEL_VERSION,
                                     PFRT_ABI_VERSION,
                                     PF_MODEL_NUM_TENSORS,
                                     PF_MODEL_NUM_INPUTS,
                                     PF_MODEL_NUM_OUTPUTS,
                                     PF_MODEL_ARENA_BYTES,
                                     PF_MODEL_WEIGHTS_BYTES,
                                     pf_model_tensors,
                                     pf_model_inputs,
                                     pf_model_outputs,
                                     pf_main,
                                     PF_MODEL_NUM_OPS,
                                     pf_model_op_names,
                                     PF_MODEL_PROFILE_HOOKS,
                                     PF_MODEL_FINGERPRINT};
  return &model;
}
