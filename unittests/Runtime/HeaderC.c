/*===- HeaderC.c - pfrt.h compiles as C and works from C -----------------===*\
|* The lowering and AOT drivers are C consumers of the ABI; this file keeps  *|
|* the header plain C (it is compiled by the C compiler) and runs a tiny     *|
|* program through it.                                                       *|
\*===----------------------------------------------------------------------===*/

#include "pf/Runtime/pfrt.h"

#include <stddef.h>

/* Returns 0 on success, otherwise the number of the failing step. */
int pfrt_test_from_c(void) {
  pfrt_context_options opts;
  pfrt_context_options_init(&opts);
  opts.num_threads = 1;
  pfrt_context *ctx = pfrt_context_create(&opts);
  if (!ctx)
    return 1;
  float a[3] = {1, 2, 3}, b[1] = {10}, c[3] = {0, 0, 0};
  pfrt_tensor ta = {a, PFRT_F32, 1, {3}};
  pfrt_tensor tb = {b, PFRT_F32, 0, {0}};
  pfrt_tensor tc = {c, PFRT_F32, 1, {3}};
  int result = 0;
  if (pfrt_add(ctx, &ta, &tb, &tc) != PFRT_OK)
    result = 2;
  else if (c[0] != 11 || c[1] != 12 || c[2] != 13)
    result = 3;
  else if (pfrt_add(ctx, &ta, NULL, &tc) != PFRT_INVALID_ARGUMENT)
    result = 4;
  else if (pfrt_last_error(ctx)[0] == '\0')
    result = 5;
  pfrt_context_destroy(ctx);
  return result;
}
