//===- NcclCommunicator.cpp - Communicator on NCCL -------------------------===//
//
// Tensors are device memory of the call's CUDA context. The communicator
// owns:
//   control     an MPI communicator of the same ranks: bootstrap (rank 0's
//               ncclUniqueIds, the one-GPU-per-rank check), a small header
//               per transfer, the all-reduce agreement check, barrier,
//               clock, abort and groups;
//   collective  one NCCL communicator of all ranks, on its own stream, for
//               all-reduces (collectives are called in the same order on
//               every rank, as the API requires);
//   links       one two-rank NCCL communicator and stream per direction
//               of every pair (a -> b). ncclSend and ncclRecv block their
//               stream until the peer's matching call runs, so one stream
//               for every transfer could deadlock a pipeline whose ranks
//               both send and receive (rank 0 sends activation 1 while
//               rank 1 sends gradient 0); with a stream per direction,
//               a blocked transfer only holds the transfers behind it on
//               the same link, in the order both ranks posted them.
// A transfer is ordered after the kernels queued on the context's stream
// (an event), and its request is an event on the link's stream: wait()
// synchronizes with it and makes the context's stream wait for it too.
//
// NCCL has no tags: a link's messages match in the order they are issued.
// Each transfer therefore also sends a header over MPI, matched by tag,
// with the sender's sequence number on the link, dtype and shape. A receive
// is issued to NCCL when it is waited for (its header has arrived), after
// the earlier receives posted on its link; a header whose sequence number
// is not the receive's, or whose dtype or shape differ, is a clear error
// (the payload of another size is received into scratch memory, so the
// link stays aligned), never a silent mix-up or a hang.
//
//===----------------------------------------------------------------------===//

#include "NcclCommunicator.h"

#include "../common/Dtype.h"
#include "../common/Shape.h"
#include "../cuda/State.h"
#include "MpiCommunicator.h"
#include "NcclLibrary.h"

#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <new>
#include <string>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace pfrt {
namespace comm {
namespace {

using cuda::check;
using cuda::streamOf;

/// A transfer's header: the sender's sequence number on the link, dtype,
/// rank and shape.
constexpr int kHeaderWords = 3 + PFRT_MAX_RANK;

pfrt_status ncclCheck(const Call &call, ncclResult_t result, const char *what) {
  if (result == ncclSuccess)
    return PFRT_OK;
  return call.fail(PFRT_INTERNAL, "%s: NCCL error: %s", what, nccl().ncclGetErrorString(result));
}

int64_t tensorBytes(const pfrt_tensor &t) { return Shape::of(t).numel() * dtypeSize(t.dtype); }

pfrt_tensor int64Tensor(int64_t *data, int64_t count) {
  pfrt_tensor t{};
  t.data = data;
  t.dtype = PFRT_I64;
  t.rank = 1;
  t.shape[0] = count;
  return t;
}

/// "f32[4, 8] (128 bytes)" of a header.
std::string describe(const int64_t *header) {
  int32_t dtype = static_cast<int32_t>(header[1]);
  int64_t rank = header[2];
  if (!isKnownDtype(dtype) || rank < 0 || rank > PFRT_MAX_RANK)
    return "a malformed header";
  Shape s;
  for (int64_t i = 0; i < rank; ++i)
    s.push(header[3 + i]);
  char text[256];
  std::snprintf(text, sizeof text, "%s%s (%lld bytes)", dtypeName(dtype), ShapeStr(s).c_str(),
                static_cast<long long>(s.numel() * dtypeSize(dtype)));
  return text;
}

void fillHeader(int64_t *header, int64_t seq, const pfrt_tensor &t) {
  std::memset(header, 0, sizeof(int64_t) * kHeaderWords);
  header[0] = seq;
  header[1] = t.dtype;
  header[2] = t.rank;
  for (int32_t i = 0; i < t.rank; ++i)
    header[3 + i] = t.shape[i];
}

ncclDataType_t ncclType(int32_t dtype) {
  switch (dtype) {
  case PFRT_F64:
    return ncclFloat64;
  case PFRT_I64:
    return ncclInt64;
  case PFRT_I32:
    return ncclInt32;
  default:
    return ncclFloat32;
  }
}

/// The text after "pfrt_<fn>: " of a message, to report it again later
/// under another call's name.
std::string withoutFunction(const char *message) {
  const char *colon = std::strstr(message, ": ");
  return colon ? colon + 2 : message;
}

/// One direction of a pair: its two-rank communicator (the sender is rank
/// 0 in it) and stream, and how many transfers were posted on it.
struct Link {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int64_t posted = 0;
};

struct Request {
  bool isSend = false;
  int32_t peer = 0;
  int32_t tag = 0;
  int64_t seq = 0;
  pfrt_tensor tensor{};
  int64_t header[kHeaderWords] = {};
  int64_t headerRequest = 0;
  bool issued = false;
  cudaEvent_t done = nullptr;
  /// A receive that failed while a later one of its link was waited for;
  /// reported at its own wait.
  pfrt_status failure = PFRT_OK;
  std::string failureMessage;
};

class NcclCommunicator final : public Communicator {
public:
  /// Collective over `control`'s ranks; the GPU is the call's context's.
  static pfrt_status create(const Call &call, std::unique_ptr<Communicator> control,
                            std::unique_ptr<Communicator> &out);
  ~NcclCommunicator() override;

  Backend backend() const override { return Backend::Nccl; }
  int32_t rank() const override { return control->rank(); }
  int32_t size() const override { return control->size(); }
  int32_t maxTag() const override { return control->maxTag(); }

  pfrt_status isend(const Call &call, const pfrt_tensor &t, int32_t peer, int32_t tag,
                    int64_t &request) override;
  pfrt_status irecv(const Call &call, const pfrt_tensor &t, int32_t peer, int32_t tag,
                    int64_t &request) override;
  pfrt_status wait(const Call &call, int64_t request) override;
  pfrt_status allReduceSum(const Call &call, const pfrt_tensor &inout) override;
  pfrt_status broadcast(const Call &call, const pfrt_tensor &t, int32_t root) override;
  pfrt_status barrier(const Call &call) override { return control->barrier(call); }
  double wallTime() const override { return control->wallTime(); }
  pfrt_status alignClock(const Call &call) override { return control->alignClock(call); }
  pfrt_status createGroup(const Call &call, const std::vector<int32_t> &ranks,
                          std::unique_ptr<Communicator> &out) override;
  void abort(int32_t code) override { control->abort(code); }

private:
  NcclCommunicator() = default;
  pfrt_status checkOneGpuPerRank(const Call &call);
  pfrt_status checkAgreement(const Call &call, const pfrt_tensor &t);
  pfrt_status collective(const Call &call, const pfrt_tensor &inout, const char *what,
                         const std::function<ncclResult_t()> &launch);
  pfrt_status connect(const Call &call);
  /// The call's context is CUDA, on this communicator's GPU (made current).
  pfrt_status onDevice(const Call &call) const;
  /// Makes `stream` wait for the work queued on the context's stream.
  pfrt_status afterContextWork(const Call &call, cudaStream_t stream);
  /// Records the request's completion on `stream`.
  pfrt_status recordDone(const Call &call, Request &r, cudaStream_t stream);
  /// Waits for `r`'s header and issues its receive (or records why not).
  void issueRecv(const Call &call, Request &r);
  pfrt_status consumeMismatched(const Call &call, Request &r);
  /// Waits for `r` on the host and orders the context's stream after it.
  pfrt_status complete(const Call &call, Request &r);

  std::unique_ptr<Communicator> control;
  int device = 0;
  ncclComm_t collectiveComm = nullptr;
  cudaStream_t collectiveStream = nullptr;
  std::vector<Link> sendLinks, recvLinks;    // by peer
  std::vector<std::deque<int64_t>> unissued; // posted receives by peer, in order
  std::unordered_map<int64_t, std::unique_ptr<Request>> pending;
  int64_t nextRequest = 1;
  cudaEvent_t contextWork = nullptr;
};

pfrt_status NcclCommunicator::create(const Call &call, std::unique_ptr<Communicator> control,
                                     std::unique_ptr<Communicator> &out) {
  std::unique_ptr<NcclCommunicator> comm(new (std::nothrow) NcclCommunicator());
  if (!comm)
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate a communicator");
  comm->control = std::move(control);
  comm->device = call.context()->cuda->device;
  PFRT_TRY(comm->checkOneGpuPerRank(call));
  PFRT_TRY(comm->connect(call));
  out = std::move(comm);
  return PFRT_OK;
}

/// Every rank learns every rank's (host, GPU) and all fail alike when two
/// share one: NCCL refuses it (or hangs), MPI staging does not.
pfrt_status NcclCommunicator::checkOneGpuPerRank(const Call &call) {
  const int32_t n = size(), me = rank();
  std::vector<int64_t> slots(2 * static_cast<size_t>(n), 0);
  slots[2 * me] = hostNameHash();
  slots[2 * me + 1] = device;
  pfrt_tensor t = int64Tensor(slots.data(), 2 * n);
  PFRT_TRY(control->allReduceSum(call, t));
  for (int32_t a = 0; a < n; ++a)
    for (int32_t b = a + 1; b < n; ++b)
      if (slots[2 * a] == slots[2 * b] && slots[2 * a + 1] == slots[2 * b + 1])
        return call.fail(PFRT_UNSUPPORTED,
                         "ranks %d and %d of the communicator both use GPU %lld of one host: "
                         "NCCL needs a GPU of its own for every rank (start at most one rank "
                         "per GPU, each on its own device, or use MPI, which stages tensors "
                         "through host memory)",
                         a, b, static_cast<long long>(slots[2 * a + 1]));
  return PFRT_OK;
}

/// Rank 0's ncclUniqueIds (the collective, then each link a -> b in order)
/// reach every rank in one all-reduce (the others add zeros), with a flag
/// saying that rank 0 could make them; then every rank creates its
/// communicators in one NCCL group, so no creation waits for another.
pfrt_status NcclCommunicator::connect(const Call &call) {
  const int32_t n = size(), me = rank();
  const size_t idWords = NCCL_UNIQUE_ID_BYTES / sizeof(int64_t);
  const size_t ids = 1 + static_cast<size_t>(n) * (n - 1);
  std::vector<int64_t> words(ids * idWords + 1, 0);
  if (me == 0) {
    bool made = true;
    for (size_t i = 0; i < ids && made; ++i) {
      ncclUniqueId id;
      made = nccl().ncclGetUniqueId(&id) == ncclSuccess;
      std::memcpy(&words[i * idWords], &id, sizeof id);
    }
    words.back() = made ? 1 : 0;
  }
  pfrt_tensor t = int64Tensor(words.data(), static_cast<int64_t>(words.size()));
  PFRT_TRY(control->allReduceSum(call, t));
  if (words.back() != 1)
    return call.fail(PFRT_INTERNAL, "rank 0 could not make the NCCL unique ids");
  auto idAt = [&](size_t i) {
    ncclUniqueId id;
    std::memcpy(&id, &words[i * idWords], sizeof id);
    return id;
  };
  PFRT_TRY(check(call, cudaSetDevice(device), "cudaSetDevice"));
  PFRT_TRY(check(call, cudaEventCreateWithFlags(&contextWork, cudaEventDisableTiming),
                 "cudaEventCreate"));
  PFRT_TRY(check(call, cudaStreamCreateWithFlags(&collectiveStream, cudaStreamNonBlocking),
                 "cudaStreamCreate"));
  sendLinks.resize(n);
  recvLinks.resize(n);
  unissued.resize(n);
  for (int32_t peer = 0; peer < n; ++peer) {
    if (peer == me)
      continue;
    PFRT_TRY(check(call, cudaStreamCreateWithFlags(&sendLinks[peer].stream, cudaStreamNonBlocking),
                   "cudaStreamCreate"));
    PFRT_TRY(check(call, cudaStreamCreateWithFlags(&recvLinks[peer].stream, cudaStreamNonBlocking),
                   "cudaStreamCreate"));
  }
  const NcclLibrary &lib = nccl();
  PFRT_TRY(ncclCheck(call, lib.ncclGroupStart(), "ncclGroupStart"));
  ncclResult_t result = lib.ncclCommInitRank(&collectiveComm, n, idAt(0), me);
  size_t link = 1;
  for (int32_t a = 0; a < n; ++a)
    for (int32_t b = 0; b < n; ++b) {
      if (a == b)
        continue;
      if (result == ncclSuccess && me == a)
        result = lib.ncclCommInitRank(&sendLinks[b].comm, 2, idAt(link), 0);
      if (result == ncclSuccess && me == b)
        result = lib.ncclCommInitRank(&recvLinks[a].comm, 2, idAt(link), 1);
      ++link;
    }
  ncclResult_t ended = lib.ncclGroupEnd();
  PFRT_TRY(ncclCheck(call, result, "ncclCommInitRank"));
  return ncclCheck(call, ended, "ncclGroupEnd (creating the communicators)");
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device);
  // A transfer still queued (its peer never matched it) would make
  // ncclCommDestroy wait forever: then the communicators are aborted.
  bool unfinished = false;
  for (auto &entry : pending) {
    Request &r = *entry.second;
    if (r.done && r.issued && cudaEventQuery(r.done) == cudaErrorNotReady)
      unfinished = true;
    if (r.done)
      cudaEventDestroy(r.done);
  }
  cudaGetLastError();
  const NcclLibrary &lib = nccl();
  auto end = [&](ncclComm_t comm) {
    if (comm)
      unfinished ? lib.ncclCommAbort(comm) : lib.ncclCommDestroy(comm);
  };
  for (std::vector<Link> *links : {&sendLinks, &recvLinks})
    for (Link &l : *links) {
      end(l.comm);
      if (l.stream)
        cudaStreamDestroy(l.stream);
    }
  end(collectiveComm);
  if (collectiveStream)
    cudaStreamDestroy(collectiveStream);
  if (contextWork)
    cudaEventDestroy(contextWork);
}

pfrt_status NcclCommunicator::onDevice(const Call &call) const {
  pfrt_context *ctx = call.context();
  if (ctx->backend != PFRT_BACKEND_CUDA || !ctx->cuda)
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "an NCCL communicator moves CUDA device memory; "
                     "this call's context is %s",
                     pfrt_backend_name(ctx));
  if (ctx->cuda->device != device)
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "the NCCL communicator is on GPU %d, this call's "
                     "context on GPU %d",
                     device, ctx->cuda->device);
  return check(call, cudaSetDevice(device), "cudaSetDevice");
}

pfrt_status NcclCommunicator::afterContextWork(const Call &call, cudaStream_t stream) {
  PFRT_TRY(check(call, cudaEventRecord(contextWork, streamOf(call.context())), "cudaEventRecord"));
  return check(call, cudaStreamWaitEvent(stream, contextWork, 0), "cudaStreamWaitEvent");
}

pfrt_status NcclCommunicator::recordDone(const Call &call, Request &r, cudaStream_t stream) {
  if (!r.done)
    PFRT_TRY(
        check(call, cudaEventCreateWithFlags(&r.done, cudaEventDisableTiming), "cudaEventCreate"));
  PFRT_TRY(check(call, cudaEventRecord(r.done, stream), "cudaEventRecord"));
  r.issued = true;
  return PFRT_OK;
}

pfrt_status NcclCommunicator::isend(const Call &call, const pfrt_tensor &t, int32_t peer,
                                    int32_t tag, int64_t &request) {
  PFRT_TRY(onDevice(call));
  std::unique_ptr<Request> r(new (std::nothrow) Request());
  if (!r)
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate a request");
  Link &link = sendLinks[peer];
  r->isSend = true;
  r->peer = peer;
  r->tag = tag;
  r->tensor = t;
  r->seq = link.posted++;
  fillHeader(r->header, r->seq, t);
  pfrt_tensor header = int64Tensor(r->header, kHeaderWords);
  PFRT_TRY(control->isend(call, header, peer, tag, r->headerRequest));
  PFRT_TRY(afterContextWork(call, link.stream));
  if (int64_t bytes = tensorBytes(t))
    PFRT_TRY(ncclCheck(call,
                       nccl().ncclSend(t.data, static_cast<size_t>(bytes), ncclUint8,
                                       /*peer=*/1, link.comm, link.stream),
                       "ncclSend"));
  PFRT_TRY(recordDone(call, *r, link.stream));
  request = nextRequest++;
  pending.emplace(request, std::move(r));
  return PFRT_OK;
}

pfrt_status NcclCommunicator::irecv(const Call &call, const pfrt_tensor &t, int32_t peer,
                                    int32_t tag, int64_t &request) {
  PFRT_TRY(onDevice(call));
  std::unique_ptr<Request> r(new (std::nothrow) Request());
  if (!r)
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate a request");
  r->peer = peer;
  r->tag = tag;
  r->tensor = t;
  r->seq = recvLinks[peer].posted++;
  pfrt_tensor header = int64Tensor(r->header, kHeaderWords);
  PFRT_TRY(control->irecv(call, header, peer, tag, r->headerRequest));
  request = nextRequest++;
  unissued[peer].push_back(request);
  pending.emplace(request, std::move(r));
  return PFRT_OK;
}

/// The sender's payload of another size than expected goes into scratch
/// memory, so that the link's next message is received where it belongs.
pfrt_status NcclCommunicator::consumeMismatched(const Call &call, Request &r) {
  Shape sent;
  for (int64_t i = 0; i < r.header[2]; ++i)
    sent.push(r.header[3 + i]);
  int64_t bytes = sent.numel() * dtypeSize(static_cast<int32_t>(r.header[1]));
  if (bytes == 0)
    return PFRT_OK;
  Link &link = recvLinks[r.peer];
  void *scratch = nullptr;
  PFRT_TRY(check(call, cudaMalloc(&scratch, static_cast<size_t>(bytes)), "cudaMalloc"));
  pfrt_status s = ncclCheck(call,
                            nccl().ncclRecv(scratch, static_cast<size_t>(bytes), ncclUint8,
                                            /*peer=*/0, link.comm, link.stream),
                            "ncclRecv");
  if (s == PFRT_OK)
    s = check(call, cudaStreamSynchronize(link.stream), "cudaStreamSynchronize");
  cudaFree(scratch);
  return s;
}

void NcclCommunicator::issueRecv(const Call &call, Request &r) {
  auto failWith = [&](pfrt_status status) {
    r.failure = status;
    r.failureMessage = withoutFunction(call.context()->lastError);
    r.issued = false;
  };
  pfrt_status s = control->wait(call, r.headerRequest);
  r.headerRequest = 0;
  if (s != PFRT_OK)
    return failWith(s);
  if (r.header[0] != r.seq)
    return failWith(call.fail(
        PFRT_INVALID_ARGUMENT,
        "rank %d's message with tag %d is its message #%lld to this rank (%d), but this receive "
        "was posted as #%lld from it: NCCL matches a pair's messages in the order they are "
        "sent, not by tag (post the receives from one rank in the order it sends)",
        r.peer, r.tag, static_cast<long long>(r.header[0]), rank(), static_cast<long long>(r.seq)));
  int64_t expected[kHeaderWords];
  fillHeader(expected, r.seq, r.tensor);
  if (std::memcmp(expected, r.header, sizeof expected) != 0) {
    pfrt_status consumed = consumeMismatched(call, r);
    if (consumed != PFRT_OK)
      return failWith(consumed);
    return failWith(
        call.fail(PFRT_INVALID_ARGUMENT, "rank %d sent %s with tag %d; this rank (%d) expects %s",
                  r.peer, describe(r.header).c_str(), r.tag, rank(), describe(expected).c_str()));
  }
  Link &link = recvLinks[r.peer];
  // The buffer may still be read by kernels queued before the receive.
  if ((s = afterContextWork(call, link.stream)) != PFRT_OK)
    return failWith(s);
  if (int64_t bytes = tensorBytes(r.tensor))
    if ((s = ncclCheck(call,
                       nccl().ncclRecv(r.tensor.data, static_cast<size_t>(bytes), ncclUint8,
                                       /*peer=*/0, link.comm, link.stream),
                       "ncclRecv")) != PFRT_OK)
      return failWith(s);
  if ((s = recordDone(call, r, link.stream)) != PFRT_OK)
    failWith(s);
}

pfrt_status NcclCommunicator::complete(const Call &call, Request &r) {
  if (r.failure != PFRT_OK)
    return call.fail(r.failure, "%s", r.failureMessage.c_str());
  if (r.isSend && r.headerRequest)
    PFRT_TRY(control->wait(call, r.headerRequest));
  PFRT_TRY(check(call, cudaEventSynchronize(r.done), "cudaEventSynchronize (NCCL transfer)"));
  return check(call, cudaStreamWaitEvent(streamOf(call.context()), r.done, 0),
               "cudaStreamWaitEvent");
}

pfrt_status NcclCommunicator::wait(const Call &call, int64_t request) {
  auto it = pending.find(request);
  if (it == pending.end())
    return call.fail(PFRT_INVALID_ARGUMENT,
                     "request %lld is not pending on "
                     "this communicator (unknown, or already waited for)",
                     static_cast<long long>(request));
  PFRT_TRY(onDevice(call));
  Request &r = *it->second;
  if (!r.isSend) {
    // This link's receives are issued in the order they were posted.
    std::deque<int64_t> &queue = unissued[r.peer];
    while (!r.issued && r.failure == PFRT_OK && !queue.empty()) {
      int64_t next = queue.front();
      queue.pop_front();
      issueRecv(call, *pending.at(next));
    }
  }
  pfrt_status status = complete(call, r);
  if (r.done)
    cudaEventDestroy(r.done);
  pending.erase(request);
  return status;
}

/// The MPI communicator's agreement check: ranks that disagree on the count
/// or dtype all fail (MPI's message), instead of NCCL hanging.
pfrt_status NcclCommunicator::checkAgreement(const Call &call, const pfrt_tensor &inout) {
  int64_t count = Shape::of(inout).numel();
  int64_t bounds[4] = {count, -count, inout.dtype, -inout.dtype};
  std::vector<int64_t> slots(4 * static_cast<size_t>(size()), 0);
  for (int k = 0; k < 4; ++k)
    slots[4 * rank() + k] = bounds[k];
  pfrt_tensor agreement = int64Tensor(slots.data(), static_cast<int64_t>(slots.size()));
  PFRT_TRY(control->allReduceSum(call, agreement));
  for (int32_t r = 0; r < size(); ++r)
    if (slots[4 * r] != count || slots[4 * r + 2] != inout.dtype)
      return call.fail(PFRT_INVALID_ARGUMENT,
                       "the ranks disagree on the tensor: this rank (%d) "
                       "has %s%s (%lld elements), rank %d has %lld %s elements",
                       rank(), dtypeName(inout.dtype), ShapeStr(Shape::of(inout)).c_str(),
                       static_cast<long long>(count), r, static_cast<long long>(slots[4 * r]),
                       dtypeName(static_cast<int32_t>(slots[4 * r + 2])));
  return PFRT_OK;
}

/// A collective on `inout` over the group: the ranks' agreement on it, then
/// `launch` on the collective stream after the context's work, waited for.
pfrt_status NcclCommunicator::collective(const Call &call, const pfrt_tensor &inout,
                                         const char *what,
                                         const std::function<ncclResult_t()> &launch) {
  PFRT_TRY(onDevice(call));
  PFRT_TRY(checkAgreement(call, inout));
  if (Shape::of(inout).numel() == 0)
    return PFRT_OK;
  PFRT_TRY(afterContextWork(call, collectiveStream));
  PFRT_TRY(ncclCheck(call, launch(), what));
  Request r;
  PFRT_TRY(recordDone(call, r, collectiveStream));
  pfrt_status status = complete(call, r);
  cudaEventDestroy(r.done);
  return status;
}

pfrt_status NcclCommunicator::allReduceSum(const Call &call, const pfrt_tensor &inout) {
  return collective(call, inout, "ncclAllReduce", [&] {
    return nccl().ncclAllReduce(inout.data, inout.data,
                                static_cast<size_t>(Shape::of(inout).numel()),
                                ncclType(inout.dtype), ncclSum, collectiveComm, collectiveStream);
  });
}

pfrt_status NcclCommunicator::broadcast(const Call &call, const pfrt_tensor &inout, int32_t root) {
  return collective(call, inout, "ncclBroadcast", [&] {
    return nccl().ncclBroadcast(inout.data, inout.data, static_cast<size_t>(tensorBytes(inout)),
                                ncclUint8, root, collectiveComm, collectiveStream);
  });
}

pfrt_status NcclCommunicator::createGroup(const Call &call, const std::vector<int32_t> &ranks,
                                          std::unique_ptr<Communicator> &out) {
  PFRT_TRY(onDevice(call));
  std::unique_ptr<Communicator> groupControl;
  PFRT_TRY(control->createGroup(call, ranks, groupControl));
  return create(call, std::move(groupControl), out);
}

} // namespace

pfrt_status createNcclWorld(const Call &call, std::unique_ptr<Communicator> &out) {
  pfrt_context *ctx = call.context();
  if (ctx->backend != PFRT_BACKEND_CUDA || !ctx->cuda) {
    char noGpu[256] = "";
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      cudaGetLastError();
      std::snprintf(noGpu, sizeof noGpu,
                    "; this machine has no usable CUDA device "
                    "(cudaGetDeviceCount: %s)",
                    cudaGetErrorString(err));
    } else if (count == 0) {
      std::snprintf(noGpu, sizeof noGpu, "; this machine has no CUDA device");
    }
    return call.fail(PFRT_UNSUPPORTED,
                     "NCCL moves CUDA device memory: create the communicator "
                     "on a CUDA context (this one is %s)%s",
                     pfrt_backend_name(ctx), noGpu);
  }
  char why[512] = "";
  if (!loadNccl(why, sizeof why))
    return call.fail(PFRT_UNSUPPORTED, "%s", why);
  std::unique_ptr<Communicator> control;
  PFRT_TRY(createMpiWorld(call, control));
  return NcclCommunicator::create(call, std::move(control), out);
}

} // namespace comm
} // namespace pfrt
