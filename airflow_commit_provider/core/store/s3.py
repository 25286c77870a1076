"""The S3 store: boto3 calls behind the narrow `Store` interface.

S3 has no rename, so `rename_file` copies then deletes (never atomic); the committers that
are correct on S3 rely instead on `If-None-Match: *` and on multipart uploads, which stay
invisible until completed. Every request is counted in `statistics` so benchmarks can report
requests per committed file.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import math
import os
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from datetime import datetime
from typing import IO, Any, BinaryIO, cast
from urllib.parse import urlsplit, urlunsplit

import boto3
import botocore.session
import botocore.utils
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from airflow_commit_provider.core.paths import S3_SCHEMES, StorePath, same_path
from airflow_commit_provider.core.store.base import (
    FileAlreadyExistsError,
    FileNotFoundInStoreError,
    FileStatus,
    LifecycleNotReadableError,
    NoSuchUploadError,
    PendingUpload,
    Store,
    StoreCapabilities,
    StoreError,
    UploadedPart,
    check_range,
)
from airflow_commit_provider.core.store.check import chosen_conditional_create
from airflow_commit_provider.core.store.s3_requests import (
    Boto3HotRequests,
    ErrorMapper,
    HotRequests,
    chosen_request_path,
)
from airflow_commit_provider.core.store.settings import ENDPOINT_VARIABLES, UNSIGNED_SIGNATURE
from airflow_commit_provider.core.store.streams import PublishOnCloseStream

#: S3's limit on keys per DeleteObjects request.
DELETE_BATCH = 1000
#: Largest object CopyObject can copy in one request; bigger sources use a multipart copy.
MAX_SINGLE_COPY = 5 * 1024**3
#: Streams larger than this are uploaded as multipart uploads when closed.
MULTIPART_THRESHOLD = 64 * 1024**2
#: Part size for those uploads (at least S3_MIN_PART_SIZE).
STREAM_PART_SIZE = 16 * 1024**2
MAX_PARTS = 10_000
#: Bytes a write stream keeps in memory before spilling to a temporary file.
SPOOL_LIMIT = 8 * 1024**2
#: Bytes read from a GetObject response at a time by `S3Store.open_read`'s stream.
READ_BUFFER = 1 << 20
#: Attempts for a create-if-absent write that meets a concurrent conditional write (409).
CONDITIONAL_CONFLICT_ATTEMPTS = 4

#: The `botocore_config` options the CRT request path follows too.
CRT_FOLLOWS = frozenset({"retries", "max_pool_connections"})

log = logging.getLogger(__name__)

_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
#: How S3-compatible stores without lifecycle configuration answer GetBucketLifecycleConfiguration.
_NOT_SERVED = {"NotImplemented", "MethodNotAllowed", "501"}


class S3Store(Store):
    """A store over one S3 endpoint; any bucket it can reach.

    Configuration follows boto3: the endpoint comes from `endpoint_url` or `AWS_ENDPOINT_URL(_S3)`,
    credentials from the arguments, the profile or the default chain. The client is created on first
    use, so building a store never touches the network or the credential chain. `botocore_config`
    (botocore ``Config`` options, as the Amazon provider's argument of that name) wins over the
    store's own pool size, retries and addressing style.

    The hot calls (complete, abort, part, put) go by `request_path` (see
    :mod:`airflow_commit_provider.core.store.s3_requests`): through AWS's CRT when it is installed,
    else through the boto3 client. A client passed in is always used as it is. Job commit, task
    commit and abort send them through `commit_operations.CommitOperations`, whichever path it is.
    """

    capabilities = StoreCapabilities(
        atomic_rename=False,
        atomic_create_if_absent=True,
        multipart_upload=True,
        consistent_listing=True,
    )
    #: Write streams larger than this are published as multipart uploads of `part_size` parts.
    multipart_threshold = MULTIPART_THRESHOLD
    part_size = STREAM_PART_SIZE
    #: Entries per listing request; None leaves it to the server (1000 on AWS).
    list_page_size: int | None = None

    def __init__(
        self,
        *,
        max_pool_connections: int = 36,
        endpoint_url: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        region_name: str | None = None,
        profile_name: str | None = None,
        verify: bool | str | None = None,
        client: Any = None,
        request_path: str | None = None,
        conditional_create: str | None = None,
        botocore_config: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.request_path = "boto3" if client is not None else chosen_request_path(request_path)
        self.conditional_create = chosen_conditional_create(conditional_create)
        """``check`` (the default) or ``trusted``: see :mod:`airflow_commit_provider.core.store.check`."""
        self.max_pool_connections = max_pool_connections
        self.endpoint_url = endpoint_url
        self.region_name = region_name
        self.profile_name = profile_name
        self.verify = verify
        """TLS verification as boto3 takes it: False, a CA bundle path, or None for the default."""
        self._credentials = {
            "aws_access_key_id": aws_access_key_id,
            "aws_secret_access_key": aws_secret_access_key,
            "aws_session_token": aws_session_token,
        }
        self.botocore_config = dict(botocore_config or {})
        self._client = client
        self._owns_client = client is None
        self._client_lock = threading.Lock()
        self._session: Any = None
        self._hot: tuple[int, HotRequests] | None = None

    def __repr__(self) -> str:
        endpoint = self.endpoint_url or endpoint_from_environment() or "aws"
        return f"S3Store(endpoint={endpoint!r}, region={self.region_name!r}, profile={self.profile_name!r})"

    def endpoint_label(self) -> str:
        """The endpoint URL without any user info, or AWS with the region."""
        endpoint = self.endpoint_url or endpoint_from_environment()
        if not endpoint:
            region = self.region_name or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            return f"AWS S3 ({region or 'default region'})"
        parts = urlsplit(endpoint)
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))

    # Client ------------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The boto3 S3 client, created once (boto3 clients are thread-safe, sessions are not)."""
        client = self._client
        if client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = self._make_client()
                client = self._client
        return client

    @property
    def hot(self) -> HotRequests:
        """The request path of the hot calls, made again in a forked child (CRT threads do not fork)."""
        hot = self._hot
        if hot is None or hot[0] != os.getpid():
            client = self.client
            with self._client_lock:
                if self._hot is None or self._hot[0] != os.getpid():
                    self._hot = (os.getpid(), self._make_hot_requests(client))
                hot = self._hot
        return hot[1]

    def _make_hot_requests(self, client: Any) -> HotRequests:
        """The request path for `request_path` over this client's endpoint, credentials and retries.

        ``auto`` falls back to boto3 when the CRT is not installed, the session has no credentials
        (boto3 then raises its own, clearer, error on first use) or `botocore_config` sets options
        the CRT would not follow (a proxy, timeouts: all but retries and the pool). Any choice falls back to boto3 in a
        process forked after its parent started the CRT, which cannot use it safely. Made here, not
        in `s3_requests`: the CRT path imports that module's interface.
        """
        choice = self.request_path
        if choice == "boto3":
            return Boto3HotRequests(client)
        unfollowed = sorted(set(self.botocore_config) - CRT_FOLLOWS)
        if unfollowed:
            if choice == "crt":
                raise StoreError(
                    f"request_path='crt' cannot follow botocore_config's {', '.join(unfollowed)}: "
                    "use request_path='boto3' or 'auto'"
                )
            return Boto3HotRequests(client)
        try:
            from airflow_commit_provider.core.store.s3_crt import CrtHotRequests, started_in_a_parent
        except ImportError as exc:
            if choice == "crt":
                raise StoreError(
                    f"request_path='crt' needs the awscrt package (pip install 'airflow-commit-provider[crt]'): {exc}"
                ) from exc
            log.debug("awscrt is not installed; S3 requests go through boto3")
            return Boto3HotRequests(client)
        if started_in_a_parent():
            log.log(
                logging.WARNING if choice == "crt" else logging.DEBUG,
                "this process was forked after its parent started the CRT; S3 requests go through boto3",
            )
            return Boto3HotRequests(client)
        credentials = self._session.get_credentials()
        if credentials is None:
            if choice == "crt":
                raise StoreError("request_path='crt': boto3 found no AWS credentials to sign with")
            return Boto3HotRequests(client)
        return CrtHotRequests(
            client,
            credentials,
            max_connections=client.meta.config.max_pool_connections,
            max_attempts=self._retries()["max_attempts"],
            verify=self.verify,
        )

    def _retries(self) -> dict[str, Any]:
        """Standard mode retries throttling (503 SlowDown) and transient errors with backoff;
        AWS_RETRY_MODE / AWS_MAX_ATTEMPTS override, as everywhere in boto3, and `botocore_config`'s
        ``retries`` over them."""
        return {
            "mode": os.environ.get("AWS_RETRY_MODE") or "standard",
            "max_attempts": int(os.environ.get("AWS_MAX_ATTEMPTS") or 10),
            **self.botocore_config.get("retries", {}),
        }

    def _client_config(self) -> Config:
        """The store's pool, retries and addressing, with `botocore_config`'s options over them."""
        path_style = bool(self.endpoint_url or endpoint_from_environment())
        options = {
            "max_pool_connections": self.max_pool_connections,
            "s3": {"addressing_style": "path"} if path_style else None,
            **self.botocore_config,
            "retries": self._retries(),
        }
        if options.get("signature_version") == UNSIGNED_SIGNATURE:
            options["signature_version"] = UNSIGNED
        try:
            return Config(**options)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"botocore_config is not a botocore Config: {exc}") from exc

    def _make_client(self) -> Any:
        core = botocore.session.get_session()
        core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=parse_timestamp)
        try:
            self._session = session = boto3.session.Session(
                botocore_session=core, profile_name=self.profile_name, **self._credentials
            )
        except BotoCoreError as exc:  # e.g. ProfileNotFound
            raise StoreError(f"cannot configure S3 ({self!r}): {exc}") from exc
        return session.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region_name,
            verify=self.verify,
            config=self._client_config(),
        )

    def close(self) -> None:
        """Close the client this store created; a client passed in belongs to the caller."""
        with self._client_lock:
            if self._hot is not None:
                self._hot[1].close()
                self._hot = None
            if self._client is not None and self._owns_client:
                self._client.close()
                self._client = None

    @contextlib.contextmanager
    def _request(self, counter: str, path: StorePath, action: str) -> Iterator[None]:
        """Count one request and turn boto errors into StoreErrors naming the URL and error code."""
        self.statistics.increment(counter)
        try:
            yield
        except (ClientError, BotoCoreError) as exc:
            raise _store_error(exc, action, path) from exc

    def _errors(self, counter: str, path: StorePath, action: str) -> ErrorMapper:
        """`_request` for a request in flight: counted now, its boto error a StoreError when read."""
        self.statistics.increment(counter)
        return functools.partial(_store_error, action=action, path=path)

    @property
    def pipelines_requests(self) -> bool:
        return self.hot.pipelines

    # Objects -----------------------------------------------------------------------------------
    def read_bytes(self, path: StorePath) -> bytes:
        bucket, key = _object(path)
        with self._request("op_get", path, "GetObject"):
            return self.hot.get_object(bucket, key)

    def read_bytes_within(self, path: StorePath, limit: int) -> bytes | None:
        bucket, key = _object(path)
        try:
            with self._request("op_get", path, "GetObject"):
                data = self.hot.get_object(bucket, key, byte_range=f"bytes=0-{limit}")
        except StoreError as exc:
            code, status = _code_and_status(exc.__cause__)
            if code == "InvalidRange" or status == 416:  # an empty object has no first byte
                return b""
            raise
        return data if len(data) <= limit else None

    def read_range(self, path: StorePath, start: int, length: int) -> bytes:
        check_range(path, start, length)
        if length == 0:
            return b""
        bucket, key = _object(path)
        try:
            with self._request("op_get", path, "GetObject"):
                return self.hot.get_object(bucket, key, byte_range=f"bytes={start}-{start + length - 1}")
        except StoreError as exc:
            code, status = _code_and_status(exc.__cause__)
            if code == "InvalidRange" or status == 416:  # `start` at or past the end of the object
                return b""
            raise

    def open_read(self, path: StorePath) -> BinaryIO:
        """One GetObject whose body is read as it is consumed. Through the boto3 client whatever the
        request path: a reader reads one such file at a time (a task's manifest), not thousands."""
        bucket, key = _object(path)
        with self._request("op_get", path, "GetObject"):
            body = self.client.get_object(Bucket=bucket, Key=key)["Body"]
        return io.BufferedReader(_ResponseBody(body, path), READ_BUFFER)

    def write_bytes(self, path: StorePath, data: bytes, *, if_absent: bool = False) -> None:
        self._put(path, data, len(data), if_absent=if_absent)

    def write_stream(self, path: StorePath, body: IO[bytes], *, if_absent: bool = False) -> None:
        """One PutObject streamed from `body` (read again from its start if S3 asks to retry)."""
        self._put(path, body, body.seek(0, os.SEEK_END), if_absent=if_absent)

    def _put(self, path: StorePath, body: Any, size: int, *, if_absent: bool = False) -> None:
        bucket, key = _object(path)
        for attempt in range(1, CONDITIONAL_CONFLICT_ATTEMPTS + 1):
            if hasattr(body, "seek"):
                body.seek(0)
            try:
                with self._request("op_put", path, "PutObject"):
                    self.hot.put_object(bucket, key, body, size, if_absent=if_absent)
            except StoreError as exc:
                code, status = _code_and_status(exc.__cause__)
                if if_absent and (code == "PreconditionFailed" or status == 412):
                    raise FileAlreadyExistsError(f"{path} already exists (S3 PreconditionFailed)") from exc
                if if_absent and (code == "ConditionalRequestConflict" or status == 409):
                    # Another conditional write to the key is in flight; S3 asks us to retry.
                    if attempt < CONDITIONAL_CONFLICT_ATTEMPTS:
                        time.sleep(0.05 * 2**attempt)
                        continue
                    raise FileAlreadyExistsError(
                        f"{path}: concurrent conditional writes kept conflicting (S3 ConditionalRequestConflict)"
                    ) from exc
                raise
            self.statistics.increment("bytes_uploaded", size)
            return

    def open_write(self, path: StorePath) -> PublishOnCloseStream:
        _object(path)
        return S3WriteStream(self, path)

    def _upload_stream(self, path: StorePath, body: BinaryIO, size: int) -> None:
        """Publish a finished write stream: one PutObject, or a multipart upload when large."""
        if size <= self.multipart_threshold:
            self._put(path, body, size)
            return
        part_size = max(self.part_size, math.ceil(size / MAX_PARTS))
        upload_id = self.create_multipart_upload(path)
        try:
            body.seek(0)
            etags = []
            for number in range(1, math.ceil(size / part_size) + 1):
                etags.append(self.upload_part(path, upload_id, number, body.read(part_size)))
            self.complete_multipart_upload(path, upload_id, etags)
        except BaseException:
            self._abort_quietly(path, upload_id)
            raise

    def get_status(self, path: StorePath) -> FileStatus | None:
        bucket, key = _object(path)
        try:
            with self._request("op_head", path, "HeadObject"):
                head = self.client.head_object(Bucket=bucket, Key=key)
        except FileNotFoundInStoreError:
            return None
        return FileStatus(path, head["ContentLength"], head["LastModified"].timestamp(), head.get("ETag"))

    def list_files(self, directory: StorePath) -> Iterator[FileStatus]:
        """In the order the server lists: UTF-8 key order on AWS S3, not on SeaweedFS (see `Store`)."""
        for entry in self._list_objects(directory):
            if not _is_directory_marker(entry):
                yield _status(directory, entry)

    def list_child_dirs(self, directory: StorePath) -> list[str]:
        """One level only (ListObjectsV2 with a delimiter): never lists the files below."""
        bucket = _bucket(directory)
        prefix = directory.dir_prefix()
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
        names: set[str] = set()
        while True:
            with self._request("op_list", directory, "ListObjectsV2"):
                page = self.client.list_objects_v2(**kwargs)
            for common in page.get("CommonPrefixes", ()):
                if common["Prefix"].startswith(prefix):
                    names.add(common["Prefix"][len(prefix) :].strip("/"))
            if not page.get("IsTruncated"):
                return sorted(name for name in names if name)
            kwargs["ContinuationToken"] = _next_marker(page, kwargs, directory, "NextContinuationToken")

    def list_page(self, directory: StorePath, *, limit: int, after: str = "") -> list[FileStatus]:
        """ListObjectsV2 with StartAfter and MaxKeys: one request for a page of up to 1,000 keys (or
        `list_page_size`); a larger page follows the continuation tokens."""
        if limit < 1:
            raise ValueError(f"limit: a page holds at least 1 file, got {limit!r}")
        bucket = _bucket(directory)
        prefix = directory.dir_prefix()
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if after:
            kwargs["StartAfter"] = prefix + after
        page: list[FileStatus] = []
        while True:
            kwargs["MaxKeys"] = min(limit - len(page), self.list_page_size or limit)
            with self._request("op_list", directory, "ListObjectsV2"):
                answer = self.client.list_objects_v2(**kwargs)
            for entry in answer.get("Contents", ()):
                if entry["Key"].startswith(prefix) and not _is_directory_marker(entry):
                    page.append(_status(directory, entry))
            if len(page) >= limit or not answer.get("IsTruncated"):
                return page[:limit]
            kwargs.pop("StartAfter", None)
            kwargs["ContinuationToken"] = _next_marker(answer, kwargs, directory, "NextContinuationToken")

    def _list_objects(self, directory: StorePath) -> Iterator[dict[str, Any]]:
        """Raw ListObjectsV2 entries under the directory (markers included), page by page."""
        bucket = _bucket(directory)
        prefix = directory.dir_prefix()
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, **self._page_size("MaxKeys")}
        while True:
            with self._request("op_list", directory, "ListObjectsV2"):
                page = self.client.list_objects_v2(**kwargs)
            for entry in page.get("Contents", ()):
                if entry["Key"].startswith(prefix):  # defence in depth against loose prefix matching
                    yield entry
            if not page.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = _next_marker(page, kwargs, directory, "NextContinuationToken")

    def _page_size(self, parameter: str) -> dict[str, int]:
        return {parameter: self.list_page_size} if self.list_page_size else {}

    def delete(self, path: StorePath) -> None:
        bucket, key = _object(path)
        with self._request("op_delete", path, "DeleteObject"):
            self.client.delete_object(Bucket=bucket, Key=key)

    def delete_files(self, paths: Iterable[StorePath]) -> None:
        """DeleteObjects in batches of `DELETE_BATCH` keys, each sent as soon as it is full: `paths`
        is streamed, so memory holds one batch per bucket however many there are."""
        batches: dict[tuple[str, str], list[str]] = {}
        failures: list[str] = []
        for path in paths:
            bucket, key = _object(path)
            batch = batches.setdefault((path.scheme, bucket), [])
            batch.append(key)
            if len(batch) >= DELETE_BATCH:
                failures += self._delete_batch(path.scheme, bucket, batch)
                batches[(path.scheme, bucket)] = []
        for (scheme, bucket), keys in batches.items():
            if keys:
                failures += self._delete_batch(scheme, bucket, keys)
        _raise_delete_failures(failures)

    def delete_tree(self, directory: StorePath) -> int:
        """Delete every key under `directory`, directory markers included; returns the file count.

        Each batch of `DELETE_BATCH` keys is deleted as soon as the listing has produced it (as S3A's
        recursive delete does), so memory stays at one batch however large the tree: a magic job
        directory holds one upload record per file written, and holding its whole listing cost
        about 200 bytes per file at job commit.
        """
        files = 0
        failures: list[str] = []
        batch: list[str] = []
        for entry in self._list_objects(directory):
            batch.append(entry["Key"])
            files += not _is_directory_marker(entry)
            if len(batch) >= DELETE_BATCH:
                failures += self._delete_batch(directory.scheme, _bucket(directory), batch)
                batch = []
        if batch:
            failures += self._delete_batch(directory.scheme, _bucket(directory), batch)
        _raise_delete_failures(failures)
        return files

    def _delete_batch(self, scheme: str, bucket: str, keys: list[str]) -> list[str]:
        """One DeleteObjects request; returns the keys S3 failed to delete, as messages."""
        where = StorePath(scheme, bucket, keys[0])
        with self._request("op_delete", where, "DeleteObjects"):
            response = self.client.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
            )
        return [
            f"{StorePath(scheme, bucket, e.get('Key', '?'))} ({e.get('Code')}: {e.get('Message')})"
            for e in response.get("Errors", ())
        ]

    def rename_file(self, source: StorePath, dest: StorePath) -> None:
        """HEAD, copy, delete: three requests, with a window in which both files exist."""
        if same_path(source, dest):
            return
        status = self.get_status(source)
        if status is None:
            raise FileNotFoundInStoreError(f"cannot rename {source} to {dest}: source does not exist")
        src_bucket, src_key = _object(source)
        bucket, key = _object(dest)
        copy_source = {"Bucket": src_bucket, "Key": src_key}
        if status.size <= MAX_SINGLE_COPY:
            with self._request("op_copy", dest, f"CopyObject from {source} to"):
                self.client.copy_object(Bucket=bucket, Key=key, CopySource=copy_source)
        else:
            self._multipart_copy(copy_source, dest, status.size)
        self.statistics.increment("bytes_copied", status.size)
        self.delete(source)

    def _multipart_copy(self, copy_source: dict[str, str], dest: StorePath, size: int) -> None:
        bucket, key = _object(dest)
        part_size = max(MAX_SINGLE_COPY // 10, math.ceil(size / MAX_PARTS))
        upload_id = self.create_multipart_upload(dest)
        try:
            etags = []
            for number, start in enumerate(range(0, size, part_size), start=1):
                byte_range = f"bytes={start}-{min(start + part_size, size) - 1}"
                with self._request("op_copy", dest, "UploadPartCopy"):
                    response = self.client.upload_part_copy(
                        Bucket=bucket,
                        Key=key,
                        UploadId=upload_id,
                        PartNumber=number,
                        CopySource=copy_source,
                        CopySourceRange=byte_range,
                    )
                etags.append(response["CopyPartResult"]["ETag"])
            self.complete_multipart_upload(dest, upload_id, etags)
        except BaseException:
            self._abort_quietly(dest, upload_id)
            raise

    # Multipart uploads -----------------------------------------------------------------------
    def create_multipart_upload(self, path: StorePath) -> str:
        bucket, key = _object(path)
        with self._request("op_multipart_initiate", path, "CreateMultipartUpload"):
            return cast(str, self.client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"])

    def upload_part(self, path: StorePath, upload_id: str, part_number: int, data: bytes) -> str:
        bucket, key = _object(path)
        with self._request("op_multipart_part", path, f"UploadPart {part_number} of upload {upload_id} to"):
            etag = self.hot.upload_part(bucket, key, upload_id, part_number, data)
        self.statistics.increment("bytes_uploaded", len(data))
        return etag

    def complete_multipart_upload(self, path: StorePath, upload_id: str, etags: list[str]) -> str:
        return self.start_complete_multipart_upload(path, upload_id, etags).result()

    def start_complete_multipart_upload(
        self, path: StorePath, upload_id: str, etags: list[str]
    ) -> Future[str]:
        bucket, key = _object(path)
        errors = self._errors("op_multipart_complete", path, f"CompleteMultipartUpload {upload_id} of")
        return self.hot.start_complete_multipart_upload(bucket, key, upload_id, etags, errors)

    def abort_multipart_upload(self, path: StorePath, upload_id: str) -> None:
        """Abort the upload: one AbortMultipartUpload request.

        NoSuchUploadError when the server answers NoSuchUpload (AWS's 404 for an upload already
        completed or aborted). Some S3-compatible servers (SeaweedFS) answer 204 for a gone upload
        instead, so there an upload that was already gone looks aborted.
        """
        self.start_abort_multipart_upload(path, upload_id).result()

    def start_abort_multipart_upload(self, path: StorePath, upload_id: str) -> Future[None]:
        bucket, key = _object(path)
        errors = self._errors("op_multipart_abort", path, f"AbortMultipartUpload {upload_id} of")
        return self.hot.start_abort_multipart_upload(bucket, key, upload_id, errors)

    def _abort_quietly(self, path: StorePath, upload_id: str) -> None:
        # The original failure matters more; leftover uploads are purged by age later.
        with contextlib.suppress(StoreError):
            self.abort_multipart_upload(path, upload_id)

    def list_multipart_uploads(self, directory: StorePath) -> Iterator[PendingUpload]:
        bucket = _bucket(directory)
        prefix = directory.dir_prefix()
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, **self._page_size("MaxUploads")}
        while True:
            with self._request("op_multipart_list", directory, "ListMultipartUploads"):
                page = self.client.list_multipart_uploads(**kwargs)
            for upload in page.get("Uploads", ()):
                if upload["Key"].startswith(prefix):  # some stores match prefixes loosely
                    yield PendingUpload(
                        StorePath(directory.scheme, bucket, upload["Key"]),
                        upload["UploadId"],
                        upload["Initiated"].timestamp(),
                    )
            if not page.get("IsTruncated"):
                return
            # SeaweedFS orders uploads by ID and returns only NextUploadIdMarker; AWS returns both.
            markers = {
                "KeyMarker": page.get("NextKeyMarker"),
                "UploadIdMarker": page.get("NextUploadIdMarker"),
            }
            if not any(markers.values()) or all(kwargs.get(k) == v for k, v in markers.items()):
                raise StoreError(f"S3 ListMultipartUploads {directory}: truncated page without a new marker")
            kwargs.update({k: v for k, v in markers.items() if v})

    def lifecycle_rules(self, directory: StorePath) -> list[dict[str, Any]]:
        """GetBucketLifecycleConfiguration's ``Rules``; none for NoSuchLifecycleConfiguration, and
        LifecycleNotReadableError for AccessDenied (the caller lacks s3:GetLifecycleConfiguration)."""
        bucket = _bucket(directory)
        where = StorePath(directory.scheme, bucket, "")
        try:
            with self._request("op_get_lifecycle", where, "GetBucketLifecycleConfiguration"):
                answer = self.client.get_bucket_lifecycle_configuration(Bucket=bucket)
        except StoreError as error:
            code = _error_code(error)
            if code == "NoSuchLifecycleConfiguration":
                return []
            if code == "AccessDenied":
                raise LifecycleNotReadableError(
                    f"cannot read the lifecycle rules of bucket {bucket} at {self.endpoint_label()}: "
                    "AccessDenied (s3:GetLifecycleConfiguration is not granted)"
                ) from error
            if code in _NOT_SERVED:
                raise LifecycleNotReadableError(
                    f"cannot read the lifecycle rules of bucket {bucket} at {self.endpoint_label()}: "
                    f"{code} (the store does not serve GetBucketLifecycleConfiguration)"
                ) from error
            raise
        return list(answer.get("Rules") or ())

    def list_parts(self, path: StorePath, upload_id: str) -> list[UploadedPart]:
        bucket, key = _object(path)
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "UploadId": upload_id}
        kwargs |= self._page_size("MaxParts")
        parts: list[UploadedPart] = []
        while True:
            with self._request("op_list_parts", path, f"ListParts {upload_id} of"):
                page = self.client.list_parts(**kwargs)
            parts += [UploadedPart(p["PartNumber"], p["ETag"], p["Size"]) for p in page.get("Parts", ())]
            if not page.get("IsTruncated"):
                return parts
            kwargs["PartNumberMarker"] = _next_marker(page, kwargs, path, "NextPartNumberMarker")


class _ResponseBody(io.RawIOBase):
    """A GetObject response's body as a raw stream; an error while it is read (a dropped
    connection, a timeout) is a StoreError naming the object."""

    def __init__(self, body: Any, path: StorePath) -> None:
        super().__init__()
        self._body = body
        self._path = path

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._body.read(len(buffer))
        except (ClientError, BotoCoreError) as exc:
            raise _store_error(exc, "GetObject", self._path) from exc
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._body.close()
        super().close()


class S3WriteStream(PublishOnCloseStream):
    """Spools to memory, then to a temporary file, and uploads the object on close."""

    def __init__(self, store: S3Store, path: StorePath) -> None:
        super().__init__(str(path))
        self.store = store
        self.path = path
        self._buffer = tempfile.SpooledTemporaryFile(max_size=SPOOL_LIMIT)  # noqa: SIM115 - closed on publish/discard

    def _write(self, data: Any) -> int:
        return self._buffer.write(data)

    def tell(self) -> int:
        return self._buffer.tell()

    def _publish(self) -> None:
        try:
            size = self._buffer.seek(0, os.SEEK_END)
            self.store._upload_stream(self.path, cast(BinaryIO, self._buffer), size)
        finally:
            self._buffer.close()

    def _discard(self) -> None:
        self._buffer.close()


def _next_marker(page: dict[str, Any], kwargs: dict[str, Any], where: StorePath, name: str) -> Any:
    """The marker for the next page; a truncated page must move the listing on, or we would loop."""
    marker = page.get(name)
    request_name = name.removeprefix("Next")
    if not marker or kwargs.get(request_name) == marker:
        raise StoreError(f"S3 listing of {where}: truncated page without a new {name}")
    return marker


def _raise_delete_failures(failures: list[str]) -> None:
    if failures:
        shown = "; ".join(failures[:20])
        more = f" and {len(failures) - 20} more" if len(failures) > 20 else ""
        raise StoreError(f"S3 DeleteObjects failed for {len(failures)} keys: {shown}{more}")


def parse_timestamp(value: Any) -> datetime:
    """S3's ISO 8601 timestamps (`2026-11-23T15:24:08.000Z`) read without dateutil.

    botocore parses every timestamp of a response with dateutil, about 30 µs each, which made the
    two ListMultipartUploads sweeps of a 10,000-upload cleanup cost more client CPU than its
    aborts. Anything else (an HTTP date, more than microseconds) is parsed as botocore would.
    """
    if isinstance(value, str) and value.endswith("Z"):
        try:
            return datetime.fromisoformat(value[:-1] + "+00:00")
        except ValueError:
            pass
    return botocore.utils.parse_timestamp(value)


def endpoint_from_environment() -> str | None:
    """The S3 endpoint boto3 takes from the environment (`AWS_ENDPOINT_URL_S3`, then `AWS_ENDPOINT_URL`)."""
    return next((os.environ[name] for name in ENDPOINT_VARIABLES if os.environ.get(name)), None)


def _bucket(path: StorePath) -> str:
    if path.scheme not in S3_SCHEMES or not path.bucket:
        raise StoreError(f"not an S3 location: {path}")
    return path.bucket


def _object(path: StorePath) -> tuple[str, str]:
    bucket = _bucket(path)
    if not path.key:
        raise StoreError(f"S3 location names a bucket, not an object: {path}")
    return bucket, path.key


def _is_directory_marker(entry: dict[str, Any]) -> bool:
    return bool(entry["Key"].endswith("/") and entry.get("Size", 0) == 0)


def _status(directory: StorePath, entry: dict[str, Any]) -> FileStatus:
    return FileStatus(
        StorePath(directory.scheme, directory.bucket, entry["Key"]),
        entry["Size"],
        entry["LastModified"].timestamp(),
        entry.get("ETag"),
    )


def _code_and_status(exc: BaseException | None) -> tuple[str, int | None]:
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        return code, exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return "", None


def _store_error(exc: BaseException, action: str, path: StorePath) -> BaseException:
    """The StoreError naming the URL and S3's error code for a boto error; other errors as they are."""
    if isinstance(exc, ClientError):
        error = _client_error(exc, action, path)
    elif isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        error = StoreError(
            f"S3 {action} {path}: no usable AWS credentials ({exc}). Set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, choose a profile (AWS_PROFILE), or give them in the connection; "
            "for an S3-compatible server also set AWS_ENDPOINT_URL"
        )
    elif isinstance(exc, BotoCoreError):
        error = StoreError(f"S3 {action} {path} failed: {exc}")
    else:
        return exc
    error.__cause__ = exc
    return error


def _error_code(error: StoreError) -> str | None:
    """S3's error code behind a StoreError `_request` raised, if a ClientError caused it."""
    cause = error.__cause__
    if isinstance(cause, ClientError):
        return str(cause.response.get("Error", {}).get("Code", "")) or None
    return None


def _client_error(exc: ClientError, action: str, path: StorePath) -> StoreError:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", "")) or "Unknown"
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    detail = f": {error['Message']}" if error.get("Message") else ""
    message = f"S3 {action} {path} failed: {code} (HTTP {status}){detail}"
    if code in _NOT_FOUND:
        return FileNotFoundInStoreError(message)
    if code == "NoSuchUpload":
        return NoSuchUploadError(message)
    return StoreError(message)
