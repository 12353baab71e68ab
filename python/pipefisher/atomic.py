"""Write a file so that a failed write never replaces a good one.

The data goes to a temporary file in the target's folder, which is renamed
over the target only after everything was written and flushed to disk. The
rename is atomic on POSIX file systems: readers (and a user whose run was
interrupted) see the old file or the new one, never part of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator


def _umask() -> int:
    # os.umask both sets and returns it; mkstemp creates files 0600, but the
    # result should get the permissions an ordinary open() would give.
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO]:
    """Yields an open temporary file beside `path`; renamed over `path` when
    the block ends normally, removed when it raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        encoding = None if "b" in mode else "utf-8"
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
