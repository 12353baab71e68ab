#!/usr/bin/env python3
"""Runs CommFaultProbe under mpirun and checks how the job ends.

    comm_fault_check.py MODE TIMEOUT MPIRUN_ARGS... PROBE

When rank 1 dies (MODE kill, exit or abort) every other rank must end too:
mpirun must exit non-zero well within TIMEOUT seconds and its output must name
rank 1. MODE none is the control: the same job succeeds. Exits 0 when the
expectation holds and prints why not otherwise.
"""

import re
import subprocess
import sys
import time

# What Open MPI's mpirun prints about the lost rank, per way of dying. The
# exit report names the process as [[job,1],RANK] rather than "rank RANK".
LOST_RANK = {
    "kill": r"process rank 1 with PID \d+ on node \S+ exited on signal 9",
    "exit": r"Process name: \[\[\d+,\d+\],1\]\s+Exit code:\s+3",
    # A rank that aborts says so itself before pfrt_comm_abort; Open MPI 4.1's
    # own "MPI_ABORT was invoked on rank 1 ... errorcode 7" report is lost now
    # and then ("ORTE_ERROR_LOG: Data unpack would read past end of buffer"
    # in show_help.c), so the abort's exit code identifies it instead.
    "abort": r"probe: rank 1 abort",
}
# The exit status mpirun must end with, where the way of dying fixes it.
EXIT_CODE = {"abort": 7}


def main(argv):
    if len(argv) < 4 or argv[1] not in (*LOST_RANK, "none"):
        print(__doc__)
        return 2
    mode, timeout, command = argv[1], float(argv[2]), argv[3:] + [argv[1]]
    start = time.monotonic()
    try:
        run = subprocess.run(command, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired as hung:
        out = hung.stdout or ""
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        print(out)
        print(f"FAIL: mode {mode}: the job still ran after {timeout:.0f} s "
              "(a rank hangs)")
        return 1
    elapsed = time.monotonic() - start
    print(run.stdout)
    print(f"mode {mode}: mpirun exited with {run.returncode} after "
          f"{elapsed:.2f} s")
    problems = []
    if mode == "none":
        if run.returncode != 0:
            problems.append("the control job failed")
        if "probe: rank 0 received 42" not in run.stdout:
            problems.append("rank 0 did not receive rank 1's message")
    else:
        if run.returncode == 0:
            problems.append("mpirun exited with 0")
        for line in ("probe: rank 0 waits for rank 1", f"probe: rank 1 {mode}"):
            if line not in run.stdout:
                problems.append(f"the job did not get to '{line}'")
        if mode in EXIT_CODE and run.returncode != EXIT_CODE[mode]:
            problems.append(f"mpirun exited with {run.returncode}, not "
                            f"{EXIT_CODE[mode]} (the code rank 1 aborted with)")
        if not re.search(LOST_RANK[mode], run.stdout):
            problems.append(f"no line matching '{LOST_RANK[mode]}' names "
                            "the lost rank")
    for problem in problems:
        print(f"FAIL: mode {mode}: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
