//===- NcclCommunicator.h - The NCCL implementation of Communicator -*- C++ -*-===//
//
// Built when the CUDA backend, NCCL's header and library and MPI are all
// found (PFRT_HAVE_NCCL); NCCL itself is loaded at run time (NcclLibrary.h).
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMM_NCCLCOMMUNICATOR_H
#define PF_RUNTIME_COMM_NCCLCOMMUNICATOR_H

#include "Communicator.h"

namespace pfrt {
namespace comm {

/// Every rank of the job on NCCL, on the GPU of the call's CUDA context:
/// starts MPI (createMpiWorld), checks that no two ranks of a host share a
/// GPU, broadcasts rank 0's ncclUniqueIds and creates the communicators.
/// UNSUPPORTED, with the reason, on a context that is not CUDA (this is
/// also what a machine without a GPU gets, since it has no CUDA context) or
/// when libnccl cannot be loaded.
pfrt_status createNcclWorld(const Call &call, std::unique_ptr<Communicator> &out);

} // namespace comm
} // namespace pfrt

#endif // PF_RUNTIME_COMM_NCCLCOMMUNICATOR_H
