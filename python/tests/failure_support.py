"""Failures injected into the writers of the tests (a disk that fills)."""

from __future__ import annotations

import os


def failing_on_call(function, number):
    """`function`, except that its `number`-th call raises ENOSPC, naming
    the file it was given (as the os functions do), if any."""
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(args)
        if len(calls) == number:
            name = args[0] if args and isinstance(args[0], (str, os.PathLike)) else None
            raise OSError(28, "No space left on device", name)
        return function(*args, **kwargs)
    return wrapped
