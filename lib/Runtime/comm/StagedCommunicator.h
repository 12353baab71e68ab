//===- StagedCommunicator.h - MPI through host buffers -----------*- C++ -*-===//
//
// A Communicator for tensors in backend memory that the library underneath
// cannot read (CUDA device memory and an MPI without CUDA support): every
// tensor goes through a host buffer the communicator owns, copied with the
// call's context (pfrt_copy_to_host before a send and an all-reduce,
// pfrt_copy_from_host after a receive completes and after an all-reduce).
// Backend-neutral: on a CPU context the copies are memcpys, which is how the
// CPU runs this path in its tests (PFRT_COMM_MPI_STAGED, pf-train
// --device-buffers).
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMM_STAGEDCOMMUNICATOR_H
#define PF_RUNTIME_COMM_STAGEDCOMMUNICATOR_H

#include "Communicator.h"

namespace pfrt {
namespace comm {

/// Wraps `inner` (a communicator of host memory: MPI); takes ownership.
std::unique_ptr<Communicator> stageThroughHost(std::unique_ptr<Communicator> inner);

} // namespace comm
} // namespace pfrt

#endif // PF_RUNTIME_COMM_STAGEDCOMMUNICATOR_H
