"""The request paths for S3's hot, repetitive calls, and the name that chooses between them.

Job commit completes one upload per file and reads one manifest per task, cleanup aborts one
upload per orphan, and tasks send a part or an object per write: thousands of identical small
requests, where botocore's own CPU per request
(1.5-2.5 ms, under one GIL) rather than the store bounds the rate. `HotRequests` is the narrow
interface for exactly those calls. `Boto3HotRequests` sends them through the boto3 client;
`airflow_commit_provider.core.store.s3_crt.CrtHotRequests` through AWS's CRT, which signs, sends
and retries from native threads. Both raise botocore's exceptions for the same responses, so
`S3Store` maps errors once, whichever path is in use.

The choice is `S3Store(request_path=...)`, else the environment variable `REQUEST_PATH_ENV`:
``auto`` (the default) takes the CRT when `awscrt` is installed (``pip install
'airflow-commit-provider[crt]'``), ``crt`` requires it, ``boto3`` never uses it. `S3Store` makes
the path it names: `s3_crt` imports this module, so this module never imports `s3_crt`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, BinaryIO, Protocol, cast

from airflow_commit_provider.core.parallel import completed_future
from airflow_commit_provider.core.store.base import StoreError

#: The environment variable that picks the request path when `S3Store` is not told.
REQUEST_PATH_ENV = "AIRFLOW_COMMIT_S3_REQUEST_PATH"
REQUEST_PATHS = ("auto", "crt", "boto3")

Body = bytes | BinaryIO
ErrorMapper = Callable[[BaseException], BaseException]
"""What a failed request's future holds instead of botocore's exception (the store's own error)."""


class HotRequests(Protocol):
    """The calls sent thousands of times per job; each raises botocore exceptions.

    `start_*` return futures; where `pipelines` is true they are still in flight when returned.
    A failed one holds `errors(botocore's exception)`, mapped where it fails, so a caller that
    overlaps thousands of requests needs no second future per request to translate it.
    """

    name: str
    pipelines: bool

    def start_complete_multipart_upload(
        self, bucket: str, key: str, upload_id: str, etags: list[str], errors: ErrorMapper | None = None
    ) -> Future[str]: ...

    def start_abort_multipart_upload(
        self, bucket: str, key: str, upload_id: str, errors: ErrorMapper | None = None
    ) -> Future[None]: ...

    def complete_multipart_upload(self, bucket: str, key: str, upload_id: str, etags: list[str]) -> str: ...

    def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None: ...

    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int, body: bytes) -> str: ...

    def put_object(self, bucket: str, key: str, body: Body, size: int, *, if_absent: bool) -> None: ...

    def get_object(self, bucket: str, key: str, byte_range: str | None = None) -> bytes:
        """The object's bytes, or those of `byte_range` (an HTTP Range, ``bytes=0-99``)."""
        ...

    def close(self) -> None: ...


class Boto3HotRequests:
    """The hot calls through the boto3 client itself: the reference path, and the fallback."""

    name = "boto3"
    pipelines = False

    def __init__(self, client: Any) -> None:
        self._client = client

    def start_complete_multipart_upload(
        self, bucket: str, key: str, upload_id: str, etags: list[str], errors: ErrorMapper | None = None
    ) -> Future[str]:
        return completed_future(self.complete_multipart_upload, bucket, key, upload_id, etags, errors=errors)

    def start_abort_multipart_upload(
        self, bucket: str, key: str, upload_id: str, errors: ErrorMapper | None = None
    ) -> Future[None]:
        return completed_future(self.abort_multipart_upload, bucket, key, upload_id, errors=errors)

    def complete_multipart_upload(self, bucket: str, key: str, upload_id: str, etags: list[str]) -> str:
        parts = [{"ETag": etag, "PartNumber": number} for number, etag in enumerate(etags, start=1)]
        response = self._client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
        return cast(str, response.get("ETag", ""))

    def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        self._client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)

    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int, body: bytes) -> str:
        response = self._client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=part_number, Body=body
        )
        return cast(str, response["ETag"])

    def put_object(self, bucket: str, key: str, body: Body, size: int, *, if_absent: bool) -> None:
        extra = {"IfNoneMatch": "*"} if if_absent else {}
        self._client.put_object(Bucket=bucket, Key=key, Body=body, **extra)

    def get_object(self, bucket: str, key: str, byte_range: str | None = None) -> bytes:
        ranged = {"Range": byte_range} if byte_range else {}
        return cast(bytes, self._client.get_object(Bucket=bucket, Key=key, **ranged)["Body"].read())

    def close(self) -> None:
        """The client belongs to the store."""


def chosen_request_path(requested: str | None, environ: Mapping[str, str] | None = None) -> str:
    """`requested`, else the environment's choice, else ``auto``; an unknown name is an error."""
    environ = os.environ if environ is None else environ
    where = "request_path"
    if not requested:
        requested, where = environ.get(REQUEST_PATH_ENV) or "auto", REQUEST_PATH_ENV
    choice = requested.strip().lower()
    if choice not in REQUEST_PATHS:
        raise StoreError(
            f"{where}={requested!r}: the S3 request path must be one of {', '.join(REQUEST_PATHS)}"
        )
    return choice
