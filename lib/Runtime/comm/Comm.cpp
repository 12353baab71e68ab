//===- Comm.cpp - The pfrt_comm_* entry points -----------------------------===//
//
// Validates every argument (so no backend sees a bad peer, tag or
// descriptor), then forwards to the Communicator. Blocking send and receive
// are the non-blocking calls followed by their wait.
//
//===----------------------------------------------------------------------===//

#include "Communicator.h"
#include "StagedCommunicator.h"

#ifdef PFRT_HAVE_MPI
#include "MpiCommunicator.h"
#endif
#ifdef PFRT_HAVE_NCCL
#include "NcclCommunicator.h"
#endif

#include <cstring>
#include <new>
#include <vector>

#include <unistd.h>

using namespace pfrt;
using namespace pfrt::comm;

namespace pfrt {
namespace comm {

const char *backendName(Backend backend) {
  switch (backend) {
  case Backend::Mpi:
    return "MPI";
  case Backend::Nccl:
    return "NCCL";
  case Backend::MpiStaged:
    return "MPI (staged through host memory)";
  }
  return "unknown";
}

pfrt_status createWorld(const Call &call, Backend backend,
                        std::unique_ptr<Communicator> &out) {
  if (backend == Backend::Nccl) {
#ifdef PFRT_HAVE_NCCL
    return createNcclWorld(call, out);
#else
    return call.fail(PFRT_UNSUPPORTED,
                     "the NCCL communication backend is not "
                     "built into this library (%s)",
                     PFRT_NCCL_UNAVAILABLE);
#endif
  }
#ifdef PFRT_HAVE_MPI
  std::unique_ptr<Communicator> mpi;
  PFRT_TRY(createMpiWorld(call, mpi));
  // MPI reads host memory: a CUDA context's tensors go through host buffers.
  bool staged = backend == Backend::MpiStaged || call.context()->backend == PFRT_BACKEND_CUDA;
  out = staged ? stageThroughHost(std::move(mpi)) : std::move(mpi);
  return PFRT_OK;
#else
  return call.fail(PFRT_UNSUPPORTED, "the %s communication backend is not "
                   "built into this library", backendName(backend));
#endif
}

int64_t hostNameHash() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  uint64_t h = 1469598103934665603ull;
  for (const char *c = name; *c; ++c)
    h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  return static_cast<int64_t>(h >> 2);
}

} // namespace comm
} // namespace pfrt

namespace {

pfrt_status checkComm(const Call &call, const pfrt_comm *comm) {
  PFRT_TRY(call.begin());
  return call.pointer("comm", comm);
}

pfrt_status checkPeer(const Call &call, const pfrt_comm *comm, int32_t peer) {
  const Communicator &c = *comm->impl;
  if (peer < 0 || peer >= c.size())
    return call.fail(PFRT_INVALID_ARGUMENT, "peer %d is out of range for a "
                     "communicator of %d ranks", peer, c.size());
  if (peer == c.rank())
    return call.fail(PFRT_INVALID_ARGUMENT, "peer %d is this rank; a rank "
                     "does not send to itself", peer);
  return PFRT_OK;
}

pfrt_status checkTag(const Call &call, const pfrt_comm *comm, int32_t tag) {
  int32_t maxTag = comm->impl->maxTag();
  if (tag < 0 || tag > maxTag)
    return call.fail(PFRT_INVALID_ARGUMENT, "tag %d is out of range 0..%d",
                     tag, maxTag);
  return PFRT_OK;
}

/// The checks every point-to-point call makes.
pfrt_status checkTransfer(const Call &call, const pfrt_comm *comm,
                          const pfrt_tensor *t, int32_t peer, int32_t tag) {
  PFRT_TRY(checkComm(call, comm));
  PFRT_TRY(call.tensor("t", t));
  PFRT_TRY(checkPeer(call, comm, peer));
  return checkTag(call, comm, tag);
}

/// Wraps a Communicator into the C handle.
pfrt_status wrap(const Call &call, std::unique_ptr<Communicator> impl,
                 pfrt_comm **out) {
  auto *handle = new (std::nothrow) pfrt_comm();
  if (!handle)
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate a communicator");
  handle->impl = std::move(impl);
  *out = handle;
  return PFRT_OK;
}

/// Distinct ranks of the parent, including the caller's.
pfrt_status checkGroupRanks(const Call &call, const Communicator &parent,
                            const int32_t *ranks, int32_t count) {
  if (count < 1)
    return call.fail(PFRT_INVALID_ARGUMENT, "a group needs at least one rank, "
                     "got %d", count);
  PFRT_TRY(call.pointer("ranks", ranks));
  std::vector<bool> seen(static_cast<size_t>(parent.size()), false);
  bool includesCaller = false;
  for (int32_t i = 0; i < count; ++i) {
    int32_t r = ranks[i];
    if (r < 0 || r >= parent.size())
      return call.fail(PFRT_INVALID_ARGUMENT, "ranks[%d] = %d is out of range "
                       "for a communicator of %d ranks", i, r, parent.size());
    if (seen[r])
      return call.fail(PFRT_INVALID_ARGUMENT, "rank %d appears twice in "
                       "ranks", r);
    seen[r] = true;
    includesCaller |= r == parent.rank();
  }
  if (!includesCaller)
    return call.fail(PFRT_INVALID_ARGUMENT, "this rank (%d) is not in ranks; "
                     "only the members create a group", parent.rank());
  return PFRT_OK;
}

} // namespace

extern "C" {

void pfrt_comm_options_init(pfrt_comm_options *options) {
  if (!options)
    return;
  options->abi_version = PFRT_ABI_VERSION;
  options->backend = PFRT_COMM_MPI;
}

pfrt_status pfrt_comm_create(pfrt_context *ctx,
                             const pfrt_comm_options *options,
                             pfrt_comm **out) {
  Call call(ctx, "pfrt_comm_create");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.pointer("out", out));
  *out = nullptr;
  pfrt_comm_options defaults;
  pfrt_comm_options_init(&defaults);
  const pfrt_comm_options &opts = options ? *options : defaults;
  if (opts.abi_version != PFRT_ABI_VERSION)
    return call.fail(PFRT_INVALID_ARGUMENT, "options are of ABI version %d; "
                     "this library is version %d", opts.abi_version,
                     PFRT_ABI_VERSION);
  if (opts.backend != PFRT_COMM_MPI && opts.backend != PFRT_COMM_NCCL &&
      opts.backend != PFRT_COMM_MPI_STAGED)
    return call.fail(PFRT_INVALID_ARGUMENT, "unknown communication backend "
                     "%d", opts.backend);
  std::unique_ptr<Communicator> impl;
  PFRT_TRY(createWorld(call, static_cast<Backend>(opts.backend), impl));
  return wrap(call, std::move(impl), out);
}

pfrt_status pfrt_comm_create_group(pfrt_context *ctx, pfrt_comm *parent,
                                   const int32_t *ranks, int32_t count,
                                   pfrt_comm **out) {
  Call call(ctx, "pfrt_comm_create_group");
  PFRT_TRY(call.begin());
  PFRT_TRY(call.pointer("parent", parent));
  PFRT_TRY(call.pointer("out", out));
  *out = nullptr;
  PFRT_TRY(checkGroupRanks(call, *parent->impl, ranks, count));
  std::vector<int32_t> members(ranks, ranks + count);
  std::unique_ptr<Communicator> impl;
  PFRT_TRY(parent->impl->createGroup(call, members, impl));
  return wrap(call, std::move(impl), out);
}

void pfrt_comm_destroy(pfrt_comm *comm) { delete comm; }

int32_t pfrt_comm_rank(const pfrt_comm *comm) {
  return comm ? comm->impl->rank() : -1;
}

int32_t pfrt_comm_size(const pfrt_comm *comm) {
  return comm ? comm->impl->size() : 0;
}

int32_t pfrt_comm_max_tag(const pfrt_comm *comm) {
  return comm ? comm->impl->maxTag() : -1;
}

pfrt_status pfrt_comm_send_cpu(pfrt_context *ctx, pfrt_comm *comm,
                               const pfrt_tensor *t, int32_t peer, int32_t tag) {
  Call call(ctx, "pfrt_comm_send");
  PFRT_TRY(checkTransfer(call, comm, t, peer, tag));
  int64_t request = 0;
  PFRT_TRY(comm->impl->isend(call, *t, peer, tag, request));
  return comm->impl->wait(call, request);
}

pfrt_status pfrt_comm_recv_cpu(pfrt_context *ctx, pfrt_comm *comm,
                               const pfrt_tensor *t, int32_t peer, int32_t tag) {
  Call call(ctx, "pfrt_comm_recv");
  PFRT_TRY(checkTransfer(call, comm, t, peer, tag));
  int64_t request = 0;
  PFRT_TRY(comm->impl->irecv(call, *t, peer, tag, request));
  return comm->impl->wait(call, request);
}

pfrt_status pfrt_comm_isend_cpu(pfrt_context *ctx, pfrt_comm *comm,
                                const pfrt_tensor *t, int32_t peer, int32_t tag,
                                int64_t *request) {
  Call call(ctx, "pfrt_comm_isend");
  PFRT_TRY(checkTransfer(call, comm, t, peer, tag));
  PFRT_TRY(call.pointer("request", request));
  *request = 0;
  return comm->impl->isend(call, *t, peer, tag, *request);
}

pfrt_status pfrt_comm_irecv_cpu(pfrt_context *ctx, pfrt_comm *comm,
                                const pfrt_tensor *t, int32_t peer, int32_t tag,
                                int64_t *request) {
  Call call(ctx, "pfrt_comm_irecv");
  PFRT_TRY(checkTransfer(call, comm, t, peer, tag));
  PFRT_TRY(call.pointer("request", request));
  *request = 0;
  return comm->impl->irecv(call, *t, peer, tag, *request);
}

pfrt_status pfrt_comm_wait_cpu(pfrt_context *ctx, pfrt_comm *comm,
                               int64_t request) {
  Call call(ctx, "pfrt_comm_wait");
  PFRT_TRY(checkComm(call, comm));
  return comm->impl->wait(call, request);
}

pfrt_status pfrt_comm_wait_all_cpu(pfrt_context *ctx, pfrt_comm *comm,
                                   const int64_t *requests, int32_t count) {
  Call call(ctx, "pfrt_comm_wait_all");
  PFRT_TRY(checkComm(call, comm));
  if (count < 0)
    return call.fail(PFRT_INVALID_ARGUMENT, "negative request count %d",
                     count);
  if (count > 0)
    PFRT_TRY(call.pointer("requests", requests));
  // The first failure's message is the one kept; later waits still run so
  // that no transfer is left behind.
  pfrt_status first = PFRT_OK;
  char firstMessage[sizeof(ctx->lastError)] = {0};
  for (int32_t i = 0; i < count; ++i) {
    pfrt_status s = comm->impl->wait(call, requests[i]);
    if (s != PFRT_OK && first == PFRT_OK) {
      first = s;
      std::memcpy(firstMessage, ctx->lastError, sizeof firstMessage);
    }
  }
  if (first != PFRT_OK)
    std::memcpy(ctx->lastError, firstMessage, sizeof firstMessage);
  return first;
}

pfrt_status pfrt_comm_all_reduce_sum_cpu(pfrt_context *ctx, pfrt_comm *comm,
                                         const pfrt_tensor *inout) {
  Call call(ctx, "pfrt_comm_all_reduce_sum");
  PFRT_TRY(checkComm(call, comm));
  PFRT_TRY(call.tensor("inout", inout));
  PFRT_TRY(call.dtypeIn("inout", inout,
                        {PFRT_F32, PFRT_F64, PFRT_I32, PFRT_I64}));
  return comm->impl->allReduceSum(call, *inout);
}

pfrt_status pfrt_comm_barrier_cpu(pfrt_context *ctx, pfrt_comm *comm) {
  Call call(ctx, "pfrt_comm_barrier");
  PFRT_TRY(checkComm(call, comm));
  return comm->impl->barrier(call);
}

pfrt_status pfrt_comm_wall_time_cpu(pfrt_context *ctx, pfrt_comm *comm,
                                    double *seconds) {
  Call call(ctx, "pfrt_comm_wall_time");
  PFRT_TRY(checkComm(call, comm));
  PFRT_TRY(call.pointer("seconds", seconds));
  *seconds = comm->impl->wallTime();
  return PFRT_OK;
}

pfrt_status pfrt_comm_local_rank(pfrt_context *ctx, pfrt_comm *comm, int32_t *local_rank,
                                 int32_t *local_size) {
  Call call(ctx, "pfrt_comm_local_rank");
  PFRT_TRY(checkComm(call, comm));
  PFRT_TRY(call.pointer("local_rank", local_rank));
  PFRT_TRY(call.pointer("local_size", local_size));
  // Every rank's host, one slot each (one non-zero term per slot: exact).
  const int32_t n = comm->impl->size(), me = comm->impl->rank();
  std::vector<int64_t> hosts(static_cast<size_t>(n), 0);
  hosts[static_cast<size_t>(me)] = pfrt::comm::hostNameHash();
  pfrt_tensor t{};
  t.data = hosts.data();
  t.dtype = PFRT_I64;
  t.rank = 1;
  t.shape[0] = n;
  PFRT_TRY(comm->impl->allReduceSum(call, t));
  *local_rank = 0;
  *local_size = 0;
  for (int32_t r = 0; r < n; ++r)
    if (hosts[static_cast<size_t>(r)] == hosts[static_cast<size_t>(me)]) {
      *local_rank += r < me;
      ++*local_size;
    }
  return PFRT_OK;
}

pfrt_status pfrt_comm_align_clock(pfrt_context *ctx, pfrt_comm *comm) {
  Call call(ctx, "pfrt_comm_align_clock");
  PFRT_TRY(checkComm(call, comm));
  return comm->impl->alignClock(call);
}

pfrt_status pfrt_comm_abort_cpu(pfrt_context *ctx, pfrt_comm *comm, int32_t code) {
  Call call(ctx, "pfrt_comm_abort");
  PFRT_TRY(checkComm(call, comm));
  comm->impl->abort(code);
  return call.fail(PFRT_INTERNAL, "the %s abort returned",
                   backendName(comm->impl->backend()));
}

pfrt_status pfrt_comm_finalize(pfrt_context *ctx) {
  Call call(ctx, "pfrt_comm_finalize");
  PFRT_TRY(call.begin());
#ifdef PFRT_HAVE_MPI
  return finalizeMpi(call);
#else
  return PFRT_OK;
#endif
}

} // extern "C"
