//===- Comm.cpp - The pfrt_comm_* entry points -----------------------------===//
//
// Validates every argument (so no backend sees a bad peer, tag or
// descriptor), then forwards to the Communicator. Blocking send and receive
// are the non-blocking calls followed by their wait.
//
//===----------------------------------------------------------------------===//

#include "Communicator.h"
#include "StagedCommunicator.h"

#include "../common/Dtype.h"
#include "../common/Shape.h"

#ifdef PFRT_HAVE_MPI
#include "MpiCommunicator.h"
#endif
#ifdef PFRT_HAVE_NCCL
#include "NcclCommunicator.h"
#endif

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
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


//===--- Row-sparse transfers ----------------------------------------------===//

/// The rows of x (slices of its first dimension; a tensor of rank 0 or 1 is
/// one row) and their bytes each.
struct RowLayout {
  int64_t rows = 0, rowBytes = 0;
  static RowLayout of(const pfrt_tensor &x) {
    RowLayout l;
    const int64_t bytes = Shape::of(x).numel() * dtypeSize(x.dtype);
    l.rows = x.rank <= 1 ? 1 : x.shape[0];
    l.rowBytes = l.rows == 0 ? 0 : bytes / l.rows;
    return l;
  }
};

bool allZeroBits(const char *p, int64_t n) {
  uint64_t bits = 0;
  int64_t i = 0;
  for (; i + int64_t(sizeof bits) <= n; i += sizeof bits) {
    uint64_t word;
    std::memcpy(&word, p + i, sizeof word);
    bits |= word;
  }
  for (; i < n; ++i)
    bits |= uint8_t(p[i]);
  return bits == 0;
}

/// Fails `call` with `what` and the message of the nested call that failed
/// on its context (copied first: the failure rewrites that message).
pfrt_status nestedFailure(const Call &call, pfrt_status code, const char *what) {
  const std::string nested = pfrt_last_error(call.context());
  return call.fail(code, "%s: %s", what, nested.c_str());
}

/// x's bytes readable on the host: its own on the CPU backend, else a copy
/// into `staged`.
pfrt_status hostBytes(const Call &call, const pfrt_tensor &x, std::vector<char> &staged,
                      const char *&bytes) {
  pfrt_context *ctx = call.context();
  if (ctx->backend == PFRT_BACKEND_CPU) {
    bytes = static_cast<const char *>(x.data);
    return PFRT_OK;
  }
  staged.resize(size_t(Shape::of(x).numel() * dtypeSize(x.dtype)));
  if (pfrt_copy_to_host(ctx, &x, staged.data()) != PFRT_OK)
    return nestedFailure(call, PFRT_INTERNAL, "reading the tensor");
  bytes = staged.data();
  return PFRT_OK;
}

/// A message buffer of the context's memory holding `bytes` of `host`,
/// described as i64[count] or i8[count].
pfrt_status messageBuffer(const Call &call, const void *host, int64_t bytes, int32_t dtype,
                          void *&buffer, pfrt_tensor &t) {
  pfrt_context *ctx = call.context();
  if (pfrt_alloc(ctx, std::max<int64_t>(bytes, 1), &buffer) != PFRT_OK)
    return nestedFailure(call, PFRT_OUT_OF_MEMORY, "allocating a message buffer");
  t = pfrt_tensor{};
  t.data = buffer;
  t.dtype = dtype;
  t.rank = 1;
  t.shape[0] = bytes / dtypeSize(dtype);
  if (host && bytes > 0 && pfrt_copy_from_host(ctx, host, &t) != PFRT_OK)
    return nestedFailure(call, PFRT_INTERNAL, "filling a message buffer");
  return PFRT_OK;
}

pfrt_status checkRows(const Call &call, const char *name, const pfrt_tensor *x) {
  PFRT_TRY(call.tensor(name, x));
  return call.dtypeIn(name, x, {PFRT_F32, PFRT_F64});
}

/// out = x + the received rows, one addition per element (+0.0 where no row
/// came), on host bytes.
template <typename T>
void addRows(const T *x, T *out, const int64_t *indices, const T *rows, int64_t count,
             int64_t rowCount, int64_t rowElements) {
  int64_t next = 0;
  for (int64_t row = 0; row < rowCount; ++row) {
    const T *a = x + row * rowElements;
    T *o = out + row * rowElements;
    if (next < count && indices[next] == row) {
      const T *b = rows + next * rowElements;
      for (int64_t i = 0; i < rowElements; ++i)
        o[i] = a[i] + b[i];
      ++next;
    } else {
      for (int64_t i = 0; i < rowElements; ++i)
        o[i] = a[i] + T(0);
    }
  }
}

/// Completes `request`, and with it a posted row-sparse send's payload and
/// buffers.
pfrt_status waitOne(const Call &call, pfrt_comm *comm, int64_t request) {
  pfrt_status status = comm->impl->wait(call, request);
  auto it = comm->rowsSends.find(request);
  if (it == comm->rowsSends.end())
    return status;
  pfrt_comm::RowsSend send = it->second;
  comm->rowsSends.erase(it);
  if (send.payload) {
    pfrt_status payload = comm->impl->wait(call, send.payload);
    if (status == PFRT_OK)
      status = payload;
  }
  pfrt_free(send.ctx, send.header);
  pfrt_free(send.ctx, send.rows);
  return status;
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

pfrt_comm::~pfrt_comm() {
  // The communicator first (it ends the pending transfers), then the buffers
  // its posted row sends read.
  impl.reset();
  for (auto &[request, send] : rowsSends) {
    pfrt_free(send.ctx, send.header);
    pfrt_free(send.ctx, send.rows);
  }
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
  return waitOne(call, comm, request);
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
    pfrt_status s = waitOne(call, comm, requests[i]);
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

pfrt_status pfrt_comm_broadcast_cpu(pfrt_context *ctx, pfrt_comm *comm,
                                    const pfrt_tensor *t, int32_t root) {
  Call call(ctx, "pfrt_comm_broadcast");
  PFRT_TRY(checkComm(call, comm));
  PFRT_TRY(call.tensor("t", t));
  if (root < 0 || root >= comm->impl->size())
    return call.fail(PFRT_INVALID_ARGUMENT, "root %d is not a rank of the "
                     "communicator (%d ranks)", root, comm->impl->size());
  return comm->impl->broadcast(call, *t, root);
}

pfrt_status pfrt_comm_isend_rows_cpu(pfrt_context *ctx, pfrt_comm *comm, const pfrt_tensor *x,
                                     int32_t peer, int32_t tag, int64_t *request) {
  Call call(ctx, "pfrt_comm_isend_rows");
  PFRT_TRY(checkTransfer(call, comm, x, peer, tag));
  PFRT_TRY(checkRows(call, "x", x));
  PFRT_TRY(call.pointer("request", request));
  *request = 0;
  std::vector<char> staged;
  const char *bytes = nullptr;
  PFRT_TRY(hostBytes(call, *x, staged, bytes));
  const RowLayout layout = RowLayout::of(*x);
  // The payload: the row indices (i64), then the rows.
  std::vector<int64_t> indices;
  for (int64_t row = 0; row < layout.rows; ++row)
    if (!allZeroBits(bytes + row * layout.rowBytes, layout.rowBytes))
      indices.push_back(row);
  const int64_t count = int64_t(indices.size());
  const int64_t payloadBytes = count * (int64_t(sizeof(int64_t)) + layout.rowBytes);
  pfrt_comm::RowsSend send;
  send.ctx = ctx;
  const int64_t header[2] = {count, layout.rowBytes};
  pfrt_tensor headerTensor, rowsTensor;
  auto release = [&] {
    pfrt_free(ctx, send.header);
    pfrt_free(ctx, send.rows);
  };
  pfrt_status status = messageBuffer(call, header, sizeof header, PFRT_I64, send.header,
                                     headerTensor);
  if (status == PFRT_OK && count > 0) {
    // The indices, then the rows: packed straight into the message on the
    // CPU backend, else on the host and copied over.
    status = messageBuffer(call, nullptr, payloadBytes, PFRT_I8, send.rows, rowsTensor);
    const bool onHost = ctx->backend == PFRT_BACKEND_CPU;
    std::vector<char> staging(onHost ? 0 : size_t(payloadBytes));
    char *payload = onHost ? static_cast<char *>(send.rows) : staging.data();
    if (status == PFRT_OK) {
      std::memcpy(payload, indices.data(), indices.size() * sizeof(int64_t));
      char *rowsAt = payload + indices.size() * sizeof(int64_t);
      for (int64_t i = 0; i < count; ++i)
        std::memcpy(rowsAt + i * layout.rowBytes, bytes + indices[size_t(i)] * layout.rowBytes,
                    size_t(layout.rowBytes));
      if (!onHost && pfrt_copy_from_host(ctx, payload, &rowsTensor) != PFRT_OK)
        status = nestedFailure(call, PFRT_INTERNAL, "filling a message buffer");
    }
  }
  int64_t headerRequest = 0;
  if (status == PFRT_OK)
    status = comm->impl->isend(call, headerTensor, peer, tag, headerRequest);
  if (status == PFRT_OK && count > 0) {
    status = comm->impl->isend(call, rowsTensor, peer, tag, send.payload);
    if (status != PFRT_OK)
      comm->impl->wait(call, headerRequest);
  }
  if (status != PFRT_OK) {
    release();
    return status;
  }
  comm->rowsSends.emplace(headerRequest, send);
  *request = headerRequest;
  return PFRT_OK;
}

pfrt_status pfrt_comm_recv_add_rows_cpu(pfrt_context *ctx, pfrt_comm *comm,
                                        const pfrt_tensor *x, const pfrt_tensor *out,
                                        int32_t peer, int32_t tag) {
  Call call(ctx, "pfrt_comm_recv_add_rows");
  PFRT_TRY(checkTransfer(call, comm, x, peer, tag));
  PFRT_TRY(checkRows(call, "x", x));
  PFRT_TRY(checkRows(call, "out", out));
  if (out->dtype != x->dtype || !(Shape::of(*out) == Shape::of(*x)))
    return call.fail(PFRT_INVALID_ARGUMENT, "out is %s%s but x is %s%s", dtypeName(out->dtype),
                     ShapeStr(Shape::of(*out)).c_str(), dtypeName(x->dtype),
                     ShapeStr(Shape::of(*x)).c_str());
  const RowLayout layout = RowLayout::of(*x);
  // The header: the number of rows and their bytes.
  struct Buffer {
    pfrt_context *ctx;
    void *p = nullptr;
    ~Buffer() { pfrt_free(ctx, p); }
  } headerBuffer{ctx}, rowsBuffer{ctx};
  int64_t header[2] = {0, 0};
  pfrt_tensor headerTensor, rowsTensor;
  PFRT_TRY(messageBuffer(call, header, sizeof header, PFRT_I64, headerBuffer.p, headerTensor));
  int64_t request = 0;
  PFRT_TRY(comm->impl->irecv(call, headerTensor, peer, tag, request));
  PFRT_TRY(comm->impl->wait(call, request));
  if (pfrt_copy_to_host(ctx, &headerTensor, header) != PFRT_OK)
    return nestedFailure(call, PFRT_INTERNAL, "reading the header");
  const int64_t count = header[0];
  if (header[1] != layout.rowBytes || count < 0 || count > layout.rows)
    return call.fail(PFRT_INVALID_ARGUMENT, "rank %d sends %lld rows of %lld bytes; this rank "
                     "(%d) adds rows of %lld bytes to a tensor of %lld rows", peer,
                     static_cast<long long>(count), static_cast<long long>(header[1]),
                     comm->impl->rank(), static_cast<long long>(layout.rowBytes),
                     static_cast<long long>(layout.rows));
  // The indices, then the rows: read in the message on the CPU backend,
  // else from a host copy.
  const bool onHost = ctx->backend == PFRT_BACKEND_CPU;
  const int64_t payloadBytes = count * (int64_t(sizeof(int64_t)) + layout.rowBytes);
  std::vector<char> staging(onHost ? 0 : size_t(payloadBytes));
  const char *payload = staging.data();
  if (count > 0) {
    PFRT_TRY(messageBuffer(call, nullptr, payloadBytes, PFRT_I8, rowsBuffer.p, rowsTensor));
    PFRT_TRY(comm->impl->irecv(call, rowsTensor, peer, tag, request));
    PFRT_TRY(comm->impl->wait(call, request));
    if (onHost)
      payload = static_cast<const char *>(rowsBuffer.p);
    else if (pfrt_copy_to_host(ctx, &rowsTensor, staging.data()) != PFRT_OK)
      return nestedFailure(call, PFRT_INTERNAL, "reading the rows");
  }
  const int64_t *indices = reinterpret_cast<const int64_t *>(payload);
  for (int64_t i = 0; i < count; ++i)
    if (indices[i] < 0 || indices[i] >= layout.rows || (i > 0 && indices[i] <= indices[i - 1]))
      return call.fail(PFRT_INVALID_ARGUMENT, "rank %d sends row index %lld (at %lld), not "
                       "ascending within [0, %lld)", peer, static_cast<long long>(indices[i]),
                       static_cast<long long>(i), static_cast<long long>(layout.rows));
  const char *rows = payload + count * int64_t(sizeof(int64_t));
  // On the CPU backend x and out are host memory; else through host copies.
  std::vector<char> stagedX;
  const char *xBytes = nullptr;
  PFRT_TRY(hostBytes(call, *x, stagedX, xBytes));
  std::vector<char> stagedOut(onHost ? 0 : stagedX.size());
  char *outBytes = onHost ? static_cast<char *>(out->data) : stagedOut.data();
  const int64_t rowElements = layout.rowBytes / dtypeSize(x->dtype);
  if (x->dtype == PFRT_F32)
    addRows(reinterpret_cast<const float *>(xBytes), reinterpret_cast<float *>(outBytes),
            indices, reinterpret_cast<const float *>(rows), count, layout.rows,
            rowElements);
  else
    addRows(reinterpret_cast<const double *>(xBytes), reinterpret_cast<double *>(outBytes),
            indices, reinterpret_cast<const double *>(rows), count, layout.rows,
            rowElements);
  if (!onHost && pfrt_copy_from_host(ctx, outBytes, out) != PFRT_OK)
    return nestedFailure(call, PFRT_INTERNAL, "writing out");
  return PFRT_OK;
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
