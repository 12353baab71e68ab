//===- MpiCommunicator.cpp - Communicator on MPI ---------------------------===//
//
// Every communicator owns three duplicates of one MPI group, so that the
// runtime's own traffic never matches the caller's:
//   data     tensor payloads and collectives;
//   meta     a small header before each payload (dtype and shape), which
//            lets the receiver name both descriptions on a mismatch and keeps
//            the stream aligned afterwards (the payload is still consumed);
//   control  clock alignment and the agreement check of all-reduce.
// All three use MPI_ERRORS_RETURN: a failing MPI call becomes a status with
// MPI's error string instead of ending the process.
//
//===----------------------------------------------------------------------===//

#include "MpiCommunicator.h"

#include "../common/Dtype.h"
#include "../common/Shape.h"

// The C API only: without these, mpi.h also declares the deprecated C++
// bindings, whose symbols live in another library (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

namespace pfrt {
namespace comm {
namespace {

/// Ping-pongs per rank when aligning the clock; the shortest round trip
/// gives the offset.
constexpr int kClockRounds = 8;
constexpr int kClockTag = 1;

/// Records "<what>: <MPI's error string>" as an INTERNAL failure.
pfrt_status mpiFail(const Call &call, int code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
pfrt_status mpiFail(const Call &call, int code, const char *format, ...) {
  char what[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(what, sizeof what, format, args);
  va_end(args);
  char error[MPI_MAX_ERROR_STRING] = "unknown MPI error";
  int length = 0;
  MPI_Error_string(code, error, &length);
  return call.fail(PFRT_INTERNAL, "%s failed: %s", what, error);
}

//===--- Process-wide initialization ------------------------------------===//

std::mutex initMutex;
/// Whether this library called MPI_Init (then it also finalizes).
bool startedMpi = false;

/// Finalizes a one-rank job only. With more ranks MPI_Finalize waits for
/// every rank, so a rank leaving early (an error, a return from main)
/// would hang while another waits for its message; skipping it makes
/// mpirun see an abnormal exit and end the whole job instead. A run that
/// finishes normally calls pfrt_comm_finalize.
void finalizeAtExit() {
  int finalized = 0, size = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size == 1)
    MPI_Finalize();
}

/// MPI_Init on the first communicator only, so that processes creating
/// none never start MPI (nor need mpirun).
pfrt_status ensureInitialized(const Call &call) {
  std::lock_guard<std::mutex> lock(initMutex);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    return call.fail(PFRT_INTERNAL, "MPI was already finalized in this "
                     "process and cannot be initialized again");
  if (initialized)
    return PFRT_OK; // the host's own MPI_Init; it also finalizes
  int provided = 0;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "MPI_Init_thread");
  startedMpi = true;
  std::atexit(finalizeAtExit);
  // Ours now, so ours to configure: MPI_Comm_dup reports its errors here.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return PFRT_OK;
}

//===--- Tensor headers ---------------------------------------------------===//

/// What a sender announces before its payload.
struct TensorHeader {
  int32_t dtype = 0;
  int32_t rank = 0;
  int64_t shape[PFRT_MAX_RANK] = {};

  static TensorHeader of(const pfrt_tensor &t) {
    TensorHeader h;
    h.dtype = t.dtype;
    h.rank = t.rank;
    for (int32_t i = 0; i < t.rank; ++i)
      h.shape[i] = t.shape[i];
    return h;
  }
  bool wellFormed() const {
    if (!isKnownDtype(dtype) || rank < 0 || rank > PFRT_MAX_RANK)
      return false;
    for (int32_t i = 0; i < rank; ++i)
      if (shape[i] < 0)
        return false;
    return true;
  }
  bool operator==(const TensorHeader &o) const {
    return std::memcmp(this, &o, sizeof o) == 0;
  }
  Shape toShape() const {
    Shape s;
    for (int32_t i = 0; i < rank; ++i)
      s.push(shape[i]);
    return s;
  }
  int64_t bytes() const { return toShape().numel() * dtypeSize(dtype); }
};

/// "f32[4, 8] (128 bytes)"; `text` holds at least 256 characters.
const char *describe(const TensorHeader &h, char *text, size_t size) {
  if (!h.wellFormed()) {
    std::snprintf(text, size, "a malformed header (dtype code %d, rank %d)",
                  h.dtype, h.rank);
    return text;
  }
  std::snprintf(text, size, "%s%s (%lld bytes)", dtypeName(h.dtype),
                ShapeStr(h.toShape()).c_str(),
                static_cast<long long>(h.bytes()));
  return text;
}

int64_t tensorBytes(const pfrt_tensor &t) {
  return Shape::of(t).numel() * dtypeSize(t.dtype);
}

MPI_Datatype arithmeticType(int32_t dtype) {
  switch (dtype) {
  case PFRT_F64:
    return MPI_DOUBLE;
  case PFRT_I64:
    return MPI_INT64_T;
  case PFRT_I32:
    return MPI_INT32_T;
  default:
    return MPI_FLOAT;
  }
}

//===--- The communicator -------------------------------------------------===//

/// One isend or irecv: its two MPI requests (header, payload) and what the
/// messages say on failure.
struct Pending {
  bool isSend = false;
  int32_t peer = 0;
  int32_t tag = 0;
  TensorHeader local;  // sent, or expected
  TensorHeader remote; // received header (receives only)
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

class MpiCommunicator final : public Communicator {
public:
  /// Takes ownership of `data` (a communicator of the group) and builds the
  /// meta and control duplicates.
  static pfrt_status create(const Call &call, MPI_Comm data, double skew,
                            double clockOffset,
                            std::unique_ptr<Communicator> &out);
  ~MpiCommunicator() override;

  Backend backend() const override { return Backend::Mpi; }
  int32_t rank() const override { return myRank; }
  int32_t size() const override { return numRanks; }
  int32_t maxTag() const override { return tagUpperBound; }

  pfrt_status isend(const Call &call, const pfrt_tensor &t, int32_t peer,
                    int32_t tag, int64_t &request) override;
  pfrt_status irecv(const Call &call, const pfrt_tensor &t, int32_t peer,
                    int32_t tag, int64_t &request) override;
  pfrt_status wait(const Call &call, int64_t request) override;
  pfrt_status allReduceSum(const Call &call, const pfrt_tensor &inout) override;
  pfrt_status broadcast(const Call &call, const pfrt_tensor &t,
                        int32_t root) override;
  pfrt_status barrier(const Call &call) override;
  double wallTime() const override { return localTime() + clockOffset; }
  pfrt_status alignClock(const Call &call) override;
  pfrt_status createGroup(const Call &call, const std::vector<int32_t> &ranks,
                          std::unique_ptr<Communicator> &out) override;
  void abort(int32_t code) override { MPI_Abort(data, code); }

private:
  MpiCommunicator() = default;

  /// The payload byte count as an MPI count, or UNSUPPORTED past INT_MAX.
  pfrt_status payloadCount(const Call &call, const pfrt_tensor &t,
                           int &count) const;
  /// Stores `p` under a new request id.
  void track(std::unique_ptr<Pending> p, int64_t &request);
  pfrt_status checkAgreement(const Call &call, const pfrt_tensor &t);

  MPI_Comm data = MPI_COMM_NULL;
  MPI_Comm meta = MPI_COMM_NULL;
  MPI_Comm control = MPI_COMM_NULL;
  int32_t myRank = 0;
  int32_t numRanks = 1;
  int32_t tagUpperBound = 32767;
  /// This rank's own clock: MPI_Wtime (Open MPI counts it from the end of
  /// MPI_Init) plus the test skew.
  double localTime() const { return MPI_Wtime() + skew; }

  /// Added to localTime() to read rank 0's clock.
  double clockOffset = 0;
  /// PFRT_COMM_CLOCK_SKEW: seconds added to this process's clock, to test
  /// the alignment as if the ranks ran on machines whose clocks differ.
  double skew = 0;
  std::unordered_map<int64_t, std::unique_ptr<Pending>> pending;
  int64_t nextRequest = 1;
};

pfrt_status MpiCommunicator::create(const Call &call, MPI_Comm data,
                                    double skew, double clockOffset,
                                    std::unique_ptr<Communicator> &out) {
  std::unique_ptr<MpiCommunicator> comm(new (std::nothrow) MpiCommunicator());
  if (!comm) {
    MPI_Comm_free(&data);
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate a communicator");
  }
  comm->data = data;
  comm->skew = skew;
  comm->clockOffset = clockOffset;
  int rc = MPI_Comm_set_errhandler(data, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "MPI_Comm_set_errhandler");
  if ((rc = MPI_Comm_dup(data, &comm->meta)) != MPI_SUCCESS ||
      (rc = MPI_Comm_dup(data, &comm->control)) != MPI_SUCCESS)
    return mpiFail(call, rc, "MPI_Comm_dup");
  int rank = 0, size = 0;
  MPI_Comm_rank(data, &rank);
  MPI_Comm_size(data, &size);
  comm->myRank = rank;
  comm->numRanks = size;
  int *upperBound = nullptr;
  int found = 0;
  MPI_Comm_get_attr(data, MPI_TAG_UB, &upperBound, &found);
  if (found && upperBound)
    comm->tagUpperBound = *upperBound;
  out = std::move(comm);
  return PFRT_OK;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  for (auto &entry : pending) {
    Pending &p = *entry.second;
    for (MPI_Request &r : p.requests) {
      if (r == MPI_REQUEST_NULL)
        continue;
      if (p.isSend) {
        MPI_Request_free(&r);
        continue;
      }
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  }
  for (MPI_Comm *c : {&control, &meta, &data})
    if (*c != MPI_COMM_NULL)
      MPI_Comm_free(c);
}

pfrt_status MpiCommunicator::payloadCount(const Call &call,
                                          const pfrt_tensor &t,
                                          int &count) const {
  int64_t bytes = tensorBytes(t);
  if (bytes > INT_MAX)
    return call.fail(PFRT_UNSUPPORTED, "a tensor of %lld bytes is larger "
                     "than one MPI message of this implementation (%d bytes)",
                     static_cast<long long>(bytes), INT_MAX);
  count = static_cast<int>(bytes);
  return PFRT_OK;
}

void MpiCommunicator::track(std::unique_ptr<Pending> p, int64_t &request) {
  request = nextRequest++;
  pending.emplace(request, std::move(p));
}

pfrt_status MpiCommunicator::isend(const Call &call, const pfrt_tensor &t,
                                   int32_t peer, int32_t tag,
                                   int64_t &request) {
  int count = 0;
  PFRT_TRY(payloadCount(call, t, count));
  std::unique_ptr<Pending> p(new (std::nothrow) Pending());
  if (!p)
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate a request");
  p->isSend = true;
  p->peer = peer;
  p->tag = tag;
  p->local = TensorHeader::of(t);
  int rc = MPI_Isend(&p->local, sizeof(TensorHeader), MPI_BYTE, peer, tag,
                     meta, &p->requests[0]);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "sending a header to rank %d with tag %d", peer,
                   tag);
  rc = MPI_Isend(t.data, count, MPI_BYTE, peer, tag, data, &p->requests[1]);
  if (rc != MPI_SUCCESS) {
    MPI_Request_free(&p->requests[0]);
    return mpiFail(call, rc, "sending %d bytes to rank %d with tag %d", count,
                   peer, tag);
  }
  track(std::move(p), request);
  return PFRT_OK;
}

pfrt_status MpiCommunicator::irecv(const Call &call, const pfrt_tensor &t,
                                   int32_t peer, int32_t tag,
                                   int64_t &request) {
  int count = 0;
  PFRT_TRY(payloadCount(call, t, count));
  std::unique_ptr<Pending> p(new (std::nothrow) Pending());
  if (!p)
    return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate a request");
  p->peer = peer;
  p->tag = tag;
  p->local = TensorHeader::of(t);
  int rc = MPI_Irecv(&p->remote, sizeof(TensorHeader), MPI_BYTE, peer, tag,
                     meta, &p->requests[0]);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "receiving a header from rank %d with tag %d",
                   peer, tag);
  // A larger payload than expected is truncated to `count` bytes by MPI
  // (MPI_ERR_TRUNCATE), never written past the buffer.
  rc = MPI_Irecv(t.data, count, MPI_BYTE, peer, tag, data, &p->requests[1]);
  if (rc != MPI_SUCCESS) {
    MPI_Cancel(&p->requests[0]);
    MPI_Wait(&p->requests[0], MPI_STATUS_IGNORE);
    return mpiFail(call, rc, "receiving %d bytes from rank %d with tag %d",
                   count, peer, tag);
  }
  track(std::move(p), request);
  return PFRT_OK;
}

pfrt_status MpiCommunicator::wait(const Call &call, int64_t request) {
  auto it = pending.find(request);
  if (it == pending.end())
    return call.fail(PFRT_INVALID_ARGUMENT, "request %lld is not pending on "
                     "this communicator (unknown, or already waited for)",
                     static_cast<long long>(request));
  std::unique_ptr<Pending> p = std::move(it->second);
  pending.erase(it);
  // One MPI_Wait each rather than MPI_Waitall: after a failure Waitall may
  // leave the other request pending (MPI_ERR_PENDING), and a pending header
  // receive would take the next message's header.
  int headerCode = MPI_Wait(&p->requests[0], MPI_STATUS_IGNORE);
  int payloadCode = MPI_Wait(&p->requests[1], MPI_STATUS_IGNORE);
  const char *direction = p->isSend ? "sending to" : "receiving from";
  if (headerCode != MPI_SUCCESS)
    return mpiFail(call, headerCode, "%s rank %d with tag %d (header)",
                   direction, p->peer, p->tag);
  if (!p->isSend && !(p->remote == p->local)) {
    char sent[256], expected[256];
    return call.fail(PFRT_INVALID_ARGUMENT, "rank %d sent %s with tag %d; "
                     "this rank (%d) expects %s", p->peer,
                     describe(p->remote, sent, sizeof sent), p->tag, myRank,
                     describe(p->local, expected, sizeof expected));
  }
  if (payloadCode != MPI_SUCCESS)
    return mpiFail(call, payloadCode, "%s rank %d with tag %d", direction,
                   p->peer, p->tag);
  return PFRT_OK;
}

/// One tiny all-reduce of (count, dtype) before the real one, so that ranks
/// that disagree all fail instead of corrupting memory or hanging.
pfrt_status MpiCommunicator::checkAgreement(const Call &call,
                                            const pfrt_tensor &t) {
  int64_t count = Shape::of(t).numel();
  int64_t bounds[4] = {count, -count, t.dtype, -t.dtype};
  int rc = MPI_Allreduce(MPI_IN_PLACE, bounds, 4, MPI_INT64_T, MPI_MAX,
                         control);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "MPI_Allreduce (agreement check)");
  if (bounds[0] == -bounds[1] && bounds[2] == -bounds[3])
    return PFRT_OK;
  return call.fail(PFRT_INVALID_ARGUMENT, "the ranks disagree on the tensor: "
                   "this rank (%d) has %s%s (%lld elements); over the group "
                   "the element counts range from %lld to %lld and the dtypes "
                   "from %s to %s", myRank, dtypeName(t.dtype),
                   ShapeStr(Shape::of(t)).c_str(),
                   static_cast<long long>(count),
                   static_cast<long long>(-bounds[1]),
                   static_cast<long long>(bounds[0]),
                   dtypeName(static_cast<int32_t>(-bounds[3])),
                   dtypeName(static_cast<int32_t>(bounds[2])));
}

pfrt_status MpiCommunicator::allReduceSum(const Call &call,
                                          const pfrt_tensor &inout) {
  int64_t count = Shape::of(inout).numel();
  if (count > INT_MAX)
    return call.fail(PFRT_UNSUPPORTED, "%lld elements are more than one MPI "
                     "all-reduce of this implementation takes (%d)",
                     static_cast<long long>(count), INT_MAX);
  PFRT_TRY(checkAgreement(call, inout));
  if (count == 0)
    return PFRT_OK; // every rank has none (checked)
  int rc = MPI_Allreduce(MPI_IN_PLACE, inout.data, static_cast<int>(count),
                         arithmeticType(inout.dtype), MPI_SUM, data);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "MPI_Allreduce of %lld %s elements",
                   static_cast<long long>(count), dtypeName(inout.dtype));
  return PFRT_OK;
}

pfrt_status MpiCommunicator::broadcast(const Call &call, const pfrt_tensor &t,
                                       int32_t root) {
  int count = 0;
  PFRT_TRY(payloadCount(call, t, count));
  PFRT_TRY(checkAgreement(call, t));
  if (count == 0)
    return PFRT_OK; // every rank has none (checked)
  int rc = MPI_Bcast(t.data, count, MPI_BYTE, root, data);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "MPI_Bcast of %d bytes from rank %d", count,
                   root);
  return PFRT_OK;
}

pfrt_status MpiCommunicator::barrier(const Call &call) {
  int rc = MPI_Barrier(data);
  return rc == MPI_SUCCESS ? PFRT_OK : mpiFail(call, rc, "MPI_Barrier");
}

/// Cristian's algorithm against rank 0, rank by rank: the offset is rank 0's
/// reading minus the midpoint of the round trip with the shortest time.
/// Rank 0 answers with its aligned time (its own offset is 0 on the job's
/// communicator, inherited on a group's), so a group re-aligned this way
/// stays on the job's timeline.
pfrt_status MpiCommunicator::alignClock(const Call &call) {
  int rc = MPI_SUCCESS;
  if (myRank == 0) {
    for (int32_t peer = 1; peer < numRanks && rc == MPI_SUCCESS; ++peer)
      for (int k = 0; k < kClockRounds && rc == MPI_SUCCESS; ++k) {
        double ping = 0;
        rc = MPI_Recv(&ping, 1, MPI_DOUBLE, peer, kClockTag, control,
                      MPI_STATUS_IGNORE);
        double now = wallTime();
        if (rc == MPI_SUCCESS)
          rc = MPI_Send(&now, 1, MPI_DOUBLE, peer, kClockTag, control);
      }
  } else {
    double bestRoundTrip = 1e300, offset = 0;
    for (int k = 0; k < kClockRounds && rc == MPI_SUCCESS; ++k) {
      double sent = localTime(), rootTime = 0;
      rc = MPI_Send(&sent, 1, MPI_DOUBLE, 0, kClockTag, control);
      if (rc == MPI_SUCCESS)
        rc = MPI_Recv(&rootTime, 1, MPI_DOUBLE, 0, kClockTag, control,
                      MPI_STATUS_IGNORE);
      double received = localTime();
      if (rc == MPI_SUCCESS && received - sent < bestRoundTrip) {
        bestRoundTrip = received - sent;
        offset = rootTime - 0.5 * (sent + received);
      }
    }
    if (rc == MPI_SUCCESS)
      clockOffset = offset;
  }
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "aligning the clock with rank 0");
  rc = MPI_Barrier(control);
  return rc == MPI_SUCCESS ? PFRT_OK : mpiFail(call, rc, "MPI_Barrier");
}

pfrt_status MpiCommunicator::createGroup(const Call &call,
                                         const std::vector<int32_t> &ranks,
                                         std::unique_ptr<Communicator> &out) {
  MPI_Group parentGroup = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  int rc = MPI_Comm_group(data, &parentGroup);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "MPI_Comm_group");
  static_assert(sizeof(int32_t) == sizeof(int), "MPI ranks are int");
  rc = MPI_Group_incl(parentGroup, static_cast<int>(ranks.size()),
                      reinterpret_cast<const int *>(ranks.data()), &group);
  MPI_Group_free(&parentGroup);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "MPI_Group_incl");
  MPI_Comm sub = MPI_COMM_NULL;
  rc = MPI_Comm_create_group(data, group, /*tag=*/0, &sub);
  MPI_Group_free(&group);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "MPI_Comm_create_group");
  // The parent's offset keeps every communicator on one timeline.
  return create(call, sub, skew, clockOffset, out);
}

} // namespace

pfrt_status createMpiWorld(const Call &call,
                           std::unique_ptr<Communicator> &out) {
  PFRT_TRY(ensureInitialized(call));
  MPI_Comm world = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &world);
  if (rc != MPI_SUCCESS)
    return mpiFail(call, rc, "MPI_Comm_dup of MPI_COMM_WORLD");
  std::unique_ptr<Communicator> comm;
  const char *skew = std::getenv("PFRT_COMM_CLOCK_SKEW");
  PFRT_TRY(MpiCommunicator::create(call, world, skew ? std::atof(skew) : 0.0,
                                   0, comm));
  PFRT_TRY(comm->alignClock(call));
  out = std::move(comm);
  return PFRT_OK;
}

pfrt_status finalizeMpi(const Call &call) {
  std::lock_guard<std::mutex> lock(initMutex);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!startedMpi || finalized)
    return PFRT_OK;
  int rc = MPI_Finalize();
  return rc == MPI_SUCCESS ? PFRT_OK : mpiFail(call, rc, "MPI_Finalize");
}

} // namespace comm
} // namespace pfrt
