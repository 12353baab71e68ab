//===- Communication.cpp - The pfrt_comm_* kernels on a CUDA context -------===//
//
// Communication is the communicator's business, not the backend's: the
// entry points of comm/Comm.cpp check the arguments and call the
// communicator, which knows how to move the call's context's memory (NCCL:
// device memory directly; MPI on a CUDA context: staged through host
// buffers, comm/StagedCommunicator.h). The CUDA slots only add what every
// CUDA entry point checks first: a context with CUDA state, on its device.
//
//===----------------------------------------------------------------------===//

#include "State.h"

namespace pfrt::cuda {
namespace {

pfrt_status onDevice(pfrt_context *ctx, const char *function) {
  Call call(ctx, function);
  PFRT_TRY(call.begin());
  if (!ctx->cuda)
    return call.fail(PFRT_INTERNAL, "the context has no CUDA state");
  return check(call, cudaSetDevice(ctx->cuda->device), "cudaSetDevice");
}

pfrt_status commSend(pfrt_context *ctx, pfrt_comm *comm, const pfrt_tensor *t, int32_t peer,
                     int32_t tag) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_send"));
  return pfrt_comm_send_cpu(ctx, comm, t, peer, tag);
}

pfrt_status commRecv(pfrt_context *ctx, pfrt_comm *comm, const pfrt_tensor *t, int32_t peer,
                     int32_t tag) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_recv"));
  return pfrt_comm_recv_cpu(ctx, comm, t, peer, tag);
}

pfrt_status commIsend(pfrt_context *ctx, pfrt_comm *comm, const pfrt_tensor *t, int32_t peer,
                      int32_t tag, int64_t *request) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_isend"));
  return pfrt_comm_isend_cpu(ctx, comm, t, peer, tag, request);
}

pfrt_status commIrecv(pfrt_context *ctx, pfrt_comm *comm, const pfrt_tensor *t, int32_t peer,
                      int32_t tag, int64_t *request) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_irecv"));
  return pfrt_comm_irecv_cpu(ctx, comm, t, peer, tag, request);
}

pfrt_status commWait(pfrt_context *ctx, pfrt_comm *comm, int64_t request) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_wait"));
  return pfrt_comm_wait_cpu(ctx, comm, request);
}

pfrt_status commWaitAll(pfrt_context *ctx, pfrt_comm *comm, const int64_t *requests,
                        int32_t count) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_wait_all"));
  return pfrt_comm_wait_all_cpu(ctx, comm, requests, count);
}

pfrt_status commAllReduceSum(pfrt_context *ctx, pfrt_comm *comm, const pfrt_tensor *inout) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_all_reduce_sum"));
  return pfrt_comm_all_reduce_sum_cpu(ctx, comm, inout);
}

pfrt_status commBroadcast(pfrt_context *ctx, pfrt_comm *comm, const pfrt_tensor *t,
                          int32_t root) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_broadcast"));
  return pfrt_comm_broadcast_cpu(ctx, comm, t, root);
}

pfrt_status commIsendRows(pfrt_context *ctx, pfrt_comm *comm, const pfrt_tensor *x,
                          int32_t peer, int32_t tag, int64_t *request) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_isend_rows"));
  return pfrt_comm_isend_rows_cpu(ctx, comm, x, peer, tag, request);
}

pfrt_status commRecvAddRows(pfrt_context *ctx, pfrt_comm *comm, const pfrt_tensor *x,
                            const pfrt_tensor *out, int32_t peer, int32_t tag) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_recv_add_rows"));
  return pfrt_comm_recv_add_rows_cpu(ctx, comm, x, out, peer, tag);
}

pfrt_status commBarrier(pfrt_context *ctx, pfrt_comm *comm) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_barrier"));
  return pfrt_comm_barrier_cpu(ctx, comm);
}

pfrt_status commWallTime(pfrt_context *ctx, pfrt_comm *comm, double *seconds) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_wall_time"));
  return pfrt_comm_wall_time_cpu(ctx, comm, seconds);
}

pfrt_status commAbort(pfrt_context *ctx, pfrt_comm *comm, int32_t code) {
  PFRT_TRY(onDevice(ctx, "pfrt_comm_abort"));
  return pfrt_comm_abort_cpu(ctx, comm, code);
}

} // namespace

void registerCommunication(KernelTable &t) {
  t.pfrt_comm_send = commSend;
  t.pfrt_comm_recv = commRecv;
  t.pfrt_comm_isend = commIsend;
  t.pfrt_comm_irecv = commIrecv;
  t.pfrt_comm_wait = commWait;
  t.pfrt_comm_wait_all = commWaitAll;
  t.pfrt_comm_all_reduce_sum = commAllReduceSum;
  t.pfrt_comm_broadcast = commBroadcast;
  t.pfrt_comm_isend_rows = commIsendRows;
  t.pfrt_comm_recv_add_rows = commRecvAddRows;
  t.pfrt_comm_barrier = commBarrier;
  t.pfrt_comm_wall_time = commWallTime;
  t.pfrt_comm_abort = commAbort;
}

} // namespace pfrt::cuda
