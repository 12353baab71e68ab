"""What the pipelined-training tests compare: progress lines as printed and
checkpoints bit for bit."""

from __future__ import annotations

import os
import re
import signal
import subprocess

import numpy as np
import pytest


def losses(stdout):
    """(step, loss, lr) of every progress line, as printed."""
    return re.findall(r"^step\s+(\d+)\s+loss\s+(\S+)\s+lr\s+(\S+)", stdout, re.M)


def load_npz(path):
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def assert_same_checkpoint(got, want):
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape, key
        assert np.array_equal(got[key], want[key]), key


def run_job(cmd, timeout=180, check=True, env=None):
    """Runs `cmd` (an mpirun job, or one process) in its own session, so that
    on a timeout mpirun and its ranks end together; a timeout fails the test
    as a hang."""
    proc = subprocess.Popen([str(a) for a in cmd], text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"timed out after {timeout} s (a hang?): {' '.join(map(str, cmd))}")
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{out}\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
