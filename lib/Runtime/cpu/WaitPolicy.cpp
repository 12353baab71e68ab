//===- WaitPolicy.cpp - OpenMP threads that sleep at barriers -------------===//
//
// Linked into the executables that run kernels (pf-run, pf-train, the
// runtime's unit tests), not into libpfrt, as an entry of the executable's
// .preinit_array: the loader calls it before the constructor of any shared
// library, libgomp's included.
//
// Why: libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, in its
// constructor. By default a worker that reaches a barrier spins up to
// 300000 times before sleeping. On cores shared with other busy processes
// (ranks of a pipeline on one machine, a CI runner, a laptop) the spinning
// worker holds its time slice while the thread it waits for is descheduled,
// so every barrier can cost a slice. With OMP_WAIT_POLICY=passive the
// workers sleep at once (a futex wake-up, microseconds, per parallel region).
//
// How: setenv cannot be used this early. environ is still NULL, and glibc's
// own initializer, which runs after this entry, resets it to the block the
// kernel passed, so a variable added here never reaches libgomp. Instead the
// process re-executes itself (/proc/self/exe, same argv) with the variable
// appended to that block. Nothing has run yet — no library constructor, no
// thread, no MPI_Init — so the new image starts exactly as the first would
// have; the cost is one more dynamic load of the executable (a few ms).
//
// A user who sets OMP_WAIT_POLICY or GOMP_SPINCOUNT (to any value) gets
// exactly that, and no re-execution. If /proc/self/exe cannot be executed
// the process just continues with libgomp's default.
//
//===----------------------------------------------------------------------===//

#include <alloca.h>
#include <cstddef>
#include <unistd.h>

namespace {

/// Whether `entry` ("NAME=value") defines `name` (given with its '=').
/// Hand-written: this runs before the C library is initialized.
bool defines(const char *entry, const char *name) {
  for (; *name; ++entry, ++name)
    if (*entry != *name)
      return false;
  return true;
}

/// Whether the running image is the dynamic loader itself (the program was
/// started as `ld-linux-x86-64.so.2 PROGRAM ...`): re-executing it with the
/// program's argv would not start the program.
bool startedThroughLoader() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0)
    return true; // no /proc: cannot re-execute anyway
  path[n] = '\0';
  const char *base = path;
  for (const char *p = path; *p; ++p)
    if (*p == '/')
      base = p + 1;
  return defines(base, "ld-");
}

/// The .preinit_array entry: re-executes with OMP_WAIT_POLICY=passive unless
/// the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT.
void passiveOpenMPUnlessSet(int, char **argv, char **envp) {
  size_t count = 0;
  for (; envp && envp[count]; ++count)
    if (defines(envp[count], "OMP_WAIT_POLICY=") ||
        defines(envp[count], "GOMP_SPINCOUNT="))
      return;
  if (!argv || count > (1u << 16) || startedThroughLoader())
    return;
  auto **env = static_cast<char **>(alloca((count + 2) * sizeof(char *)));
  for (size_t i = 0; i < count; ++i)
    env[i] = envp[i];
  static char passive[] = "OMP_WAIT_POLICY=passive";
  env[count] = passive;
  env[count + 1] = nullptr;
  execve("/proc/self/exe", argv, env);
  // Only reached if execve failed: carry on with libgomp's default policy.
}

} // namespace

// `used`: nothing references the entry; the section is what the loader reads.
__attribute__((section(".preinit_array"), used)) static void (
    *pfPassiveOpenMP)(int, char **, char **) = passiveOpenMPUnlessSet;
