"""The one delegating store the tests wrap real stores in, to observe, race or fail their calls.

Every call goes to `inner` through `_delegate(op, where, mutating, action)`: a subclass that
overrides that one gate sees every call by name (the fault injector numbers and fails them); a
test that needs one call to behave differently overrides just that method. The wrapper makes no
request of its own, so it shares `inner`'s capabilities and request statistics.

One kind of call goes to `inner` unseen: job setup's probe of conditional create
(`core.store.check.require_conditional_create`), whose keys lie under `SCRATCH_PREFIX`. It runs
once per process and endpoint, so it must not shift the call numbers a fault-injection run
replays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import IO, TypeVar

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileStatus, PendingUpload, Store, UploadedPart
from airflow_commit_provider.core.store.check import SCRATCH_PREFIX
from airflow_commit_provider.core.store.streams import PublishOnCloseStream

R = TypeVar("R")


class DelegatingStore(Store):
    """Delegates every call to `inner`; override `_delegate` to see them all, or single methods."""

    def __init__(self, inner: Store) -> None:
        super().__init__()
        self.inner = inner
        self.capabilities = inner.capabilities
        self.statistics = inner.statistics

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    @property  # type: ignore[override]
    def conditional_create(self) -> str:
        return self.inner.conditional_create

    def endpoint_label(self) -> str:
        return self.inner.endpoint_label()

    def _call(self, op: str, where: object, mutating: bool, action: Callable[[], R]) -> R:
        """`_delegate`, but for the conditional-create probe's scratch keys (see the module doc)."""
        if SCRATCH_PREFIX in str(where):
            return action()
        return self._delegate(op, where, mutating, action)

    def _delegate(self, op: str, where: object, mutating: bool, action: Callable[[], R]) -> R:
        """Make one call: `op` names it, `where` is the path it concerns, `mutating` whether it
        changes the store. Listings arrive materialised, so the call is over when this returns."""
        return action()

    # Objects ---------------------------------------------------------------------------------------
    def read_bytes(self, path: StorePath) -> bytes:
        return self._call("read_bytes", path, False, lambda: self.inner.read_bytes(path))

    def read_range(self, path: StorePath, start: int, length: int) -> bytes:
        return self._call("read_range", path, False, lambda: self.inner.read_range(path, start, length))

    def write_bytes(self, path: StorePath, data: bytes, *, if_absent: bool = False) -> None:
        op = "write_bytes_if_absent" if if_absent else "write_bytes"
        self._call(op, path, True, lambda: self.inner.write_bytes(path, data, if_absent=if_absent))

    def write_stream(self, path: StorePath, body: IO[bytes], *, if_absent: bool = False) -> None:
        op = "write_stream_if_absent" if if_absent else "write_stream"
        self._call(op, path, True, lambda: self.inner.write_stream(path, body, if_absent=if_absent))

    def open_write(self, path: StorePath) -> PublishOnCloseStream:
        return self._call("open_write", path, True, lambda: self.inner.open_write(path))

    def get_status(self, path: StorePath) -> FileStatus | None:
        return self._call("get_status", path, False, lambda: self.inner.get_status(path))

    def list_files(self, directory: StorePath) -> Iterator[FileStatus]:
        return iter(
            self._call("list_files", directory, False, lambda: list(self.inner.list_files(directory)))
        )

    def list_page(self, directory: StorePath, *, limit: int, after: str = "") -> list[FileStatus]:
        return self._call(
            "list_page", directory, False, lambda: self.inner.list_page(directory, limit=limit, after=after)
        )

    def list_child_dirs(self, directory: StorePath) -> list[str]:
        return self._call("list_child_dirs", directory, False, lambda: self.inner.list_child_dirs(directory))

    def delete(self, path: StorePath) -> None:
        self._call("delete", path, True, lambda: self.inner.delete(path))

    def delete_files(self, paths: Iterable[StorePath]) -> None:
        paths = list(paths)
        where = paths[0] if paths else "-"
        self._call("delete_files", where, True, lambda: self.inner.delete_files(paths))

    def delete_tree(self, directory: StorePath) -> int:
        return self._call("delete_tree", directory, True, lambda: self.inner.delete_tree(directory))

    def rename_file(self, source: StorePath, dest: StorePath) -> None:
        self._call("rename_file", f"{source} -> {dest}", True, lambda: self.inner.rename_file(source, dest))

    def directory_exists(self, directory: StorePath) -> bool:
        return self._call(
            "directory_exists", directory, False, lambda: self.inner.directory_exists(directory)
        )

    def rename_directory(self, source: StorePath, dest: StorePath) -> None:
        self._call(
            "rename_directory", f"{source} -> {dest}", True, lambda: self.inner.rename_directory(source, dest)
        )

    def exchange_directories(self, first: StorePath, second: StorePath) -> bool:
        return self._call(
            "exchange_directories",
            f"{first} <-> {second}",
            True,
            lambda: self.inner.exchange_directories(first, second),
        )

    def prepare_directory(self, directory: StorePath) -> None:
        self._call("prepare_directory", directory, True, lambda: self.inner.prepare_directory(directory))

    def remove_empty_dirs(self, directory: StorePath, root: StorePath) -> None:
        self._call(
            "remove_empty_dirs", directory, True, lambda: self.inner.remove_empty_dirs(directory, root)
        )

    # Multipart uploads -----------------------------------------------------------------------------
    def create_multipart_upload(self, path: StorePath) -> str:
        return self._call(
            "create_multipart_upload", path, True, lambda: self.inner.create_multipart_upload(path)
        )

    def upload_part(self, path: StorePath, upload_id: str, part_number: int, data: bytes) -> str:
        return self._call(
            "upload_part", path, True, lambda: self.inner.upload_part(path, upload_id, part_number, data)
        )

    def complete_multipart_upload(self, path: StorePath, upload_id: str, etags: list[str]) -> str:
        return self._call(
            "complete_multipart_upload",
            path,
            True,
            lambda: self.inner.complete_multipart_upload(path, upload_id, etags),
        )

    def abort_multipart_upload(self, path: StorePath, upload_id: str) -> None:
        self._call(
            "abort_multipart_upload", path, True, lambda: self.inner.abort_multipart_upload(path, upload_id)
        )

    def list_multipart_uploads(self, directory: StorePath) -> Iterator[PendingUpload]:
        return iter(
            self._call(
                "list_multipart_uploads",
                directory,
                False,
                lambda: list(self.inner.list_multipart_uploads(directory)),
            )
        )

    def list_parts(self, path: StorePath, upload_id: str) -> list[UploadedPart]:
        return self._call("list_parts", path, False, lambda: self.inner.list_parts(path, upload_id))

    def close(self) -> None:
        """The wrapped store belongs to whoever made it (a test fixture), which closes it."""
