//===- CommFaultProbe.cpp - A job in which rank 1 dies ----------------------===//
//
// Run by comm_fault_check.py under mpirun: `CommFaultProbe MODE`. Every rank
// creates a communicator and meets at a barrier; then rank 0 waits in
// pfrt_comm_recv for a message from rank 1, the other ranks in a barrier
// rank 0 never reaches. Rank 1, depending on MODE:
//   kill   raise(SIGKILL)           (a crash, or kill -9 from outside);
//   exit   returns 3 from main      (an error, without pfrt_comm_finalize);
//   abort  pfrt_comm_abort(.., 7)   (a rank that gives up on purpose);
//   none   sends the message        (the control: the job succeeds).
// Each rank prints what it is about to do, so the checker can tell that the
// job got that far.
//
//===----------------------------------------------------------------------===//

#include "pf/Runtime/pfrt.h"

#include <csignal>
#include <cstdio>
#include <cstring>

namespace {

int fail(const char *what, pfrt_context *ctx) {
  std::printf("probe: %s failed: %s\n", what, pfrt_last_error(ctx));
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: CommFaultProbe kill|exit|abort|none\n");
    return 2;
  }
  const char *mode = argv[1];
  pfrt_context *ctx = pfrt_context_create(nullptr);
  pfrt_comm *comm = nullptr;
  if (!ctx || pfrt_comm_create(ctx, nullptr, &comm) != PFRT_OK)
    return fail("pfrt_comm_create", ctx);
  int32_t rank = pfrt_comm_rank(comm);
  if (pfrt_comm_size(comm) < 2) {
    std::printf("probe: needs at least 2 ranks\n");
    return 2;
  }
  if (pfrt_comm_barrier(ctx, comm) != PFRT_OK)
    return fail("pfrt_comm_barrier", ctx);

  float value = 0;
  pfrt_tensor message = {&value, PFRT_F32, 0, {0}};
  if (rank == 1) {
    std::printf("probe: rank 1 %s\n", mode);
    std::fflush(stdout);
    if (!std::strcmp(mode, "kill"))
      std::raise(SIGKILL);
    if (!std::strcmp(mode, "exit"))
      return 3;
    if (!std::strcmp(mode, "abort")) {
      pfrt_comm_abort(ctx, comm, 7);
      return fail("pfrt_comm_abort", ctx);
    }
    value = 42;
    if (pfrt_comm_send(ctx, comm, &message, 0, 0) != PFRT_OK)
      return fail("pfrt_comm_send", ctx);
  } else if (rank == 0) {
    std::printf("probe: rank 0 waits for rank 1\n");
    std::fflush(stdout);
    if (pfrt_comm_recv(ctx, comm, &message, 1, 0) != PFRT_OK)
      return fail("pfrt_comm_recv", ctx);
    std::printf("probe: rank 0 received %g\n", value);
  }
  if (pfrt_comm_barrier(ctx, comm) != PFRT_OK)
    return fail("pfrt_comm_barrier", ctx);
  pfrt_comm_destroy(comm);
  if (pfrt_comm_finalize(ctx) != PFRT_OK)
    return fail("pfrt_comm_finalize", ctx);
  pfrt_context_destroy(ctx);
  return 0;
}
