//===- Communicator.h - The runtime's communication interface ---*- C++ -*-===//
//
// What the pfrt_comm_* entry points (Comm.cpp) call: one abstract group of
// ranks, implemented on MPI (MpiCommunicator.cpp), on MPI through host
// buffers (StagedCommunicator.cpp: tensors in backend memory MPI cannot
// read) and on NCCL (NcclCommunicator.cpp, CUDA builds with NCCL). The
// entry points validate every argument first (descriptors, peers, tags,
// dtypes), so an implementation only moves data and reports failures of the
// library underneath through the Call, whose messages then name the C
// function ("pfrt_comm_recv: ...").
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMM_COMMUNICATOR_H
#define PF_RUNTIME_COMM_COMMUNICATOR_H

#include "../common/Call.h"

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace pfrt {
namespace comm {

/// The library that moves the bytes; the values are pfrt.h's PFRT_COMM_*.
enum class Backend : int32_t {
  Mpi = PFRT_COMM_MPI,
  Nccl = PFRT_COMM_NCCL,
  MpiStaged = PFRT_COMM_MPI_STAGED
};

const char *backendName(Backend backend);

class Communicator {
public:
  virtual ~Communicator() = default;

  virtual Backend backend() const = 0;
  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;
  virtual int32_t maxTag() const = 0;

  /// Start a transfer with `peer` (not this rank) and store a request id
  /// (> 0) in `request`. `t`'s buffer must stay valid until wait(). Tensors
  /// are memory of the call's context (host on the CPU, device on CUDA).
  virtual pfrt_status isend(const Call &call, const pfrt_tensor &t,
                            int32_t peer, int32_t tag, int64_t &request) = 0;
  virtual pfrt_status irecv(const Call &call, const pfrt_tensor &t,
                            int32_t peer, int32_t tag, int64_t &request) = 0;
  /// Completes and forgets `request`; a receive of another dtype or shape
  /// than its descriptor's is INVALID_ARGUMENT.
  virtual pfrt_status wait(const Call &call, int64_t request) = 0;

  /// In place over the group; the dtype is f32, f64, i32 or i64.
  virtual pfrt_status allReduceSum(const Call &call,
                                   const pfrt_tensor &inout) = 0;
  /// `t` = `root`'s `t` on every rank, in place (any dtype; root checked).
  virtual pfrt_status broadcast(const Call &call, const pfrt_tensor &t,
                                int32_t root) = 0;
  virtual pfrt_status barrier(const Call &call) = 0;

  /// Seconds on this rank's clock, shifted to read rank 0's time.
  virtual double wallTime() const = 0;
  virtual pfrt_status alignClock(const Call &call) = 0;

  /// The group of `ranks` (distinct, in range, including this rank: the
  /// entry point checked), collective over those ranks.
  virtual pfrt_status createGroup(const Call &call,
                                  const std::vector<int32_t> &ranks,
                                  std::unique_ptr<Communicator> &out) = 0;

  /// Ends every rank of the job; does not return.
  virtual void abort(int32_t code) = 0;
};

/// The communicator of every rank of the job on `backend`, for tensors of
/// the call's context (MPI on a CUDA context: staged); UNSUPPORTED, with the
/// reason, when that backend is not built into this library or cannot run
/// here (NCCL without a CUDA context).
pfrt_status createWorld(const Call &call, Backend backend,
                        std::unique_ptr<Communicator> &out);

/// FNV-1a of this machine's name, below 2^62 so that sums of one non-zero
/// term per rank stay exact: which ranks share a host (pfrt_comm_local_rank,
/// NCCL's one-GPU-per-rank check).
int64_t hostNameHash();

} // namespace comm
} // namespace pfrt

/// The opaque handle of pfrt.h.
struct pfrt_comm {
  std::unique_ptr<pfrt::comm::Communicator> impl;
  /// Posted row-sparse sends (pfrt_comm_isend_rows) by the request the
  /// caller holds (the header's): the payload's request and the messages'
  /// buffers, released when the caller waits for it.
  struct RowsSend {
    pfrt_context *ctx = nullptr;
    int64_t payload = 0; // 0: no rows, no payload message
    void *header = nullptr, *rows = nullptr;
  };
  std::unordered_map<int64_t, RowsSend> rowsSends;
  ~pfrt_comm();
};

#endif // PF_RUNTIME_COMM_COMMUNICATOR_H
