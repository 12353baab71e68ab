"""Failures injected into the writers of the tests (a disk that fills)."""

from __future__ import annotations


def failing_on_call(function, number):
    """`function`, except that its `number`-th call raises ENOSPC."""
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(args)
        if len(calls) == number:
            raise OSError(28, "No space left on device")
        return function(*args, **kwargs)
    return wrapped
