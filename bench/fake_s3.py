"""An in-process stand-in for the boto3 S3 client, for measuring memory past 100k files or uploads.

`S3Store(client=FakeS3Client(...))` runs every line of the store and of the committers; only the
server is replaced. It answers the calls S3Store makes, with S3's shapes (1000-key listing pages
in key order and 1000-upload pages of pending uploads in key then upload order, as lists of dicts;
404/412 ClientErrors, multipart upload IDs). To keep its own memory out of the measurement it
keeps no data bodies: a data file's body is read through in chunks, as botocore streams a file
body, and only its size is kept (a read serves that many zeros). Every body the protocol reads
back is kept whole (`keeps_body`: job directories, records, lists, `_SUCCESS`, manifests and
pendingsets, whatever their size: a 5,000-file pendingset is about 3.7 MB), whether it goes up in
one PutObject or, past the store's multipart threshold (64 MiB), as a multipart upload. A completed
data upload is not listed afterwards: a million completed objects would add the stand-in's own
memory to the job commit it measures. Deletes are no-ops (freeing memory mid-measurement would
hide the committer's growth) unless asked for (a cleanup's measurement asks, `deletes=True`). It
answers one-level listings with a delimiter too. Its objects can be saved to and loaded from a pickle, so the job is
prepared in another process.
"""

from __future__ import annotations

import io
import pickle
import threading
import uuid
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from botocore.exceptions import ClientError
from sortedcontainers import SortedList

PAGE = 1000
#: Directories whose files the protocol reads back: Hadoop's and our job directories, and our records
#: (outcomes, job records, the file and partition lists).
_PROTOCOL_DIRS = ("_temporary/", "__magic_job-", "_airflow_commit/")
#: Files the protocol reads back wherever they are: markers, manifests, pendingsets, lists.
_PROTOCOL_SUFFIXES = ("/_SUCCESS", ".json", ".pending", ".pendingset", ".parquet")
_MTIME = datetime(2026, 1, 1, tzinfo=timezone.utc)


def keeps_body(key: str) -> bool:
    """Whether the protocol may read `key` back, so its body must be kept: all but data files."""
    return any(f"/{part}" in f"/{key}" for part in _PROTOCOL_DIRS) or f"/{key}".endswith(_PROTOCOL_SUFFIXES)


def _body(body: Any, keep: bool) -> bytes | int:
    """What the stand-in keeps of a request body: the bytes of a protocol file, else its size (a
    stream is read through in chunks, as botocore streams a file body)."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body) if keep else len(body)
    chunks, size = [], 0
    while chunk := body.read(256 * 1024):
        size += len(chunk)
        if keep:
            chunks.append(chunk)
    return b"".join(chunks) if keep else size


def _sorted_by_bucket(items: Iterable[tuple[str, Any]]) -> dict[str, SortedList]:
    """(bucket, item) pairs as one sorted list of items per bucket, each sorted once."""
    grouped: dict[str, list[Any]] = {}
    for bucket, item in items:
        grouped.setdefault(bucket, []).append(item)
    return {bucket: SortedList(listed) for bucket, listed in grouped.items()}


def _error(code: str, status: int, operation: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )


class FakeS3Client:
    def __init__(
        self,
        objects: dict[tuple[str, str], bytes | int] | None = None,
        uploads: dict[str, tuple[str, str]] | None = None,
        parts: dict[str, dict[int, bytes]] | None = None,
        *,
        deletes: bool = False,
    ):
        # (bucket, key) -> body (protocol files) or size (data files)
        self.objects: dict[tuple[str, str], bytes | int] = objects or {}
        #: Pending multipart uploads: upload ID -> (bucket, key), as job commit lists them.
        self.uploads: dict[str, tuple[str, str]] = uploads or {}
        #: Parts of pending uploads of protocol files (`keeps_body`): upload ID -> part number -> body.
        self.parts: dict[str, dict[int, bytes]] = parts or {}
        #: Whether deletes take effect (a cleanup's measurement checks what it deleted); by default
        #: they are no-ops, for the reason in the module docstring.
        self.deletes = deletes
        self._lock = threading.Lock()
        # Keys and uploads in listing order per bucket, made when the client is (before a measured
        # commit starts), each new one inserted in O(log n): sorting all keys again at each listing
        # after a create took about 10k sorts of 1M keys in a million-file magic job's tasks, and a
        # plain list's insort moves every later key.
        self._keys = _sorted_by_bucket(self.objects)
        self._upload_keys = _sorted_by_bucket(
            (bucket, (key, upload)) for upload, (bucket, key) in self.uploads.items()
        )

    # Persistence ------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        with open(path, "wb") as handle:
            pickle.dump((self.objects, self.uploads, self.parts), handle, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def load(cls, path: str) -> FakeS3Client:
        with open(path, "rb") as handle:
            return cls(*pickle.load(handle))

    # Objects ----------------------------------------------------------------------------------
    def _store(self, bucket: str, key: str, value: bytes | int) -> None:
        with self._lock:
            if (bucket, key) not in self.objects:
                self._keys.setdefault(bucket, SortedList()).add(key)
            self.objects[(bucket, key)] = value

    def put_object(self, Bucket: str, Key: str, Body: Any, IfNoneMatch: str | None = None) -> dict:
        if IfNoneMatch == "*" and (Bucket, Key) in self.objects:
            raise _error("PreconditionFailed", 412, "PutObject")
        self._store(Bucket, Key, _body(Body, keeps_body(Key)))
        return {"ETag": '"fake"'}

    def get_object(self, Bucket: str, Key: str, Range: str | None = None) -> dict:
        value = self.objects.get((Bucket, Key))
        if value is None:
            raise _error("NoSuchKey", 404, "GetObject")
        body = value if isinstance(value, bytes) else b"\0" * value
        if Range is not None:  # "bytes=first-last", as a size-bounded read asks
            first, last = (int(bound) for bound in Range.removeprefix("bytes=").split("-"))
            body = body[first : last + 1]
        return {"Body": io.BytesIO(body)}

    def head_object(self, Bucket: str, Key: str) -> dict:
        value = self.objects.get((Bucket, Key))
        if value is None:
            raise _error("404", 404, "HeadObject")
        size = len(value) if isinstance(value, bytes) else value
        return {"ContentLength": size, "LastModified": _MTIME, "ETag": '"fake"'}

    def list_objects_v2(
        self,
        Bucket: str,
        Prefix: str = "",
        ContinuationToken: str | None = None,
        MaxKeys: int = PAGE,
        Delimiter: str | None = None,
    ) -> dict:
        page: list[dict[str, Any]] = []
        with self._lock:  # a key created meanwhile would shift the positions read
            keys = self._keys.get(Bucket, SortedList())
            if Delimiter is not None:
                return self._list_level(Bucket, keys, Prefix, Delimiter)
            index = keys.bisect_right(ContinuationToken) if ContinuationToken else keys.bisect_left(Prefix)
            while index < len(keys) and len(page) < MaxKeys and keys[index].startswith(Prefix):
                page.append(self._entry(Bucket, keys[index]))
                index += 1
            more = index < len(keys) and keys[index].startswith(Prefix)
        result: dict[str, Any] = {"Contents": page, "IsTruncated": more, "KeyCount": len(page)}
        if more:
            result["NextContinuationToken"] = page[-1]["Key"]
        return result

    def _list_level(self, bucket: str, keys: SortedList, prefix: str, delimiter: str) -> dict:
        """One level under `prefix` in one page: its keys, and each directory once. The keys below
        a directory are skipped, so a million files below cost one step per directory."""
        contents: list[dict[str, Any]] = []
        directories: list[dict[str, str]] = []
        index = keys.bisect_left(prefix)
        while index < len(keys) and keys[index].startswith(prefix):
            rest = keys[index][len(prefix) :]
            cut = rest.find(delimiter)
            if cut < 0:
                contents.append(self._entry(bucket, keys[index]))
                index += 1
            else:
                directory = prefix + rest[: cut + len(delimiter)]
                directories.append({"Prefix": directory})
                index = keys.bisect_left(directory + "\U0010ffff")
        return {
            "Contents": contents,
            "CommonPrefixes": directories,
            "IsTruncated": False,
            "KeyCount": len(contents) + len(directories),
        }

    def _entry(self, bucket: str, key: str) -> dict[str, Any]:
        value = self.objects.get((bucket, key), b"")
        size = len(value) if isinstance(value, bytes) else value
        return {
            "Key": key,
            "LastModified": _MTIME,
            "ETag": '"fake"',
            "Size": size,
            "StorageClass": "STANDARD",
        }

    def _delete(self, bucket: str, key: str) -> None:
        if self.deletes:
            with self._lock:
                if self.objects.pop((bucket, key), None) is not None:
                    self._keys[bucket].discard(key)

    def delete_object(self, Bucket: str, Key: str) -> dict:
        self._delete(Bucket, Key)
        return {}

    def delete_objects(self, Bucket: str, Delete: dict) -> dict:
        for entry in Delete["Objects"]:
            self._delete(Bucket, entry["Key"])
        return {"Deleted": [], "Errors": []}

    def get_bucket_lifecycle_configuration(self, Bucket: str) -> dict:
        """A bucket with no lifecycle rules, as S3 answers for one (job setup reads them once)."""
        raise _error("NoSuchLifecycleConfiguration", 404, "GetBucketLifecycleConfiguration")

    # Multipart uploads ----------------------------------------------------------------------
    def create_multipart_upload(self, Bucket: str, Key: str) -> dict:
        upload_id = uuid.uuid4().hex
        with self._lock:
            self.uploads[upload_id] = (Bucket, Key)
            # Completed or aborted uploads stay in it, and listings skip them (freeing memory
            # mid-measurement would hide the committer's growth, as deletes would).
            self._upload_keys.setdefault(Bucket, SortedList()).add((Key, upload_id))
        return {"UploadId": upload_id}

    def upload_part(self, Bucket: str, Key: str, UploadId: str, PartNumber: int, Body: Any) -> dict:
        body = _body(Body, keeps_body(Key))
        if isinstance(body, bytes):
            with self._lock:
                self.parts.setdefault(UploadId, {})[PartNumber] = body
        return {"ETag": f'"{uuid.uuid4().hex}"'}

    def complete_multipart_upload(self, Bucket: str, Key: str, UploadId: str, MultipartUpload: dict) -> dict:
        with self._lock:
            self.uploads.pop(UploadId, None)
            parts = self.parts.pop(UploadId, None)
        if parts is not None:  # a protocol file (a large `_SUCCESS` or list): the object appears
            self._store(Bucket, Key, b"".join(parts[part["PartNumber"]] for part in MultipartUpload["Parts"]))
        return {"ETag": '"fake-mpu"'}

    def abort_multipart_upload(self, Bucket: str, Key: str, UploadId: str) -> dict:
        with self._lock:
            self.uploads.pop(UploadId, None)
            self.parts.pop(UploadId, None)
        return {}

    def list_parts(self, Bucket: str, Key: str, UploadId: str, **_: Any) -> dict:
        return {"Parts": [], "IsTruncated": False}

    def list_multipart_uploads(
        self,
        Bucket: str,
        Prefix: str = "",
        KeyMarker: str | None = None,
        UploadIdMarker: str | None = None,
        MaxUploads: int = PAGE,
        **_: Any,
    ) -> dict:
        """Pending uploads under `Prefix` after the markers, a page at a time, in key then upload
        ID order (AWS orders a key's uploads by initiation time; IDs will do here)."""
        page: list[dict[str, Any]] = []
        with self._lock:  # an upload created meanwhile would shift the positions read
            listed = self._upload_keys.get(Bucket, SortedList())
            if KeyMarker is None:
                index = listed.bisect_left((Prefix, ""))
            elif UploadIdMarker is None:  # AWS: uploads of keys after the key marker
                index = listed.bisect_left((KeyMarker + "\0", ""))
            else:
                index = listed.bisect_right((KeyMarker, UploadIdMarker))
            while index < len(listed) and listed[index][0].startswith(Prefix):
                key, upload = listed[index]
                if upload in self.uploads:
                    if len(page) == MaxUploads:
                        last = page[-1]
                        return {
                            "Uploads": page,
                            "IsTruncated": True,
                            "NextKeyMarker": last["Key"],
                            "NextUploadIdMarker": last["UploadId"],
                        }
                    page.append({"Key": key, "UploadId": upload, "Initiated": _MTIME})
                index += 1
        return {"Uploads": page, "IsTruncated": False}

    def close(self) -> None:
        return None
