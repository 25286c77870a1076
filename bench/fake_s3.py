"""An in-process stand-in for the boto3 S3 client, for measuring memory past 100k files or uploads.

`S3Store(client=FakeS3Client(...))` runs every line of the store and of the committers; only the
server is replaced. It answers the calls S3Store makes, with S3's shapes (1000-key listing pages
and 1000-upload ListMultipartUploads pages as lists of dicts, one-level listings with a
delimiter, 404/412 ClientErrors, multipart upload IDs). To keep its own memory out of the
measurement it never holds large bodies (only objects under `KEEP_BYTES` are kept; bigger ones
are read through in chunks, as botocore streams a file body, and only their size is kept), and
deletes are no-ops unless asked for (freeing memory mid-measurement would hide the committer's
growth; a cleanup's measurement asks, `deletes=True`). Its objects can be saved to and loaded
from a pickle, so the job is prepared in another process.
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

KEEP_BYTES = 1024 * 1024
PAGE = 1000
_MTIME = datetime(2026, 1, 1, tzinfo=timezone.utc)


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
        # (bucket, key) -> body (small objects) or size (large ones); keys sorted per bucket
        self.objects: dict[tuple[str, str], bytes | int] = objects or {}
        #: Whether deletes take effect (a cleanup's measurement checks what it deleted); by default
        #: they are no-ops, for the reason in the module docstring. A deleted key stays in `_keys`
        #: (removing it from the sorted list costs a move of the list) and listings skip it.
        self.deletes = deletes
        #: Pending multipart uploads: upload ID -> (bucket, key), as job commit lists them.
        self.uploads: dict[str, tuple[str, str]] = uploads or {}
        self._keys: dict[str, list[str]] = {}
        for bucket, key in sorted(self.objects):
            self._keys.setdefault(bucket, []).append(key)
        self._lock = threading.Lock()
        #: (bucket, key, upload ID) of the pending uploads in listing order, made again after creates
        #: (so a million created at once are sorted once); aborted ones are skipped when listed.
        self._upload_index: list[tuple[str, str, str]] | None = None
        self._sorted_uploads()

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
            keys = self._keys.setdefault(bucket, [])
            position = bisect.bisect_left(keys, key)
            if position == len(keys) or keys[position] != key:  # new, not deleted and written again
                keys.insert(position, key)
            self.objects[(bucket, key)] = value

    def put_object(self, Bucket: str, Key: str, Body: Any, IfNoneMatch: str | None = None) -> dict:
        if IfNoneMatch == "*" and (Bucket, Key) in self.objects:
            raise _error("PreconditionFailed", 412, "PutObject")
        if isinstance(Body, (bytes, bytearray, memoryview)):
            size = len(Body)
            value: bytes | int = bytes(Body) if size <= KEEP_BYTES else size
        else:
            chunks, size = [], 0
            while chunk := Body.read(256 * 1024):
                size += len(chunk)
                if size <= KEEP_BYTES:
                    chunks.append(chunk)
            value = b"".join(chunks) if size <= KEEP_BYTES else size
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
        keys = self._keys.get(Bucket, [])
        if Delimiter is not None:
            return self._list_level(Bucket, keys, Prefix, Delimiter)
        start = (
            bisect.bisect_right(keys, ContinuationToken)
            if ContinuationToken
            else bisect.bisect_left(keys, Prefix)
        )
        page: list[dict[str, Any]] = []
        index = start
        while index < len(keys) and keys[index].startswith(Prefix):
            if (Bucket, keys[index]) in self.objects:
                if len(page) == MaxKeys:
                    break
                page.append(self._entry(Bucket, keys[index]))
            index += 1
        more = index < len(keys) and keys[index].startswith(Prefix)
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
            self._upload_index = None
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
        """Pending uploads under `Prefix` in (key, upload ID) order, `MaxUploads` a page, resumed
        after KeyMarker/UploadIdMarker as S3 pages them."""
        with self._lock:
            index = self._sorted_uploads()
            if KeyMarker is None:
                position = bisect.bisect_left(index, (Bucket, Prefix, ""))
            else:  # after the marker's upload, or after every upload of the marker's key
                position = bisect.bisect_right(index, (Bucket, KeyMarker, UploadIdMarker or "\U0010ffff"))
            page: list[dict[str, Any]] = []
            while position < len(index) and index[position][0] == Bucket:
                _bucket, key, upload = index[position]
                if not key.startswith(Prefix):
                    break
                if upload in self.uploads:
                    if len(page) == MaxUploads:
                        break
                    page.append({"Key": key, "UploadId": upload, "Initiated": _MTIME})
                position += 1
            more = (
                position < len(index)
                and index[position][0] == Bucket
                and index[position][1].startswith(Prefix)
            )
        result: dict[str, Any] = {"Uploads": page, "IsTruncated": more}
        if more:
            result |= {"NextKeyMarker": page[-1]["Key"], "NextUploadIdMarker": page[-1]["UploadId"]}
        return result

    def _sorted_uploads(self) -> list[tuple[str, str, str]]:
        if self._upload_index is None:
            self._upload_index = sorted(
                (bucket, key, upload) for upload, (bucket, key) in self.uploads.items()
            )
        return self._upload_index

    def close(self) -> None:
        return None
