//===- MpiCommunicator.h - The MPI implementation of Communicator -*- C++ -*-===//
//
// Only this header's implementation includes mpi.h; it is compiled when CMake
// finds MPI (PFRT_HAVE_MPI).
//
//===----------------------------------------------------------------------===//

#ifndef PF_RUNTIME_COMM_MPICOMMUNICATOR_H
#define PF_RUNTIME_COMM_MPICOMMUNICATOR_H

#include "Communicator.h"

namespace pfrt {
namespace comm {

/// Initializes MPI on first use (MPI_Init_thread, MPI_THREAD_SERIALIZED)
/// unless the host already did, then duplicates MPI_COMM_WORLD and aligns
/// the clock.
pfrt_status createMpiWorld(const Call &call, std::unique_ptr<Communicator> &out);

/// MPI_Finalize if createMpiWorld started MPI; otherwise nothing.
pfrt_status finalizeMpi(const Call &call);

} // namespace comm
} // namespace pfrt

#endif // PF_RUNTIME_COMM_MPICOMMUNICATOR_H
