//===- NcclLibrary.h - NCCL, loaded on first use -----------------*- C++ -*-===//
//
// libpfrt does not link NCCL: the toolkit's libnccl.so.2 is 218 MB, most
// processes never create an NCCL communicator, and a static copy would make
// every library and bundle that large. It is dlopen'ed by the first
// pfrt_comm_create with PFRT_COMM_NCCL (by soname, then from the toolkit's
// directory found at configure time), and called through the table below,
// whose entries have nccl.h's exact types.
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMM_NCCLLIBRARY_H
#define PF_RUNTIME_COMM_NCCLLIBRARY_H

#include <nccl.h>

#include <cstddef>

// Every NCCL function the communicator calls.
#define PFRT_NCCL_FUNCTIONS(X)                                                                     \
  X(ncclGetVersion)                                                                                \
  X(ncclGetErrorString)                                                                            \
  X(ncclGetUniqueId)                                                                               \
  X(ncclCommInitRank)                                                                              \
  X(ncclCommDestroy)                                                                               \
  X(ncclCommAbort)                                                                                 \
  X(ncclGroupStart)                                                                                \
  X(ncclGroupEnd)                                                                                  \
  X(ncclSend)                                                                                      \
  X(ncclRecv)                                                                                      \
  X(ncclAllReduce)                                                                                 \
  X(ncclBroadcast)

namespace pfrt::comm {

struct NcclLibrary {
#define PFRT_NCCL_SLOT(name) decltype(&::name) name = nullptr;
  PFRT_NCCL_FUNCTIONS(PFRT_NCCL_SLOT)
#undef PFRT_NCCL_SLOT
};

/// Loads NCCL once per process (thread-safe). False, with the reason in
/// `why`, when the library or one of its functions is missing.
bool loadNccl(char *why, size_t size);

/// The loaded functions; only valid after loadNccl returned true.
const NcclLibrary &nccl();

} // namespace pfrt::comm

#endif // PF_RUNTIME_COMM_NCCLLIBRARY_H
