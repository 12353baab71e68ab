//===- StagedCommunicator.cpp - MPI through host buffers -------------------===//
//
// Each request owns its host buffer until wait(): a send's holds the bytes
// copied out at isend (the copy waits for the context's stream, so kernels
// that wrote the tensor have finished); a receive's is filled by the inner
// communicator and copied into the tensor when wait() completes it. Only
// the entry points' checks run before: shapes, dtypes and peers are the
// inner communicator's to compare, so its messages stay the same.
//
//===----------------------------------------------------------------------===//

#include "StagedCommunicator.h"

#include "../common/Dtype.h"
#include "../common/Shape.h"

#include <cstring>
#include <new>
#include <string>
#include <unordered_map>

namespace pfrt {
namespace comm {
namespace {

int64_t tensorBytes(const pfrt_tensor &t) { return Shape::of(t).numel() * dtypeSize(t.dtype); }

/// `t` with its data in `host`.
pfrt_tensor onHost(const pfrt_tensor &t, std::vector<char> &host) {
  pfrt_tensor staged = t;
  staged.data = host.empty() ? nullptr : host.data();
  return staged;
}

/// The copy's own message ("pfrt_copy_to_host: ...") under the call's name.
pfrt_status copyFailed(const Call &call, pfrt_status status, const char *direction, int64_t bytes) {
  std::string reason = call.context()->lastError;
  return call.fail(status, "staging %lld bytes through host memory (%s) failed: %s",
                   static_cast<long long>(bytes), direction, reason.c_str());
}

pfrt_status copyOut(const Call &call, const pfrt_tensor &t, std::vector<char> &host) {
  int64_t bytes = tensorBytes(t);
  if (bytes == 0)
    return PFRT_OK;
  pfrt_status s = pfrt_copy_to_host(call.context(), &t, host.data());
  return s == PFRT_OK ? PFRT_OK : copyFailed(call, s, "backend to host", bytes);
}

pfrt_status copyIn(const Call &call, const std::vector<char> &host, const pfrt_tensor &t) {
  int64_t bytes = tensorBytes(t);
  if (bytes == 0)
    return PFRT_OK;
  pfrt_status s = pfrt_copy_from_host(call.context(), host.data(), &t);
  return s == PFRT_OK ? PFRT_OK : copyFailed(call, s, "host to backend", bytes);
}

/// One staged transfer: the inner request and the host buffer it reads or
/// writes; for a receive, the tensor that wait() fills.
struct Staged {
  int64_t inner = 0;
  bool isRecv = false;
  pfrt_tensor target{};
  std::vector<char> host;
};

class StagedCommunicator final : public Communicator {
public:
  explicit StagedCommunicator(std::unique_ptr<Communicator> inner) : inner(std::move(inner)) {}

  Backend backend() const override { return Backend::MpiStaged; }
  int32_t rank() const override { return inner->rank(); }
  int32_t size() const override { return inner->size(); }
  int32_t maxTag() const override { return inner->maxTag(); }

  pfrt_status isend(const Call &call, const pfrt_tensor &t, int32_t peer, int32_t tag,
                    int64_t &request) override {
    return post(call, t, peer, tag, /*isRecv=*/false, request);
  }
  pfrt_status irecv(const Call &call, const pfrt_tensor &t, int32_t peer, int32_t tag,
                    int64_t &request) override {
    return post(call, t, peer, tag, /*isRecv=*/true, request);
  }

  pfrt_status wait(const Call &call, int64_t request) override {
    auto it = pending.find(request);
    if (it == pending.end())
      return call.fail(PFRT_INVALID_ARGUMENT,
                       "request %lld is not pending on "
                       "this communicator (unknown, or already waited for)",
                       static_cast<long long>(request));
    std::unique_ptr<Staged> staged = std::move(it->second);
    pending.erase(it);
    PFRT_TRY(inner->wait(call, staged->inner));
    return staged->isRecv ? copyIn(call, staged->host, staged->target) : PFRT_OK;
  }

  pfrt_status allReduceSum(const Call &call, const pfrt_tensor &inout) override {
    std::vector<char> host;
    PFRT_TRY(allocate(call, inout, host));
    PFRT_TRY(copyOut(call, inout, host));
    PFRT_TRY(inner->allReduceSum(call, onHost(inout, host)));
    return copyIn(call, host, inout);
  }

  pfrt_status broadcast(const Call &call, const pfrt_tensor &t, int32_t root) override {
    std::vector<char> host;
    PFRT_TRY(allocate(call, t, host));
    const bool isRoot = inner->rank() == root;
    if (isRoot)
      PFRT_TRY(copyOut(call, t, host));
    PFRT_TRY(inner->broadcast(call, onHost(t, host), root));
    return isRoot ? PFRT_OK : copyIn(call, host, t);
  }

  pfrt_status barrier(const Call &call) override { return inner->barrier(call); }
  double wallTime() const override { return inner->wallTime(); }
  pfrt_status alignClock(const Call &call) override { return inner->alignClock(call); }

  pfrt_status createGroup(const Call &call, const std::vector<int32_t> &ranks,
                          std::unique_ptr<Communicator> &out) override {
    std::unique_ptr<Communicator> group;
    PFRT_TRY(inner->createGroup(call, ranks, group));
    out = stageThroughHost(std::move(group));
    return PFRT_OK;
  }

  void abort(int32_t code) override { inner->abort(code); }

private:
  pfrt_status allocate(const Call &call, const pfrt_tensor &t, std::vector<char> &host) {
    try {
      host.resize(static_cast<size_t>(tensorBytes(t)));
    } catch (const std::bad_alloc &) {
      return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate a host buffer of %lld bytes",
                       static_cast<long long>(tensorBytes(t)));
    }
    return PFRT_OK;
  }

  pfrt_status post(const Call &call, const pfrt_tensor &t, int32_t peer, int32_t tag, bool isRecv,
                   int64_t &request) {
    std::unique_ptr<Staged> staged(new (std::nothrow) Staged());
    if (!staged)
      return call.fail(PFRT_OUT_OF_MEMORY, "cannot allocate a request");
    staged->isRecv = isRecv;
    staged->target = t;
    PFRT_TRY(allocate(call, t, staged->host));
    if (!isRecv)
      PFRT_TRY(copyOut(call, t, staged->host));
    pfrt_tensor host = onHost(t, staged->host);
    PFRT_TRY(isRecv ? inner->irecv(call, host, peer, tag, staged->inner)
                    : inner->isend(call, host, peer, tag, staged->inner));
    request = nextRequest++;
    pending.emplace(request, std::move(staged));
    return PFRT_OK;
  }

  /// The host buffers move with their Staged (a vector's storage stays put),
  /// so the inner requests keep pointing at them. Declared before `inner`,
  /// so `inner` goes first: it cancels or releases its requests while their
  /// buffers still exist.
  std::unordered_map<int64_t, std::unique_ptr<Staged>> pending;
  int64_t nextRequest = 1;
  std::unique_ptr<Communicator> inner;
};

} // namespace

std::unique_ptr<Communicator> stageThroughHost(std::unique_ptr<Communicator> inner) {
  return std::unique_ptr<Communicator>(new StagedCommunicator(std::move(inner)));
}

} // namespace comm
} // namespace pfrt
