"""HDFS as a store, through WebHDFS (the NameNode's REST API) with one `requests` session per store.

Why WebHDFS and not pyarrow's ``HadoopFileSystem``: pyarrow reaches HDFS through libhdfs, a JNI
library that starts a JVM inside the Python process and needs ``libhdfs.so`` (not in the pyarrow
wheel: it comes with a Hadoop distribution), ``JAVA_HOME`` and the Hadoop jars on ``CLASSPATH`` in
every Spark executor and Airflow worker, and a JVM's memory in each. WebHDFS needs an HTTP client
the package already has, speaks to every Hadoop 2.x/3.x NameNode, and gives every call this store
makes: create-if-absent, atomic rename (``rename2``), paged listings, ranged reads.

Semantics, as the local store's (HDFS is a rename store): rename is atomic in the NameNode;
create-if-absent is enforced by it. A file is written to a hidden sibling folder (``.__publishing__``,
skipped by listings and by Spark's readers) and renamed into place, so a file is never seen half
written, as ``PublishOnCloseStream`` promises. There are no multipart uploads: the upload committers
(magic, staging) refuse ``hdfs://`` at setup (`Store.require`), and the manifest and file committers
run here.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import uuid
from collections.abc import Iterator
from typing import IO, Any, BinaryIO, cast
from urllib.parse import quote

import requests
from requests.adapters import HTTPAdapter

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import key_order, spooled
from airflow_commit_provider.core.store.base import (
    FileAlreadyExistsError,
    FileNotFoundInStoreError,
    FileStatus,
    Store,
    StoreCapabilities,
    StoreError,
    check_range,
)
from airflow_commit_provider.core.store.check import ENFORCED
from airflow_commit_provider.core.store.settings import HdfsSettings
from airflow_commit_provider.core.store.streams import PublishOnCloseStream

#: The hidden folder beside a file where it is written before its rename into place.
PUBLISHING_DIR = ".__publishing__"
#: Hadoop's exceptions (a WebHDFS ``RemoteException``'s ``exception``) that mean one of ours.
_ERRORS: dict[str, type[StoreError]] = {
    "FileNotFoundException": FileNotFoundInStoreError,
    "FileAlreadyExistsException": FileAlreadyExistsError,
}
_DIRECTORY, _FILE = "DIRECTORY", "FILE"
#: What OPEN answers for an offset at or past a file's end (NameNode, DataNode).
_PAST_THE_END = ("IOException", "EOFException")


class HdfsRequestError(StoreError):
    """A WebHDFS call failed; `exception` is Hadoop's name for why (``PathIsNotEmptyDirectoryException``)."""

    def __init__(self, message: str, exception: str) -> None:
        super().__init__(message)
        self.exception = exception


class _SpooledHdfsWriter(PublishOnCloseStream):
    """Buffers a file in an unnamed local temp file (a file of any size in bounded memory) and
    publishes it whole on close."""

    def __init__(self, store: HdfsStore, path: StorePath) -> None:
        super().__init__(str(path))
        self._store = store
        self._path = path
        self._file = tempfile.TemporaryFile(prefix="hdfs-write-")  # noqa: SIM115 - closed on publish or discard

    def _write(self, data: Any) -> int:
        return self._file.write(data)

    def tell(self) -> int:
        return self._file.tell()

    def _publish(self) -> None:
        try:
            self._store.write_stream(self._path, self._file)
        finally:
            self._file.close()

    def _discard(self) -> None:
        self._file.close()


class HdfsStore(Store):
    capabilities = StoreCapabilities(
        atomic_rename=True,
        atomic_create_if_absent=True,
        multipart_upload=False,
        consistent_listing=True,
        atomic_directory_rename=True,
    )
    #: Create-if-absent is a rename without OVERWRITE, which the NameNode refuses on an existing name.
    conditional_create = ENFORCED

    def __init__(self, settings: HdfsSettings | None = None, *, threads: int = 32) -> None:
        super().__init__()
        self.settings = settings or HdfsSettings.from_environment()
        self._session = requests.Session()
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=threads + 4)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        self._bases: dict[str, str] = {}

    def endpoint_label(self) -> str:
        return f"WebHDFS {self.settings.webhdfs_url or 'from HADOOP_CONF_DIR'}"

    def close(self) -> None:
        self._session.close()

    # Requests --------------------------------------------------------------------------------------
    def _url(self, path: StorePath) -> str:
        base = self._bases.get(path.bucket)
        if base is None:
            try:
                base = self._bases[path.bucket] = self.settings.webhdfs_base(path.bucket)
            except ValueError as error:
                raise StoreError(f"{path}: {error}") from None
        return f"{base}/{quote(path.key, safe='/', errors='surrogateescape')}"

    def _call(
        self, method: str, path: StorePath, op: str, *, stream: bool = False, **params: str | int
    ) -> requests.Response:
        """One NameNode call; a Hadoop exception comes back as one of ours naming `path`."""
        query: dict[str, str | int] = {"op": op, "user.name": self.settings.user_name(), **params}
        try:
            response = self._session.request(
                method,
                self._url(path),
                params=query,
                timeout=self.settings.timeout,
                stream=stream,
                allow_redirects=method == "GET",
            )
        except requests.RequestException as error:
            raise StoreError(f"{path}: {op} failed: {error}") from None
        _raise_for(response, path, op)
        return response

    def _create(self, path: StorePath, body: IO[bytes]) -> None:
        """CREATE's two steps: the NameNode names a DataNode (``noredirect``: in JSON, so the body is
        sent once), the DataNode takes the bytes. Refused if the (hidden, unique) name exists."""
        located = self._call("PUT", path, "CREATE", overwrite="false", noredirect="true")
        location = located.headers.get("Location") or located.json()["Location"]
        body.seek(0)
        try:
            response = self._session.put(
                location,
                data=body,
                timeout=self.settings.timeout,
                headers={"Content-Type": "application/octet-stream"},
            )
        except requests.RequestException as error:
            raise StoreError(f"{path}: CREATE failed at the DataNode: {error}") from None
        _raise_for(response, path, "CREATE")
        self.statistics.increment("op_put")
        self.statistics.increment("bytes_uploaded", body.tell())

    def _rename(self, source: StorePath, dest: StorePath, *, overwrite: bool) -> None:
        """``rename2``: atomic, with OVERWRITE or refusing an existing destination, and an exception
        (not plain RENAME's bare ``false``) for a missing source or destination folder."""
        self.statistics.increment("op_rename")
        self._call(
            "PUT",
            source,
            "RENAME",
            destination="/" + dest.key,
            renameoptions="OVERWRITE" if overwrite else "NONE",
        )

    # Objects ---------------------------------------------------------------------------------------
    def read_bytes(self, path: StorePath) -> bytes:
        self.statistics.increment("op_get")
        response = self._open(path)
        return response.content if response is not None else b""

    def _open(
        self, path: StorePath, *, offset: int = 0, stream: bool = False, **params: str | int
    ) -> requests.Response | None:
        """OPEN: the NameNode redirects to a DataNode holding the data, which `requests` follows.
        None when there is nothing from `offset` on: the NameNode refuses an OPEN from a file's end
        ("Offset=6 out of the range [0, 6)"), the DataNode one of an empty file ("Cannot seek after
        EOF"), where a file reads as no bytes."""
        try:
            return self._call("GET", path, "OPEN", stream=stream, offset=offset, **params)
        except HdfsRequestError as error:
            status = self.get_status(path) if error.exception in _PAST_THE_END else None
            if status is not None and offset >= status.size:
                return None
            raise

    def read_bytes_within(self, path: StorePath, limit: int) -> bytes | None:
        self.statistics.increment("op_get")
        response = self._open(path, length=limit + 1)
        data = response.content if response is not None else b""
        return data if len(data) <= limit else None

    def read_range(self, path: StorePath, start: int, length: int) -> bytes:
        check_range(path, start, length)
        if length == 0:
            return b""
        self.statistics.increment("op_get")
        response = self._open(path, offset=start, length=length)
        return response.content if response is not None else b""

    def open_read(self, path: StorePath) -> BinaryIO:
        """The DataNode's response, read as it is consumed."""
        self.statistics.increment("op_get")
        response = self._open(path, stream=True)
        return cast(BinaryIO, response.raw) if response is not None else io.BytesIO()

    def write_bytes(self, path: StorePath, data: bytes, *, if_absent: bool = False) -> None:
        with tempfile.SpooledTemporaryFile() as body:
            body.write(data)
            self.write_stream(path, cast(IO[bytes], body), if_absent=if_absent)

    def write_stream(self, path: StorePath, body: IO[bytes], *, if_absent: bool = False) -> None:
        """Written under a unique hidden name beside `path`, then renamed into place: with OVERWRITE,
        or refused (FileAlreadyExistsError) when `path` exists."""
        hidden = path.parent.join(PUBLISHING_DIR, f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            self._create(hidden, body)
            try:
                self._rename(hidden, path, overwrite=not if_absent)
            except FileAlreadyExistsError:
                raise FileAlreadyExistsError(f"file already exists: {path}") from None
        except BaseException:
            with contextlib.suppress(StoreError):
                self._delete(hidden, recursive=False)
            raise
        finally:
            self._remove_publishing_dir(hidden.parent)

    def _remove_publishing_dir(self, directory: StorePath) -> None:
        """The hidden folder goes with its last file: a concurrent writer's file keeps it (a DELETE
        that is not recursive refuses a folder that holds anything), and its CREATE makes it again."""
        with contextlib.suppress(StoreError):
            self._delete(directory, recursive=False)

    def open_write(self, path: StorePath) -> PublishOnCloseStream:
        return _SpooledHdfsWriter(self, path)

    def get_status(self, path: StorePath) -> FileStatus | None:
        self.statistics.increment("op_head")
        try:
            status = self._call("GET", path, "GETFILESTATUS").json()["FileStatus"]
        except FileNotFoundInStoreError:
            return None
        if status["type"] != _FILE:
            return None
        return FileStatus(path, status["length"], status["modificationTime"] / 1000)

    # Listings --------------------------------------------------------------------------------------
    def _list_directory(self, directory: StorePath) -> Iterator[dict[str, Any]]:
        """The entries of one folder, page by page (``LISTSTATUS_BATCH``, ``dfs.ls.limit`` entries a
        page): a folder of a million files is listed in bounded memory. Nothing for a missing folder."""
        after = ""
        while True:
            self.statistics.increment("op_list")
            try:
                # `startafter` in lower case: a NameNode (3.5.0) ignores `startAfter` as the docs spell it
                listing = self._call("GET", directory, "LISTSTATUS_BATCH", startafter=after).json()[
                    "DirectoryListing"
                ]
            except FileNotFoundInStoreError:
                return
            entries = listing["partialListing"]["FileStatuses"]["FileStatus"]
            for entry in entries:
                if entry["pathSuffix"] != PUBLISHING_DIR:
                    yield entry
            if not listing["remainingEntries"] or not entries:
                return
            if entries[-1]["pathSuffix"] == after:  # a server that ignores the page's start
                raise StoreError(
                    f"{directory}: LISTSTATUS_BATCH returned the same page again after {after!r}"
                )
            after = entries[-1]["pathSuffix"]

    def list_files(self, directory: StorePath) -> Iterator[FileStatus]:
        """Every file under `directory` in key order: HDFS lists a folder by its names' bytes taken
        as signed (``é`` before ``a``, ``a`` before ``a-b``), where keys order by unsigned bytes with
        a folder as its name and ``/`` (``a-b`` before ``a/``, ``é`` last); each folder is re-sorted
        through a spool."""
        records = (
            (
                key_order(entry["pathSuffix"] + ("/" if entry["type"] == _DIRECTORY else "")),
                entry["pathSuffix"],
                entry["type"] == _DIRECTORY,
                entry["length"],
                entry["modificationTime"],
            )
            for entry in self._list_directory(directory)
        )
        with spooled(records, prefix="hdfs-listing-") as entries:
            for _order, name, is_dir, size, modified in entries:
                if is_dir:
                    yield from self.list_files(directory.join(name))
                else:
                    yield FileStatus(directory.join(name), size, modified / 1000)

    def list_child_dirs(self, directory: StorePath) -> list[str]:
        """Empty folders included: as on local disk, a job's empty work folders are leftovers too."""
        return sorted(
            entry["pathSuffix"] for entry in self._list_directory(directory) if entry["type"] == _DIRECTORY
        )

    # Deletes and renames ---------------------------------------------------------------------------
    def _delete(self, path: StorePath, *, recursive: bool) -> bool:
        self.statistics.increment("op_delete")
        return bool(self._call("DELETE", path, "DELETE", recursive=str(recursive).lower()).json()["boolean"])

    def delete(self, path: StorePath) -> None:
        """One request; a missing file answers ``false``. Not recursive: a folder that holds
        anything is refused (HdfsRequestError), never emptied."""
        self._delete(path, recursive=False)

    def delete_tree(self, directory: StorePath) -> int:
        """One recursive DELETE after counting; an emptied ``_``-folder parent (``_temporary`` of
        ``_temporary/0``) goes with it, as on local disk."""
        count = sum(1 for _ in self.list_files(directory))
        self._delete(directory, recursive=True)
        if directory.parent.name.startswith("_"):
            self._remove_empty(directory.parent)
        return count

    def rename_file(self, source: StorePath, dest: StorePath) -> None:
        """One call when the destination's folder exists; else the source is checked before the
        folder is made, so a rename that cannot happen (a late attempt's) makes no folder."""
        try:
            self._rename(source, dest, overwrite=True)
            return
        except FileNotFoundInStoreError:
            if self.get_status(source) is None:
                raise FileNotFoundInStoreError(f"rename source does not exist: {source}") from None
        self.prepare_directory(dest.parent)
        self._rename(source, dest, overwrite=True)

    def directory_exists(self, directory: StorePath) -> bool:
        self.statistics.increment("op_head")
        try:
            status = self._call("GET", directory, "GETFILESTATUS").json()["FileStatus"]
        except FileNotFoundInStoreError:
            return False
        return bool(status["type"] == _DIRECTORY)

    def rename_directory(self, source: StorePath, dest: StorePath) -> None:
        """``rename2`` without OVERWRITE, which the NameNode refuses for an existing `dest` (it would
        refuse a non-empty folder even with it): one call when `dest`'s parent exists; else the
        source is checked before the parent is made, as `rename_file` does. A file at `dest` is
        refused with an IOException ("must both be directories"), taken as the existing destination
        it is. HDFS has no exchange: `exchange_directories` stays False."""
        try:
            self._rename(source, dest, overwrite=False)
            return
        except FileNotFoundInStoreError:
            if not self.directory_exists(source):
                raise FileNotFoundInStoreError(f"rename source folder does not exist: {source}") from None
        except HdfsRequestError:
            if self.get_status(dest) is not None:
                raise FileAlreadyExistsError(f"rename destination already exists: {dest}") from None
            raise
        self.prepare_directory(dest.parent)
        self._rename(source, dest, overwrite=False)

    def prepare_directory(self, directory: StorePath) -> None:
        self.statistics.increment("op_mkdirs")
        self._call("PUT", directory, "MKDIRS")

    def _remove_empty(self, directory: StorePath) -> bool:
        """Whether `directory` is gone (removed now or missing); False when it holds anything."""
        try:
            self._delete(directory, recursive=False)
        except HdfsRequestError as error:
            if error.exception == "PathIsNotEmptyDirectoryException":
                return False
            raise
        return True

    def remove_empty_dirs(self, directory: StorePath, root: StorePath) -> None:
        current = directory
        while current.is_under(root) and self._remove_empty(current):
            current = current.parent


def _raise_for(response: requests.Response, path: StorePath, op: str) -> None:
    """Nothing for a success; else one of ours with Hadoop's exception and the first line of its
    message (the rest is the NameNode's stack trace)."""
    if response.status_code < 400:
        return
    try:
        remote = response.json()["RemoteException"]
        exception, message = remote["exception"], remote["message"].splitlines()[0]
    except (ValueError, KeyError, TypeError, IndexError):
        exception, message = f"HTTP {response.status_code}", response.reason or ""
    error_type = _ERRORS.get(exception)
    text = f"{path}: {op} failed: {exception}: {message}"
    if error_type is not None:
        raise error_type(text)
    raise HdfsRequestError(text, exception)
