"""An in-process stand-in for the boto3 S3 client, for measuring the memory of a 100k-file job commit.

`S3Store(client=FakeS3Client(...))` runs every line of the store and of the committers; only the
server is replaced. It answers the calls S3Store makes, with S3's shapes (1000-key listing pages
as lists of dicts, 404/412 ClientErrors, multipart upload IDs). To keep its own memory out of the
measurement it never holds large bodies (only objects under `KEEP_BYTES` are kept; bigger ones
are read through in chunks, as botocore streams a file body, and only their size is kept), and
deletes are no-ops (freeing memory mid-measurement would hide the committer's growth). Its
objects can be saved to and loaded from a pickle, so the job is prepared in another process.
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
    ):
        # (bucket, key) -> body (small objects) or size (large ones); keys sorted per bucket
        self.objects: dict[tuple[str, str], bytes | int] = objects or {}
        #: Pending multipart uploads: upload ID -> (bucket, key), as job commit lists them.
        self.uploads: dict[str, tuple[str, str]] = uploads or {}
        self._keys: dict[str, list[str]] = {}
        for bucket, key in sorted(self.objects):
            self._keys.setdefault(bucket, []).append(key)
        self._lock = threading.Lock()

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
                bisect.insort(self._keys.setdefault(bucket, []), key)
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
        self, Bucket: str, Prefix: str = "", ContinuationToken: str | None = None, MaxKeys: int = PAGE
    ) -> dict:
        keys = self._keys.get(Bucket, [])
        start = (
            bisect.bisect_right(keys, ContinuationToken)
            if ContinuationToken
            else bisect.bisect_left(keys, Prefix)
        )
        page: list[dict[str, Any]] = []
        index = start
        while index < len(keys) and len(page) < MaxKeys and keys[index].startswith(Prefix):
            key = keys[index]
            value = self.objects.get((Bucket, key), b"")
            size = len(value) if isinstance(value, bytes) else value
            page.append(
                {
                    "Key": key,
                    "LastModified": _MTIME,
                    "ETag": '"fake"',
                    "Size": size,
                    "StorageClass": "STANDARD",
                }
            )
            index += 1
        more = index < len(keys) and keys[index].startswith(Prefix)
        result: dict[str, Any] = {"Contents": page, "IsTruncated": more, "KeyCount": len(page)}
        if more:
            result["NextContinuationToken"] = page[-1]["Key"]
        return result

    def delete_object(self, Bucket: str, Key: str) -> dict:
        return {}

    def delete_objects(self, Bucket: str, Delete: dict) -> dict:
        return {"Deleted": [], "Errors": []}

    # Multipart uploads ----------------------------------------------------------------------
    def create_multipart_upload(self, Bucket: str, Key: str) -> dict:
        upload_id = uuid.uuid4().hex
        with self._lock:
            self.uploads[upload_id] = (Bucket, Key)
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

    def list_multipart_uploads(self, Bucket: str, Prefix: str = "", **_: Any) -> dict:
        """Every pending upload under `Prefix` in one page."""
        with self._lock:
            pending = sorted(
                (key, upload) for upload, (bucket, key) in self.uploads.items() if bucket == Bucket
            )
        uploads = [
            {"Key": key, "UploadId": upload, "Initiated": _MTIME}
            for key, upload in pending
            if key.startswith(Prefix)
        ]
        return {"Uploads": uploads, "IsTruncated": False}

    def close(self) -> None:
        return None
