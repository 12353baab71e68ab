"""What the pipelined-training tests compare: progress lines as printed and
checkpoints bit for bit."""

from __future__ import annotations

import re

import numpy as np


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
