"""An in-process stand-in for the boto3 S3 client, for measuring memory past 100k files or uploads.

`S3Store(client=FakeS3Client(...))` runs every line of the store and of the committers; only the
server is replaced. It answers the calls S3Store makes, with S3's shapes (1000-key listing pages
in key order and 1000-upload pages of pending uploads in key then upload order, as lists of dicts;
one-level listings with a delimiter; 404/412 ClientErrors, multipart upload IDs). To keep its own memory out of the measurement it
keeps no data bodies: a data file's body is read through in chunks, as botocore streams a file
body, and only its size is kept (a read serves that many zeros). Every body the protocol reads
back is kept whole (`keeps_body`: job directories, records, lists, `_SUCCESS`, manifests and
pendingsets, whatever their size: a 5,000-file pendingset is about 3.7 MB). Deletes are no-ops
unless asked for (freeing memory mid-measurement would hide the committer's growth; a cleanup's
measurement asks, `deletes=True`). Its objects can be saved to and loaded from a pickle, so the
job is prepared in another process.
"""

from __future__ import annotations

import bisect
import io
import pickle
import threading
import uuid
from datetime import datetime, timezone
from typing import Any

from botocore.exceptions import ClientError

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


def _error(code: str, status: int, operation: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )


class FakeS3Client:
    def __init__(
        self,
        objects: dict[tuple[str, str], bytes | int] | None = None,
        uploads: dict[str, tuple[str, str]] | None = None,
        *,
        deletes: bool = False,
    ):
        # (bucket, key) -> body (protocol files) or size (data files)
        self.objects: dict[tuple[str, str], bytes | int] = objects or {}
        #: Whether deletes take effect (a cleanup's measurement checks what it deleted); by default
        #: they are no-ops, for the reason in the module docstring. A deleted key stays in the sorted
        #: view until something new is created, and listings skip it.
        self.deletes = deletes
        #: Pending multipart uploads: upload ID -> (bucket, key), as job commit lists them.
        self.uploads: dict[str, tuple[str, str]] = uploads or {}
        self._lock = threading.Lock()
        # Sorted views for listings, made again only after something new was created (sorting once
        # per listing instead of inserting in order: a million inserts into a sorted list take minutes).
        self._keys: dict[str, list[str]] | None = None
        self._upload_keys: dict[str, list[tuple[str, str]]] | None = None
        # The views of what it starts with are made now, before anything is measured: a
        # measurement then counts only what the code under test makes (any bucket builds them all).
        self._sorted_keys("")
        self._sorted_uploads("")

    # Persistence ------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        with open(path, "wb") as handle:
            pickle.dump((self.objects, self.uploads), handle, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def load(cls, path: str) -> FakeS3Client:
        with open(path, "rb") as handle:
            return cls(*pickle.load(handle))

    # Objects ----------------------------------------------------------------------------------
    def _store(self, bucket: str, key: str, value: bytes | int) -> None:
        with self._lock:
            if (bucket, key) not in self.objects:
                self._keys = None
            self.objects[(bucket, key)] = value

    def _sorted_keys(self, bucket: str) -> list[str]:
        with self._lock:
            if self._keys is None:
                self._keys = {}
                for owner, key in sorted(self.objects):
                    self._keys.setdefault(owner, []).append(key)
            return self._keys.get(bucket, [])

    def _sorted_uploads(self, bucket: str) -> list[tuple[str, str]]:
        """(key, upload ID) of every upload created, sorted; those since completed or aborted stay
        in it (removing one from the middle of a million costs a copy) and listings skip them."""
        with self._lock:
            if self._upload_keys is None:
                self._upload_keys = {}
                for upload, (owner, key) in self.uploads.items():
                    self._upload_keys.setdefault(owner, []).append((key, upload))
                for listed in self._upload_keys.values():
                    listed.sort()
            return self._upload_keys.get(bucket, [])

    def put_object(self, Bucket: str, Key: str, Body: Any, IfNoneMatch: str | None = None) -> dict:
        if IfNoneMatch == "*" and (Bucket, Key) in self.objects:
            raise _error("PreconditionFailed", 412, "PutObject")
        keep = keeps_body(Key)
        if isinstance(Body, (bytes, bytearray, memoryview)):
            value: bytes | int = bytes(Body) if keep else len(Body)
        else:
            chunks, size = [], 0
            while chunk := Body.read(256 * 1024):
                size += len(chunk)
                if keep:
                    chunks.append(chunk)
            value = b"".join(chunks) if keep else size
        self._store(Bucket, Key, value)
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
        keys = self._sorted_keys(Bucket)
        if Delimiter is not None:
            return self._list_level(Bucket, keys, Prefix, Delimiter)
        start = (
            bisect.bisect_right(keys, ContinuationToken)
            if ContinuationToken
            else bisect.bisect_left(keys, Prefix)
        )
        page: list[dict[str, Any]] = []
        index = start
        more = False  # another key follows a full page (a deleted key does not count)
        while index < len(keys) and keys[index].startswith(Prefix):
            if (Bucket, keys[index]) in self.objects:
                if len(page) == MaxKeys:
                    more = True
                    break
                page.append(self._entry(Bucket, keys[index]))
            index += 1
        result: dict[str, Any] = {"Contents": page, "IsTruncated": more, "KeyCount": len(page)}
        if more:
            result["NextContinuationToken"] = page[-1]["Key"]
        return result

    def _list_level(self, bucket: str, keys: list[str], prefix: str, delimiter: str) -> dict:
        """One level under `prefix` in one page: its keys, and each directory once. The keys below
        a directory are skipped, so a million files below cost one step per directory."""
        contents: list[dict[str, Any]] = []
        directories: list[dict[str, str]] = []
        index = bisect.bisect_left(keys, prefix)
        while index < len(keys) and keys[index].startswith(prefix):
            rest = keys[index][len(prefix) :]
            cut = rest.find(delimiter)
            if cut < 0:
                if (bucket, keys[index]) in self.objects:
                    contents.append(self._entry(bucket, keys[index]))
                index += 1
            else:
                directory = prefix + rest[: cut + len(delimiter)]
                directories.append({"Prefix": directory})
                index = bisect.bisect_left(keys, directory + "\U0010ffff")
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

    def delete_object(self, Bucket: str, Key: str) -> dict:
        if self.deletes:
            self.objects.pop((Bucket, Key), None)
        return {}

    def delete_objects(self, Bucket: str, Delete: dict) -> dict:
        if self.deletes:
            for entry in Delete["Objects"]:
                self.objects.pop((Bucket, entry["Key"]), None)
        return {"Deleted": [], "Errors": []}

    # Multipart uploads ----------------------------------------------------------------------
    def create_multipart_upload(self, Bucket: str, Key: str) -> dict:
        upload_id = uuid.uuid4().hex
        with self._lock:
            self.uploads[upload_id] = (Bucket, Key)
            self._upload_keys = None
        return {"UploadId": upload_id}

    def upload_part(self, Bucket: str, Key: str, UploadId: str, PartNumber: int, Body: Any) -> dict:
        return {"ETag": f'"{uuid.uuid4().hex}"'}

    def complete_multipart_upload(self, Bucket: str, Key: str, UploadId: str, MultipartUpload: dict) -> dict:
        with self._lock:
            self.uploads.pop(UploadId, None)
        return {"ETag": '"fake-mpu"'}

    def abort_multipart_upload(self, Bucket: str, Key: str, UploadId: str) -> dict:
        with self._lock:
            self.uploads.pop(UploadId, None)
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
        listed = self._sorted_uploads(Bucket)
        if KeyMarker is None:
            index = bisect.bisect_left(listed, (Prefix, ""))
        elif UploadIdMarker is None:  # AWS: uploads of keys after the key marker
            index = bisect.bisect_left(listed, (KeyMarker + "\0", ""))
        else:
            index = bisect.bisect_right(listed, (KeyMarker, UploadIdMarker))
        page: list[dict[str, Any]] = []
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
