"""A task try's local working files, in a directory the next try (or a sweep) removes after a kill.

A try that is SIGKILLed (OOM, a lost worker process) runs no ``finally``: a temporary directory of
its own would stay forever. So each try works in a directory named after its task instance and try
number, under one root (default ``<system temp dir>/airflow-commit``)::

    <root>/<dag_id>/<run_id>/<task_id>.<map_index>/try-<n>/

(a name with other characters than letters, digits, ``.``, ``_`` and ``-`` has them replaced by
``_`` and a short hash of it appended: ``manual__2024-01-01T00_00_00_00_00-1a2b3c4d``).

The try holds an exclusive ``flock`` on ``try-<n>/.lock`` while it runs, and hands the descriptor
to the process it starts (spark-submit), so the lock is free exactly when the try and that process
are gone: the kernel releases it however they die. Removal needs that lock, so nothing a live
process uses is ever removed:

- a new try of a task instance removes every directory of the instance whose lock is free (earlier
  tries, or the same try number of a run that was re-created);
- :func:`sweep_stale` removes the rest (tries never retried): directories whose lock is free and that
  are older than an age, so that a directory being created, not yet locked, is never taken.

Nothing outside the root is touched: only directories at the depth of a try, found by walking the
root without following symbolic links, are removed. The root must belong to the user running the
try (a shared temp dir could hold another user's root).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from airflow_commit_provider.core.task_key import TaskKey

__all__ = [
    "DEFAULT_STALE_AFTER",
    "LOCK_NAME",
    "TryWorkdir",
    "default_root",
    "open_try_workdir",
    "sweep_stale",
    "sweep_task_instance",
    "try_workdir_path",
]

LOCK_NAME = ".lock"
TRY_PREFIX = "try-"
#: How old a directory whose lock is free must be before any sweep takes it (not only its own
#: task instance's next try): far longer than creating and locking one takes.
DEFAULT_STALE_AFTER = timedelta(hours=1)
#: <dag>/<run>/<task>.<map>/try-<n>: how deep a try's directory is below the root.
_TRY_DEPTH = 4
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_root() -> Path:
    """``airflow-commit`` under the system temp dir (``TMPDIR``)."""
    return Path(tempfile.gettempdir(), "airflow-commit")


@dataclass(frozen=True)
class TryWorkdir:
    """A running try's directory, and the descriptor whose lock says the try (or its child) lives."""

    path: Path
    lock_fd: int


def try_workdir_path(root: Path, key: TaskKey, try_number: int) -> Path:
    """Where a try works: one directory per task instance, one per try inside it."""
    return _instance_dir(root, key) / f"{TRY_PREFIX}{int(try_number)}"


@contextlib.contextmanager
def open_try_workdir(
    root: Path | str, key: TaskKey, try_number: int, *, stale_after: timedelta = DEFAULT_STALE_AFTER
) -> Iterator[TryWorkdir]:
    """Sweep what dead tries left, create and lock this try's directory; remove it at the end.

    Pass ``lock_fd`` to the processes the try starts (``pass_fds``): the directory then stays while
    any of them lives, even after a SIGKILL of the try.
    """
    root = _own_root(Path(root))
    sweep_task_instance(root, key)
    sweep_stale(root, stale_after)
    path = try_workdir_path(root, key, try_number)
    lock_fd = _create_locked(path)
    try:
        yield TryWorkdir(path, lock_fd)
    finally:
        try:
            _remove_tree(root, path)
        finally:
            os.close(lock_fd)
            _remove_empty_parents(root, path.parent)


def sweep_task_instance(root: Path | str, key: TaskKey) -> list[Path]:
    """Remove the task instance's try directories whose owners are gone; return them."""
    root = Path(root)
    instance = _instance_dir(root, key)
    if not _is_real_dir(instance):
        return []
    removed = [
        path for path in sorted(instance.iterdir()) if path.name.startswith(TRY_PREFIX) and _take(root, path)
    ]
    _remove_empty_parents(root, instance)
    return removed


def sweep_stale(root: Path | str, older_than: timedelta = DEFAULT_STALE_AFTER) -> list[Path]:
    """Remove every try directory under `root` whose owner is gone and that is older than `older_than`."""
    root = Path(root)
    if not _is_real_dir(root):
        return []
    cutoff = time.time() - older_than.total_seconds()
    removed = []
    for path in _try_dirs(root):
        with contextlib.suppress(OSError):
            if path.lstat().st_mtime <= cutoff and _take(root, path):
                removed.append(path)
                _remove_empty_parents(root, path.parent)
    return removed


# Internals -----------------------------------------------------------------------------------------
def _instance_dir(root: Path, key: TaskKey) -> Path:
    parts = (key.dag_id, key.run_id, f"{key.task_id}.{key.map_index}")
    return root.joinpath(*(_name(part) for part in parts))


def _name(part: str) -> str:
    """One path component for an Airflow name, safe where Spark reads it as a URI (``--py-files``).

    Hadoop's ``Path`` takes ``manual__2024-01-01T00:00:00+00:00`` for a URI with a scheme, so only
    letters, digits, ``.``, ``_`` and ``-`` are kept; a name that needed changing gets a hash of
    the original, so that two names never meet in one directory.
    """
    safe = _UNSAFE.sub("_", part).strip(".") or "_"
    if safe == part:
        return part
    return f"{safe}-{hashlib.sha256(part.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _own_root(root: Path) -> Path:
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    status = root.lstat()
    if not _is_real_dir(root) or status.st_uid != os.getuid():
        raise PermissionError(
            f"{root} is not a directory of this user (uid {os.getuid()}): give the try directories a root "
            "of their own"
        )
    return root


def _create_locked(path: Path) -> int:
    for _attempt in range(3):  # a concurrent sweep may remove an empty parent just created
        with contextlib.suppress(FileNotFoundError):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir()
            break
    else:
        path.mkdir()  # the error, if it persists
    lock_fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(lock_fd)
        raise
    return lock_fd


def _take(root: Path, path: Path) -> bool:
    """Remove a try directory if its lock is free (its owners are gone); False if it is held."""
    if not _is_real_dir(path):
        return False
    try:
        lock_fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        lock_fd = None  # never locked (created, then killed at once), or being removed
    except OSError:
        return False
    try:
        if lock_fd is not None:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # the try, or a process it started, is alive
        _remove_tree(root, path)
        return True
    finally:
        if lock_fd is not None:
            os.close(lock_fd)


def _try_dirs(root: Path) -> Iterator[Path]:
    """Directories at a try's depth below `root`, without following symbolic links."""
    level = [root]
    for _depth in range(_TRY_DEPTH):
        level = [child for parent in level for child in _subdirs(parent)]
    yield from (path for path in level if path.name.startswith(TRY_PREFIX))


def _subdirs(parent: Path) -> list[Path]:
    try:
        return sorted(child for child in parent.iterdir() if _is_real_dir(child))
    except OSError:
        return []


def _is_real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _remove_tree(root: Path, path: Path) -> None:
    """Remove `path`, a directory strictly inside `root` (never a link out of it)."""
    resolved_root = root.resolve()
    if (
        path.is_symlink()
        or not path.resolve().is_relative_to(resolved_root)
        or path.resolve() == resolved_root
    ):
        raise ValueError(f"refusing to remove {path}: not a try directory inside {root}")
    shutil.rmtree(path, ignore_errors=True)


def _remove_empty_parents(root: Path, directory: Path) -> None:
    """Remove `directory` and its parents up to (not including) `root` while they are empty."""
    resolved_root = root.resolve()
    current = directory
    while current.resolve() != resolved_root and current.resolve().is_relative_to(resolved_root):
        try:
            current.rmdir()
        except OSError:
            return
        current = current.parent
