//===- StopSignals.h - SIGINT/SIGTERM as a stop request ----------*- C++ -*-===//
//
// pf-train stops after the current step when it gets SIGINT or SIGTERM. A
// signal handler must not run on a compute thread: oneDNN's JIT GEMM
// kernels (Debian 12's libdnnl 2.7; fixed upstream in oneDNN PR #4855)
// point the stack pointer into the heap while they run, so the kernel
// writes the handler's signal frame over heap memory and the process later
// aborts in free() ("corrupted size vs. prev_size"). So the signals are
// blocked in every thread and one watcher thread takes them with sigwait.
// C++ standard library and POSIX only (PFSupport): the trainer links no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef PF_SUPPORT_STOPSIGNALS_H
#define PF_SUPPORT_STOPSIGNALS_H

namespace mlir::pf::driver {

/// Blocks SIGINT and SIGTERM in the calling thread (so in every thread it
/// creates afterwards) and starts the watcher thread. Call it first in
/// main, before any library starts threads. Until catchStopSignals() the
/// watcher ends the process as the signal's default action would, after
/// `beforeDefaultAction` when given (a tool that links LLVM passes
/// llvm::sys::RunInterruptHandlers, which removes partly written output
/// files). Child processes inherit the blocked mask; the tools start none.
void routeStopSignals(void (*beforeDefaultAction)() = nullptr);

/// From now on a SIGINT or SIGTERM is recorded (stopRequested()) instead of
/// ending the process.
void catchStopSignals();

/// Whether a SIGINT or SIGTERM arrived since catchStopSignals().
bool stopRequested();

/// The last such signal (SIGINT or SIGTERM), or 0.
int stopSignal();

} // namespace mlir::pf::driver

#endif // PF_SUPPORT_STOPSIGNALS_H
