"""The narrow store-operations interface every committer is written against.

Each store declares what it can do, so a committer can refuse a store it cannot be
correct on before any data is written (the zero-rename paper's first requirement).
"""

from __future__ import annotations

import abc
import heapq
import io
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, BinaryIO

from airflow_commit_provider.core.iostats import IOStatistics
from airflow_commit_provider.core.parallel import completed_future
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.streams import PublishOnCloseStream


@dataclass(frozen=True)
class StoreCapabilities:
    atomic_rename: bool
    atomic_create_if_absent: bool
    multipart_upload: bool
    consistent_listing: bool
    atomic_directory_rename: bool = False
    """Whether a folder moves whole in one atomic call (`rename_directory`): what lets job commit
    swap a partition folder for a staged one (``replace`` on a rename store, `stages.swaps`)."""
    atomic_directory_exchange: bool = False
    """Whether two folders can swap places in one atomic call (`exchange_directories`), so a
    partition is swapped with no moment at which it is absent. A filesystem can still refuse it."""


@dataclass(frozen=True)
class FileStatus:
    path: StorePath
    size: int
    modified: float
    """Last-modified time, epoch seconds."""
    etag: str | None = None


@dataclass(frozen=True)
class PendingUpload:
    """An incomplete multipart upload."""

    path: StorePath
    upload_id: str
    initiated: float
    """Initiation time, epoch seconds."""


@dataclass(frozen=True)
class UploadedPart:
    number: int
    etag: str
    size: int


class StoreError(Exception):
    """A store operation failed; the message names the path."""


class FileAlreadyExistsError(StoreError):
    """A create-if-absent write found the path already taken."""


class FileNotFoundInStoreError(StoreError, FileNotFoundError):
    """The path does not exist."""


class NoSuchUploadError(StoreError):
    """The multipart upload was already completed or aborted."""


class UnsupportedStoreError(StoreError):
    """The store lacks a capability the caller needs."""


class LifecycleNotReadableError(StoreError):
    """The bucket's lifecycle configuration cannot be read (S3's AccessDenied: the caller lacks
    ``s3:GetLifecycleConfiguration``); what it says is then unknown, not empty."""


class Store(abc.ABC):
    """Operations on one store (a local filesystem or one S3 endpoint).

    Listings and tree deletes use directory boundaries: `out/dataset1` never covers
    `out/dataset10/...`.
    """

    capabilities: StoreCapabilities
    #: How far `write_bytes(if_absent=True)` is taken on trust before a job relies on it: ``check``
    #: (probed once per process, `check.require_conditional_create`), ``trusted`` (the user vouches)
    #: or ``enforced`` (the store's own semantics guarantee it).
    conditional_create = "check"

    def __init__(self) -> None:
        self.statistics = IOStatistics()
        """Requests made and bytes moved, counted under Hadoop's names (`op_get`, `op_put`...)."""

    @property
    def pipelines_requests(self) -> bool:
        """Whether `start_*` calls overlap their requests without a thread each; the commit operations'
        batches (`commit_operations.CommitOperations`) then keep many in flight from one thread
        (`parallel.run_pipelined`)."""
        return False

    # Objects -------------------------------------------------------------------------------
    @abc.abstractmethod
    def read_bytes(self, path: StorePath) -> bytes: ...

    def read_bytes_within(self, path: StorePath, limit: int) -> bytes | None:
        """The file's bytes, or None when it has more than `limit`: what lets a reader refuse a file
        by its size without reading all of it. Stores override this to read no more than `limit` + 1
        bytes (a ranged GET) or none (a stat); this default reads the whole file."""
        data = self.read_bytes(path)
        return data if len(data) <= limit else None

    def read_range(self, path: StorePath, start: int, length: int) -> bytes:
        """Up to `length` bytes of the file from byte `start`: fewer at its end, none past it. What
        lets a reader take one page of a large file, or its head, without the rest. Stores override
        this to read only those bytes (one ranged GET on S3); this default reads the whole file."""
        check_range(path, start, length)
        return self.read_bytes(path)[start : start + length]

    def open_read(self, path: StorePath) -> BinaryIO:
        """The file's bytes as a stream, read as they are consumed (close it when done): what lets a
        reader take a file of any size through bounded memory, such as a task's manifest at job
        commit. Stores override this to stream one response (one GET on S3) or the file itself;
        this default reads the whole file first. FileNotFoundInStoreError, here or on a read, when
        there is no file at `path`."""
        return io.BytesIO(self.read_bytes(path))

    @abc.abstractmethod
    def write_bytes(self, path: StorePath, data: bytes, *, if_absent: bool = False) -> None:
        """Write an object atomically; with `if_absent` raise FileAlreadyExistsError if it exists."""

    def write_stream(self, path: StorePath, body: IO[bytes], *, if_absent: bool = False) -> None:
        """`write_bytes` of the whole of `body`, a seekable file (from its start, whatever its
        position), streamed from it: what publishes a task's manifest of any size, written to a
        local temp file, without holding it in memory, create-if-absent for an exclusive task
        commit. Stores override this to stream it (one PUT on S3); this default reads it whole."""
        body.seek(0)
        self.write_bytes(path, body.read(), if_absent=if_absent)

    @abc.abstractmethod
    def open_write(self, path: StorePath) -> PublishOnCloseStream:
        """A stream whose contents become visible at `path` when it is closed."""

    @abc.abstractmethod
    def get_status(self, path: StorePath) -> FileStatus | None:
        """The file's status, or None if there is no file at `path`."""

    @abc.abstractmethod
    def list_files(self, directory: StorePath) -> Iterator[FileStatus]:
        """Every visible file under `directory`, recursively, in key order (UTF-8 bytes) as far as
        the store keeps it: S3 (and the local store, `LocalStore`) list in that order, but some S3
        servers do not (SeaweedFS lists a directory's files right after its name, before a sibling
        like ``a-b`` beside ``a/``). A caller that merges a listing with something sorted sorts the
        listing itself (`core.sorted_spool.spooled`), as job commit does."""

    def list_page(self, directory: StorePath, *, limit: int, after: str = "") -> list[FileStatus]:
        """The first `limit` files under `directory` (recursively) whose path relative to it sorts
        after `after`, in key order (UTF-8 byte order, as S3 lists): one page of a listing that is
        resumed from its last key, such as the records index.

        This default lists every file below and keeps `limit` of them (in memory bounded by
        `limit`); S3 asks for that page alone.
        """
        if limit < 1:
            raise ValueError(f"limit: a page holds at least 1 file, got {limit!r}")
        later = (
            status for status in self.list_files(directory) if status.path.relative_to(directory) > after
        )
        return heapq.nsmallest(limit, later, key=lambda status: status.path.relative_to(directory))

    def list_child_dirs(self, directory: StorePath) -> list[str]:
        """Sorted names of the directories directly under `directory`.

        This default lists every file below; stores that can ask for one level override it.
        """
        names = set()
        for status in self.list_files(directory):
            relative = status.path.relative_to(directory)
            if "/" in relative:
                names.add(relative.split("/", 1)[0])
        return sorted(names)

    @abc.abstractmethod
    def delete(self, path: StorePath) -> None:
        """Delete one file; a missing file is not an error."""

    def delete_files(self, paths: Iterable[StorePath]) -> None:
        """Delete many files, streaming `paths` (a generator of a million holds one at a time);
        stores override this to batch."""
        for path in paths:
            self.delete(path)

    def delete_tree(self, directory: StorePath) -> int:
        """Delete everything under `directory` as it is listed; returns the number of files deleted."""
        deleted = 0

        def listed() -> Iterator[StorePath]:
            nonlocal deleted
            for status in self.list_files(directory):
                deleted += 1
                yield status.path

        self.delete_files(listed())
        return deleted

    @abc.abstractmethod
    def rename_file(self, source: StorePath, dest: StorePath) -> None:
        """Move one file; atomic only if `capabilities.atomic_rename`; S3 copies then deletes."""

    # Folders (stores with `capabilities.atomic_directory_rename`) ---------------------------------
    def directory_exists(self, directory: StorePath) -> bool:
        """Whether there is a folder at `directory` (empty or not)."""
        raise UnsupportedStoreError(f"{type(self).__name__} has no folders ({directory})")

    def rename_directory(self, source: StorePath, dest: StorePath) -> None:
        """Move the folder `source` with all it holds to `dest` in one atomic call, making `dest`'s
        parents as needed. FileAlreadyExistsError when anything is at `dest` (nothing moves),
        FileNotFoundInStoreError when there is no folder at `source`."""
        raise UnsupportedStoreError(f"{type(self).__name__} has no folders ({source})")

    def exchange_directories(self, first: StorePath, second: StorePath) -> bool:
        """Swap two existing folders in one atomic call, so that each path only ever shows one of
        the two whole; False, changing nothing, where the store or its filesystem cannot (then a
        swap takes two `rename_directory` calls). This default cannot (no
        `capabilities.atomic_directory_exchange`)."""
        return False

    def prepare_directory(self, directory: StorePath) -> None:  # noqa: B027 - optional hook
        """Make `directory` usable as a parent; object stores need nothing."""

    def remove_empty_dirs(self, directory: StorePath, root: StorePath) -> None:  # noqa: B027 - optional hook
        """Remove `directory`, then each parent strictly inside `root`, while they are empty.

        The counterpart of `prepare_directory` and of the parents a write creates: what a write
        made of folders and a delete left holding nothing. Object stores have no folders (a key's
        "directory" goes with its last key), so they need nothing.
        """

    # Multipart uploads ---------------------------------------------------------------------
    # The stages and committers make these calls only through `commit_operations.CommitOperations`.
    def create_multipart_upload(self, path: StorePath) -> str:
        raise UnsupportedStoreError(f"{type(self).__name__} has no multipart uploads ({path})")

    def upload_part(self, path: StorePath, upload_id: str, part_number: int, data: bytes) -> str:
        raise UnsupportedStoreError(f"{type(self).__name__} has no multipart uploads ({path})")

    def complete_multipart_upload(self, path: StorePath, upload_id: str, etags: list[str]) -> str:
        """Make the upload visible at `path`; returns the object's ETag."""
        raise UnsupportedStoreError(f"{type(self).__name__} has no multipart uploads ({path})")

    def abort_multipart_upload(self, path: StorePath, upload_id: str) -> None:
        raise UnsupportedStoreError(f"{type(self).__name__} has no multipart uploads ({path})")

    def start_complete_multipart_upload(
        self, path: StorePath, upload_id: str, etags: list[str]
    ) -> Future[str]:
        """`complete_multipart_upload` as a future; here the call is over when this returns."""
        return completed_future(self.complete_multipart_upload, path, upload_id, etags)

    def start_abort_multipart_upload(self, path: StorePath, upload_id: str) -> Future[None]:
        """`abort_multipart_upload` as a future; here the call is over when this returns."""
        return completed_future(self.abort_multipart_upload, path, upload_id)

    def list_multipart_uploads(self, directory: StorePath) -> Iterator[PendingUpload]:
        """Pending uploads under `directory`, with directory-boundary semantics, in no set order (AWS
        lists them by key, SeaweedFS by upload ID)."""
        raise UnsupportedStoreError(f"{type(self).__name__} has no multipart uploads ({directory})")

    def list_parts(self, path: StorePath, upload_id: str) -> list[UploadedPart]:
        raise UnsupportedStoreError(f"{type(self).__name__} has no multipart uploads ({path})")

    def lifecycle_rules(self, directory: StorePath) -> list[dict[str, Any]]:
        """The lifecycle rules of the bucket holding `directory`, as S3's GetBucketLifecycleConfiguration
        answers them (``Rules``): what can abort a job's pending uploads behind its back
        (`lifecycle.upload_abort_rules` reads them). A bucket without a configuration has none, and so
        has a store without lifecycle rules (this default). LifecycleNotReadableError when the caller
        may not read them."""
        return []

    # Trust ----------------------------------------------------------------------------------
    def endpoint_label(self) -> str:
        """Where the store is, for messages and per-endpoint caches; never a credential."""
        return type(self).__name__

    # Lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients and pools."""

    @contextmanager
    def session(self) -> Iterator[Store]:
        try:
            yield self
        finally:
            self.close()

    def require(self, capability: str, purpose: str) -> None:
        """Fail fast with a clear message if the store lacks `capability`."""
        if not getattr(self.capabilities, capability):
            raise UnsupportedStoreError(
                f"{purpose} needs a store with {capability.replace('_', ' ')}; "
                f"{type(self).__name__} does not provide it"
            )


def check_range(path: StorePath, start: int, length: int) -> None:
    """Refuse a negative range (a caller's mistake) before any request is made."""
    if start < 0 or length < 0:
        raise ValueError(f"{path}: cannot read {length} bytes from byte {start}")
