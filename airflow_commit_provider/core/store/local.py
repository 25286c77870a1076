"""The local filesystem as a store.

It has atomic rename and create-if-absent (O_EXCL), and moves a folder whole in one rename; on
Linux two folders swap atomically (``renameat2``'s ``RENAME_EXCHANGE``, `store.renameat2`).
Multipart uploads are emulated so the zero-rename committers run here too: parts live in a hidden
`.__uploads__` directory beside the destination, invisible to listings, and completing an upload
concatenates them and renames the result into place atomically.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import IO, BinaryIO

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import key_order, spooled
from airflow_commit_provider.core.store import renameat2
from airflow_commit_provider.core.store.base import (
    FileAlreadyExistsError,
    FileNotFoundInStoreError,
    FileStatus,
    NoSuchUploadError,
    PendingUpload,
    Store,
    StoreCapabilities,
    UploadedPart,
    check_range,
)
from airflow_commit_provider.core.store.check import ENFORCED
from airflow_commit_provider.core.store.streams import LocalFileStream, PublishOnCloseStream

UPLOADS_DIR = ".__uploads__"
_UPLOAD_META = "upload.json"


class _AtomicLocalWriter(LocalFileStream):
    """Writes to a hidden temp file and renames it into place on close."""

    def __init__(self, store: LocalStore, path: StorePath):
        fd, tmp = _hidden_temp_file(path)
        super().__init__(str(path), tmp, os.fdopen(fd, "wb"))
        self._store = store
        self._destination = path

    def _publish(self) -> None:
        super()._publish()
        os.replace(self._path, self._destination.key)
        _remove_if_empty(os.path.dirname(self._path))
        self._store.statistics.increment("op_put")

    def _discard(self) -> None:
        super()._discard()
        _remove_if_empty(os.path.dirname(self._path))


class LocalStore(Store):
    capabilities = StoreCapabilities(
        atomic_rename=True,
        atomic_create_if_absent=True,
        multipart_upload=True,
        consistent_listing=True,
        atomic_directory_rename=True,
        atomic_directory_exchange=renameat2.AVAILABLE,
    )
    #: Create-if-absent is link(2), which the kernel refuses on an existing name (as O_EXCL).
    conditional_create = ENFORCED

    def endpoint_label(self) -> str:
        return "local filesystem"

    def read_bytes(self, path: StorePath) -> bytes:
        self.statistics.increment("op_get")
        try:
            with open(path.key, "rb") as handle:
                return handle.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as error:
            raise FileNotFoundInStoreError(f"no such file: {path}") from error

    def read_bytes_within(self, path: StorePath, limit: int) -> bytes | None:
        self.statistics.increment("op_get")
        try:
            with open(path.key, "rb") as handle:
                if os.fstat(handle.fileno()).st_size > limit:
                    return None
                data = handle.read(limit + 1)  # it may have grown since
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as error:
            raise FileNotFoundInStoreError(f"no such file: {path}") from error
        return data if len(data) <= limit else None

    def read_range(self, path: StorePath, start: int, length: int) -> bytes:
        check_range(path, start, length)
        if length == 0:
            return b""
        self.statistics.increment("op_get")
        try:
            with open(path.key, "rb") as handle:
                handle.seek(start)
                return handle.read(length)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as error:
            raise FileNotFoundInStoreError(f"no such file: {path}") from error

    def open_read(self, path: StorePath) -> BinaryIO:
        self.statistics.increment("op_get")
        try:
            return open(path.key, "rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as error:
            raise FileNotFoundInStoreError(f"no such file: {path}") from error

    def write_bytes(self, path: StorePath, data: bytes, *, if_absent: bool = False) -> None:
        self.write_stream(path, io.BytesIO(data), if_absent=if_absent)

    def write_stream(self, path: StorePath, body: IO[bytes], *, if_absent: bool = False) -> None:
        body.seek(0)
        if not if_absent:
            with self.open_write(path) as stream:
                shutil.copyfileobj(body, stream)
            return
        fd, tmp = _hidden_temp_file(path)
        try:
            with os.fdopen(fd, "wb") as handle:
                shutil.copyfileobj(body, handle)
            self.statistics.increment("op_put")
            try:
                os.link(tmp, path.key)
            except FileExistsError as error:
                raise FileAlreadyExistsError(f"file already exists: {path}") from error
        finally:
            os.unlink(tmp)
            _remove_if_empty(os.path.dirname(tmp))

    def open_write(self, path: StorePath) -> PublishOnCloseStream:
        return _AtomicLocalWriter(self, path)

    def get_status(self, path: StorePath) -> FileStatus | None:
        self.statistics.increment("op_head")
        try:
            stat = os.stat(path.key)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not os.path.isfile(path.key):
            return None
        return FileStatus(path, stat.st_size, stat.st_mtime)

    def list_child_dirs(self, directory: StorePath) -> list[str]:
        """Empty directories included: on local disk a job's empty work dirs are leftovers too."""
        self.statistics.increment("op_list")
        try:
            with os.scandir(directory.key) as entries:
                return sorted(
                    e.name for e in entries if e.is_dir(follow_symlinks=False) and e.name != UPLOADS_DIR
                )
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_files(self, directory: StorePath) -> Iterator[FileStatus]:
        """Every file under `directory` in key order, as S3 lists keys: a sorted walk in which a
        directory sorts as its name and a slash. A directory's names are sorted through a spool,
        so a directory of a million files is listed in bounded memory too."""
        self.statistics.increment("op_list")
        root = directory.key
        if not os.path.isdir(root):
            return
        for full in _sorted_walk(root):
            try:
                stat = os.stat(full)
            except FileNotFoundError:
                continue
            yield FileStatus(StorePath("file", "", full), stat.st_size, stat.st_mtime)

    def delete(self, path: StorePath) -> None:
        self.statistics.increment("op_delete")
        try:
            os.unlink(path.key)
        except (FileNotFoundError, NotADirectoryError):
            return

    def delete_tree(self, directory: StorePath) -> int:
        count = sum(1 for _ in self.list_files(directory))
        shutil.rmtree(directory.key, ignore_errors=True)
        self.statistics.increment("op_delete")
        parent = os.path.dirname(directory.key.rstrip("/"))
        if os.path.basename(parent).startswith("_"):
            _remove_if_empty(parent)
        return count

    def rename_file(self, source: StorePath, dest: StorePath) -> None:
        """The source is checked before the destination's folders are made: a rename that cannot
        happen (a late attempt's, whose work its job's cleanup removed) makes no folder."""
        self.statistics.increment("op_rename")
        if not os.path.isfile(source.key):
            raise FileNotFoundInStoreError(f"rename source does not exist: {source}")
        os.makedirs(os.path.dirname(dest.key), exist_ok=True)
        try:
            os.replace(source.key, dest.key)
        except FileNotFoundError as error:
            raise FileNotFoundInStoreError(f"rename source does not exist: {source}") from error

    def directory_exists(self, directory: StorePath) -> bool:
        self.statistics.increment("op_head")
        return os.path.isdir(directory.key)

    def rename_directory(self, source: StorePath, dest: StorePath) -> None:
        """``RENAME_NOREPLACE`` refuses anything at `dest` in the kernel. Without renameat2 (another
        OS, an old C library) `dest` is checked first, and rename(2) would replace an empty folder
        made there between the check and the rename."""
        self.statistics.increment("op_rename")
        if not os.path.isdir(source.key):
            raise FileNotFoundInStoreError(f"rename source folder does not exist: {source}")
        os.makedirs(os.path.dirname(dest.key), exist_ok=True)
        try:
            if renameat2.renameat2(source.key, dest.key, renameat2.RENAME_NOREPLACE):
                return
            if os.path.lexists(dest.key):
                raise FileExistsError(errno.EEXIST, "exists", dest.key)
            os.rename(source.key, dest.key)
        except FileNotFoundError as error:
            raise FileNotFoundInStoreError(f"rename source folder does not exist: {source}") from error
        except OSError as error:
            if error.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise FileAlreadyExistsError(f"rename destination already exists: {dest}") from error
            raise

    def exchange_directories(self, first: StorePath, second: StorePath) -> bool:
        """One ``RENAME_EXCHANGE``: each path holds one of the two folders whole at every moment."""
        for directory in (first, second):
            if not os.path.isdir(directory.key):
                raise FileNotFoundInStoreError(f"no folder to exchange at {directory}")
        self.statistics.increment("op_rename")
        try:
            return renameat2.renameat2(first.key, second.key, renameat2.RENAME_EXCHANGE)
        except FileNotFoundError as error:
            raise FileNotFoundInStoreError(f"no folder to exchange at {first} or {second}") from error

    def prepare_directory(self, directory: StorePath) -> None:
        os.makedirs(directory.key, exist_ok=True)

    def remove_empty_dirs(self, directory: StorePath, root: StorePath) -> None:
        """rmdir(2) refuses a directory that holds anything, so a file or folder another writer
        put there meanwhile keeps it and every parent; a missing one is passed over. Writers here
        retry a parent removed under them (`_hidden_temp_file`)."""
        current = directory
        while current.is_under(root):
            try:
                os.rmdir(current.key)
            except FileNotFoundError:
                pass
            except OSError:
                return
            current = current.parent

    # Emulated multipart uploads ----------------------------------------------------------------
    def _upload_dir(self, path: StorePath, upload_id: str) -> str:
        return os.path.join(os.path.dirname(path.key), UPLOADS_DIR, upload_id)

    def _existing_upload_dir(self, path: StorePath, upload_id: str) -> str:
        upload_dir = self._upload_dir(path, upload_id)
        meta = os.path.join(upload_dir, _UPLOAD_META)
        try:
            with open(meta, encoding="utf-8") as handle:
                recorded = json.load(handle)["key"]
        except (FileNotFoundError, NotADirectoryError) as error:
            raise NoSuchUploadError(f"no such upload {upload_id} for {path}") from error
        if recorded != path.key:
            raise NoSuchUploadError(f"upload {upload_id} is for {recorded}, not {path}")
        return upload_dir

    def create_multipart_upload(self, path: StorePath) -> str:
        self.statistics.increment("op_multipart_initiate")
        upload_id = uuid.uuid4().hex
        upload_dir = self._upload_dir(path, upload_id)
        os.makedirs(upload_dir)
        with open(os.path.join(upload_dir, _UPLOAD_META), "w", encoding="utf-8") as handle:
            json.dump({"key": path.key, "initiated": time.time()}, handle)
        return upload_id

    def upload_part(self, path: StorePath, upload_id: str, part_number: int, data: bytes) -> str:
        self.statistics.increment("op_multipart_part")
        self.statistics.increment("bytes_uploaded", len(data))
        upload_dir = self._existing_upload_dir(path, upload_id)
        part_file = os.path.join(upload_dir, f"part-{part_number:05d}")
        with open(part_file + ".tmp", "wb") as handle:
            handle.write(data)
        os.replace(part_file + ".tmp", part_file)
        return f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'

    def complete_multipart_upload(self, path: StorePath, upload_id: str, etags: list[str]) -> str:
        self.statistics.increment("op_multipart_complete")
        upload_dir = self._existing_upload_dir(path, upload_id)
        digests = []
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=upload_dir)
        with os.fdopen(fd, "wb") as out:
            for number, etag in enumerate(etags, start=1):
                part_file = os.path.join(upload_dir, f"part-{number:05d}")
                try:
                    with open(part_file, "rb") as part:
                        data = part.read()
                except FileNotFoundError as error:
                    os.unlink(tmp)
                    raise NoSuchUploadError(
                        f"part {number} missing from upload {upload_id} for {path}"
                    ) from error
                digest = hashlib.md5(data, usedforsecurity=False)
                if f'"{digest.hexdigest()}"' != etag:
                    os.unlink(tmp)
                    raise NoSuchUploadError(
                        f"part {number} of upload {upload_id} for {path} has a different ETag"
                    )
                digests.append(digest.digest())
                out.write(data)
        os.replace(tmp, path.key)
        _remove_upload_dir(upload_dir)
        return f'"{hashlib.md5(b"".join(digests), usedforsecurity=False).hexdigest()}-{len(etags)}"'

    def abort_multipart_upload(self, path: StorePath, upload_id: str) -> None:
        self.statistics.increment("op_multipart_abort")
        _remove_upload_dir(self._existing_upload_dir(path, upload_id))

    def list_multipart_uploads(self, directory: StorePath) -> Iterator[PendingUpload]:
        self.statistics.increment("op_multipart_list")
        root = directory.key
        if not os.path.isdir(root):
            return
        for uploads_root in _uploads_dirs(root):
            try:
                upload_ids = sorted(os.listdir(uploads_root))
            except FileNotFoundError:  # its last upload finished or was aborted since the walk saw it
                continue
            for upload_id in upload_ids:
                try:
                    with open(
                        os.path.join(uploads_root, upload_id, _UPLOAD_META), encoding="utf-8"
                    ) as handle:
                        meta = json.load(handle)
                except (FileNotFoundError, NotADirectoryError):
                    continue
                yield PendingUpload(StorePath("file", "", meta["key"]), upload_id, meta["initiated"])

    def list_parts(self, path: StorePath, upload_id: str) -> list[UploadedPart]:
        self.statistics.increment("op_list_parts")
        upload_dir = self._existing_upload_dir(path, upload_id)
        parts = []
        for name in sorted(os.listdir(upload_dir)):
            if name.startswith("part-") and not name.endswith(".tmp"):
                with open(os.path.join(upload_dir, name), "rb") as handle:
                    data = handle.read()
                etag = f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"'
                parts.append(UploadedPart(int(name[5:]), etag, len(data)))
        return parts


def _sorted_walk(directory: str) -> Iterator[str]:
    """The paths of the files under `directory` in key order. Like `os.walk`, symbolic links to
    directories are not followed; the hidden uploads directories are skipped."""
    try:
        scan = os.scandir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return
    with scan:
        names = spooled(
            (_listing_record(entry) for entry in scan if entry.name != UPLOADS_DIR), prefix="local-listing-"
        )
    with names:
        for _order, name, kind in names:
            if kind == _DIRECTORY:
                yield from _sorted_walk(os.path.join(directory, name))
            elif kind == _FILE:
                yield os.path.join(directory, name)


_FILE, _DIRECTORY, _LINKED_DIRECTORY = 0, 1, 2


def _uploads_dirs(directory: str) -> Iterator[str]:
    """The hidden uploads directories under `directory`. Unlike `os.walk`, which lists every
    directory's file names whole (a destination's million committed files: +88 MB at job cleanup),
    a directory is scanned holding only the names of its subdirectories; symbolic links to
    directories are not followed."""
    pending = [directory]
    while pending:
        current = pending.pop()
        try:
            scan = os.scandir(current)
        except (FileNotFoundError, NotADirectoryError):
            continue
        found = None
        with scan:  # closed before yielding: a caller may stop at the first upload
            for entry in scan:
                try:
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                except OSError:
                    continue
                if entry.name == UPLOADS_DIR:
                    found = entry.path
                else:
                    pending.append(entry.path)
        if found is not None:
            yield found


def _listing_record(entry: os.DirEntry[str]) -> tuple[bytes, str, int]:
    """(key order, name, kind) of a directory entry: a directory sorts as its name and a slash."""
    try:
        is_dir = entry.is_dir()
    except OSError:
        is_dir = False
    if not is_dir:
        return key_order(entry.name), entry.name, _FILE
    return key_order(entry.name + "/"), entry.name, _LINKED_DIRECTORY if entry.is_symlink() else _DIRECTORY


def _hidden_temp_file(path: StorePath) -> tuple[int, str]:
    """A temp file beside `path`, inside the hidden uploads directory so listings never see it."""
    directory = os.path.join(os.path.dirname(path.key), UPLOADS_DIR)
    while True:
        try:
            os.makedirs(directory, exist_ok=True)
            return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        except (FileNotFoundError, FileExistsError):
            # A concurrent writer removed the emptied directory between our calls (makedirs raises
            # FileExistsError when it disappears between its mkdir and its isdir check): retry.
            if os.path.lexists(directory) and not os.path.isdir(directory):
                raise


def _remove_if_empty(directory: str) -> None:
    try:
        os.rmdir(directory)
    except OSError:
        return


def _remove_upload_dir(upload_dir: str) -> None:
    """Remove a finished upload and its `.__uploads__` parent once that is empty."""
    shutil.rmtree(upload_dir, ignore_errors=True)
    _remove_if_empty(os.path.dirname(upload_dir))
