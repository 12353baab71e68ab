"""Write files so that a failed write never replaces a good one.

The data goes to a temporary file in the target's folder, which is renamed
over the target only after everything was written and flushed to disk. The
rename is atomic on POSIX file systems: readers (and a user whose run was
interrupted) see the old file or the new one, never part of one.

A set of files that belong together (a corpus and its vocabulary, a model
and its external data) is written the same way, all of it before any
rename (atomic_write_set, replace_together). Decision, the simplest design
that keeps the old set whole when anything fails:

  * every file of the set is written to its temporary name and flushed to
    disk first; a failure there (a full disk, an exception, Ctrl-C) removes
    the temporaries and renames nothing, so the old set stays as it was;
  * then the temporaries are renamed over their targets, the file that
    refers to the others (the corpus .npz, the model) LAST; before each
    rename the old target is kept under a hard link, and if a rename fails
    (or Ctrl-C arrives between two), the targets already replaced get their
    old files back, so the old set is again whole;
  * what is left is a crash of the machine or SIGKILL in the microseconds
    between two renames: a reader then finds the new partner files beside
    the OLD referring file (a new OUT.vocab.txt beside the old corpus, a new
    OUT.data beside the old model, which then reads wrong weights or fails
    on a length check). Rerunning the command repairs it. A manifest or a
    digest in the referring file would close that window too; the renames'
    order and the rollback were judged enough for tools that are rerun.
    (On a file system without hard links the old target cannot be kept,
    and a failed rename leaves the targets replaced before it.)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator, Sequence


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


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_together(moves: Sequence[tuple[Path, Path]]) -> None:
    """Renames each written temporary file over its target, in the order
    given (the file that refers to the others last), after flushing all of
    them to disk; a failed rename puts back the targets replaced before it
    (see the module's docstring). The temporaries must be beside their
    targets (one file system)."""
    for temporary, _ in moves:
        _fsync(temporary)
    # (target, a hard link to its old file, whether it existed) per rename begun
    replaced: list[tuple[Path, Path | None, bool]] = []
    try:
        for temporary, target in moves:
            existed, backup = os.path.lexists(target), None
            if existed:
                backup = Path(f"{temporary}.old")
                try:
                    os.link(target, backup, follow_symlinks=False)
                except OSError:
                    backup = None  # no hard links here: the old file cannot be kept
            replaced.append((target, backup, existed))
            os.replace(temporary, target)
    except BaseException:
        for target, backup, existed in reversed(replaced):
            with contextlib.suppress(OSError):
                if backup is not None:
                    os.replace(backup, target)
                elif not existed:
                    os.unlink(target)
        raise
    finally:
        for _, backup, _ in replaced:
            if backup is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(backup)
    for directory in {target.parent for _, target in moves}:
        with contextlib.suppress(OSError):  # the renames on disk too (not everywhere possible)
            _fsync(directory)


@contextlib.contextmanager
def atomic_write_set(*paths: str | os.PathLike) -> Iterator[list[Path]]:
    """Yields a temporary path beside each of `paths`, in the same order, for
    the block to write; when the block ends normally they replace their
    targets together (replace_together, in this order: the file that refers
    to the others last); when it raises, they are removed and no target is
    touched."""
    targets = [Path(p) for p in paths]
    temporaries: list[Path] = []
    try:
        for target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                       dir=target.parent)
            os.close(fd)
            os.chmod(tmp, 0o666 & ~_umask())
            temporaries.append(Path(tmp))
        yield list(temporaries)
        replace_together(list(zip(temporaries, targets)))
    finally:
        for tmp in temporaries:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
