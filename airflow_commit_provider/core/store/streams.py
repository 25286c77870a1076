"""The write stream every store and committer hands out: published on close, never before."""

from __future__ import annotations

import abc
import io
import os
from collections.abc import Callable
from typing import Any, BinaryIO


class PublishOnCloseStream(io.BufferedIOBase, abc.ABC):
    """A write stream whose data becomes visible only when `close()` succeeds.

    `discard()`, leaving a `with` block by an exception, or garbage collection of an unclosed
    stream publishes nothing: a failed task must not leave a partial file behind.
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self._name = name
        self._finished = False
        self.on_end: Callable[[PublishOnCloseStream], object] | None = None
        """Called once the stream is closed, discarded or abandoned: what lets its owner (a task
        attempt) keep only the streams still open, not every stream it ever handed out."""

    @property
    def name(self) -> str:
        return self._name

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self.closed:
            raise ValueError(f"write to closed stream for {self._name}")
        return self._write(data)

    @abc.abstractmethod
    def _write(self, data: Any) -> int: ...

    def flush(self) -> None:
        if not self._finished and not self.closed:
            self._flush()

    def _flush(self) -> None:
        """Push buffered data on; must never publish anything."""

    @abc.abstractmethod
    def _publish(self) -> None:
        """Make the data visible and release resources; on failure, publish nothing."""

    @abc.abstractmethod
    def _discard(self) -> None:
        """Drop the data and release resources."""

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._publish()
        finally:
            self._end()

    def discard(self) -> None:
        if self.closed:
            return
        try:
            self._discard()
        finally:
            self._end()

    def abandon(self) -> None:
        """Mark closed, publishing and discarding nothing (failed construction, garbage collection)."""
        self._end()

    def _end(self) -> None:
        self._finished = True
        io.BufferedIOBase.close(self)
        if self.on_end is not None:
            self.on_end(self)

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()

    def __del__(self) -> None:
        # io.IOBase's finalizer would call close() and publish a half-written file. Abandon
        # instead: a finalizer must do no I/O (it can run inside a lock, e.g. a thread pool's
        # submit). What an abandoned stream leaves (a pending upload, a hidden temp file) is
        # recorded or hidden, and task abort, job cleanup or the cleanup tools remove it.
        if not getattr(self, "closed", True):
            self.abandon()


class LocalFileStream(PublishOnCloseStream):
    """A stream onto a file on local disk: closing keeps the file, discarding deletes it.

    Subclasses that must also hide the file until it is complete (a store) write to a temporary
    name and extend `_publish` to move it into place.
    """

    def __init__(self, name: str, path: str, file: BinaryIO) -> None:
        super().__init__(name)
        self._path = path
        self._file = file

    def _write(self, data: Any) -> int:
        return self._file.write(data)

    def tell(self) -> int:
        return self._file.tell()

    def _flush(self) -> None:
        self._file.flush()

    def _publish(self) -> None:
        self._file.close()

    def _discard(self) -> None:
        self._file.close()
        if os.path.exists(self._path):
            os.unlink(self._path)
