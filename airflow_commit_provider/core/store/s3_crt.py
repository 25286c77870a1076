"""The hot S3 calls through AWS's Common Runtime (`awscrt`), the library s3transfer uses for CRT.

botocore builds, validates, signs, sends and parses each request in Python, about 2 ms of CPU
under one GIL; a job commit of 10,000 files is bound by that, not by S3. Here the CRT signs
(SigV4), sends over its own connection pool and retries from native threads; the Python side only
names the URL, waits, and reads the ETag. Everything the user configured still comes from boto3:

- the endpoint: per bucket, from the client's own endpoint resolution (a presigned URL of a probe
  key), so `endpoint_url`, addressing style, region, FIPS and dual-stack settings all apply;
- the credentials: the session's credential chain, asked again for every signature (refreshing
  credentials refresh here too);
- retries: the client's attempt budget (CRT's standard backoff on 5xx, throttling and broken
  connections);
- errors: an S3 error response is raised as botocore's `ClientError` with the same code, message
  and status (a 200 with an error body too), anything else as a `BotoCoreError`.

The payload is always signed (SHA-256 in native code) rather than sent as UNSIGNED-PAYLOAD, so a
part's bytes are checked end to end over plain HTTP as well as TLS.
"""

from __future__ import annotations

import ctypes
import functools
import html
import io
import os
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from awscrt import auth, http, s3
from awscrt import io as crt_io
from awscrt.s3 import S3RetryConfig  # awscrt >= 0.38: an older one is not used
from botocore.credentials import RefreshableCredentials
from botocore.exceptions import BotoCoreError, ClientError

from airflow_commit_provider.core.store.s3_requests import Body, ErrorMapper

#: A key whose presigned URL shows how the client addresses a bucket; never requested.
_PROBE_KEY = "airflow-commit-endpoint-probe"
_RESULT_ETAG = re.compile(rb"<ETag>([^<]*)</ETag>")

_bootstrap_lock = threading.Lock()
_bootstrap: tuple[int, crt_io.ClientBootstrap] | None = None
_native_thread = threading.local()
_CPYTHON = sys.implementation.name == "cpython"


class CrtRequestError(BotoCoreError):
    """The CRT could not get an answer from S3 (connection, TLS, timeout), after its retries."""

    fmt = "{operation} failed without an S3 response: {error}"


@dataclass(frozen=True)
class _BucketEndpoint:
    host: str
    path_prefix: str
    """The URL path before the key: ``/bucket/`` (path style) or ``/`` (virtual host)."""


class _Response:
    """One request's answer, as the CRT's callbacks report it on its own threads.

    `future` resolves when the request is done: to `parse(self)` on success, else to `errors` of
    botocore's exception for the failure. Callers that overlap requests hold the future instead
    of a thread.
    """

    __slots__ = ("body", "error_body", "errors", "etag", "future", "parse", "request", "status")

    def __init__(self, parse: Callable[[_Response], Any], errors: ErrorMapper | None) -> None:
        self.parse = parse
        self.errors: ErrorMapper = errors or _as_is
        self.future: Future[Any] = Future()
        self.body: list[bytes] = []
        self.etag: str | None = None
        self.status: int | None = None
        self.error_body: bytes | None = None
        self.request: Any = None
        """The CRT request, kept alive until it is done."""

    def on_headers(self, status_code: int, headers: list[tuple[str, str]], **_: Any) -> None:
        self.status = status_code
        self.etag = next((value for name, value in headers if name.lower() == "etag"), None)

    def on_body(self, chunk: bytes, **_: Any) -> None:
        self.body.append(bytes(chunk))

    def on_done(
        self,
        error: BaseException | None = None,
        error_body: bytes | None = None,
        status_code: int | None = None,
        operation: str = "",
        **_: Any,
    ) -> None:
        _keep_thread_state()
        self.request = None
        if status_code is not None:
            self.status = status_code
        if error is None:
            try:
                self.future.set_result(self.parse(self))
            except Exception as exc:  # a parse failure is this request's failure, not the CRT thread's
                self.future.set_exception(self.errors(exc))
            return
        self.error_body = error_body
        self.future.set_exception(self.errors(_error(self, operation, error)))


class CrtHotRequests:
    """The hot calls over one CRT S3 client, for one boto3 client's configuration."""

    name = "crt"
    pipelines = True

    def __init__(
        self,
        client: Any,
        credentials: Any,
        *,
        max_connections: int,
        max_attempts: int,
        verify: bool | str | None,
    ) -> None:
        self._boto = client
        self._endpoints: dict[str, _BucketEndpoint] = {}
        self._lock = threading.Lock()
        region = client.meta.region_name or "us-east-1"

        signing = auth.AwsSigningConfig(
            algorithm=auth.AwsSigningAlgorithm.V4,
            signature_type=auth.AwsSignatureType.HTTP_REQUEST_HEADERS,
            credentials_provider=_credentials_provider(credentials),
            region=region,
            service="s3",
            signed_body_header_type=auth.AwsSignedBodyHeaderType.X_AMZ_CONTENT_SHA_256,
            use_double_uri_encode=False,
            should_normalize_uri_path=False,
        )
        secure = urlsplit(client.meta.endpoint_url).scheme != "http"
        self._crt = s3.S3Client(
            bootstrap=_process_bootstrap(),
            region=region,
            tls_mode=s3.S3RequestTlsMode.ENABLED if secure else s3.S3RequestTlsMode.DISABLED,
            tls_connection_options=_tls_options(verify) if secure else None,
            signing_config=signing,
            max_active_connections_override=max_connections,
            # The CRT reads 0 retries as its default (5), so one retry is the fewest it can be told.
            retry_config=S3RetryConfig(max_retries=max(1, max_attempts - 1)),
        )

    # The hot calls ------------------------------------------------------------------------------
    def start_complete_multipart_upload(
        self, bucket: str, key: str, upload_id: str, etags: list[str], errors: ErrorMapper | None = None
    ) -> Future[str]:
        parts = "".join(
            f"<Part><ETag>{escape(etag)}</ETag><PartNumber>{number}</PartNumber></Part>"
            for number, etag in enumerate(etags, start=1)
        )
        body = f"<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>".encode()
        query = f"?uploadId={quote(upload_id, safe='')}"
        return self._start(
            "POST", bucket, key, query, "CompleteMultipartUpload", _result_etag, body=body, errors=errors
        )

    def start_abort_multipart_upload(
        self, bucket: str, key: str, upload_id: str, errors: ErrorMapper | None = None
    ) -> Future[None]:
        query = f"?uploadId={quote(upload_id, safe='')}"
        return self._start("DELETE", bucket, key, query, "AbortMultipartUpload", _nothing, errors=errors)

    def complete_multipart_upload(self, bucket: str, key: str, upload_id: str, etags: list[str]) -> str:
        return self.start_complete_multipart_upload(bucket, key, upload_id, etags).result()

    def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        self.start_abort_multipart_upload(bucket, key, upload_id).result()

    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int, body: bytes) -> str:
        query = f"?partNumber={part_number}&uploadId={quote(upload_id, safe='')}"
        return self._start("PUT", bucket, key, query, "UploadPart", _header_etag, body=body).result()

    def put_object(self, bucket: str, key: str, body: Body, size: int, *, if_absent: bool) -> None:
        headers = [("If-None-Match", "*")] if if_absent else []
        self._start(
            "PUT", bucket, key, "", "PutObject", _nothing, body=body, size=size, headers=headers
        ).result()

    def get_object(self, bucket: str, key: str, byte_range: str | None = None) -> bytes:
        headers = [("Range", byte_range)] if byte_range else []
        return self._start("GET", bucket, key, "", "GetObject", _whole_body, headers=headers).result()

    def close(self) -> None:
        """Drop the CRT client; its connections close once in-flight requests finish."""
        self._crt = None

    # Sending ---------------------------------------------------------------------------------------
    def _start(
        self,
        method: str,
        bucket: str,
        key: str,
        query: str,
        operation: str,
        parse: Callable[[_Response], Any],
        *,
        body: Body | None = None,
        size: int | None = None,
        headers: list[tuple[str, str]] | None = None,
        errors: ErrorMapper | None = None,
    ) -> Future[Any]:
        endpoint = self._endpoint(bucket)
        request_headers = http.HttpHeaders([("Host", endpoint.host), *(headers or ())])
        stream = None
        if body is not None:
            stream = io.BytesIO(body) if isinstance(body, bytes) else body
            request_headers.add("Content-Length", str(len(body) if isinstance(body, bytes) else size))
        path = endpoint.path_prefix + quote(key, safe="/~") + query
        response = _Response(parse, errors)
        request = self._crt.make_request(
            type=s3.S3RequestType.DEFAULT,
            request=http.HttpRequest(method, path, request_headers, stream),
            operation_name=operation,
            # Each callback is a trip from a native thread into Python: ask only for what is read.
            on_headers=response.on_headers if parse in _READS_HEADERS else None,
            on_body=response.on_body if parse in _READS_BODY else None,
            on_done=functools.partial(response.on_done, operation=operation),
        )
        if not response.future.done():
            response.request = request
        return response.future

    def _endpoint(self, bucket: str) -> _BucketEndpoint:
        endpoint = self._endpoints.get(bucket)
        if endpoint is None:
            url = urlsplit(
                self._boto.generate_presigned_url(
                    "head_object", Params={"Bucket": bucket, "Key": _PROBE_KEY}, ExpiresIn=60
                )
            )
            endpoint = _BucketEndpoint(url.netloc, url.path.removesuffix(_PROBE_KEY))
            with self._lock:
                self._endpoints[bucket] = endpoint
        return endpoint


def _error(response: _Response, operation: str, error: BaseException) -> Exception:
    """botocore's exception for this failure, so the store maps both request paths alike."""
    if response.status is None:
        return CrtRequestError(operation=operation, error=error)
    body = response.error_body or b"".join(response.body)
    code = _xml_text(body, "Code") or str(response.status)
    message = _xml_text(body, "Message")
    details = {"Code": code, "Message": message} if message else {"Code": code}
    return ClientError({"Error": details, "ResponseMetadata": {"HTTPStatusCode": response.status}}, operation)


def _result_etag(response: _Response) -> str:
    """The ETag of a CompleteMultipartUploadResult (the CRT has already failed a 200 with an error)."""
    found = _RESULT_ETAG.search(b"".join(response.body))
    return html.unescape(found.group(1).decode()) if found else ""


def _header_etag(response: _Response) -> str:
    return response.etag or ""


def _whole_body(response: _Response) -> bytes:
    return b"".join(response.body)


def _nothing(_: _Response) -> None:
    return None


def _as_is(error: BaseException) -> BaseException:
    return error


_READS_HEADERS = {_header_etag}
_READS_BODY = {_result_etag, _whole_body}


def _xml_text(document: bytes, tag: str) -> str:
    """The text of the first element named `tag` (any namespace), or empty."""
    if not document:
        return ""
    try:
        root = ElementTree.fromstring(document)
    except ElementTree.ParseError:
        return ""
    for element in root.iter():
        if element.tag.rsplit("}", 1)[-1] == tag:
            return element.text or ""
    return ""


def _credentials_provider(credentials: Any) -> auth.AwsCredentialsProvider:
    """boto3's credentials for the CRT's signer.

    Fixed credentials are handed over once; refreshable ones (roles, SSO, web identity) are asked
    for at every signature, so they refresh here exactly when boto3 would refresh them. Asking
    costs a trip from a native thread into Python, so it is paid only when it can change anything.
    """
    if not isinstance(credentials, RefreshableCredentials):
        frozen = credentials.get_frozen_credentials()
        return auth.AwsCredentialsProvider.new_static(frozen.access_key, frozen.secret_key, frozen.token)

    def current() -> auth.AwsCredentials:
        frozen = credentials.get_frozen_credentials()
        return auth.AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token)

    return auth.AwsCredentialsProvider.new_delegate(current)


def _tls_options(verify: bool | str | None) -> crt_io.TlsConnectionOptions:
    """TLS as boto3's `verify` says: False skips verification, a path is the CA bundle."""
    options = crt_io.TlsContextOptions()
    bundle = verify if isinstance(verify, str) else os.environ.get("AWS_CA_BUNDLE")
    if verify is False:
        options.verify_peer = False
    elif bundle:
        options.override_default_trust_store_from_path(ca_filepath=bundle)
    return crt_io.ClientTlsContext(options).new_connection_options()


def _keep_thread_state() -> None:
    """Give the CRT thread running this callback one Python thread state for its whole life.

    The CRT enters Python from its own threads through `PyGILState_Ensure`, four or five times per
    request (reading the body, headers, done, shutdown). A native thread without a thread state
    gets a new one at each entry and frees it at the exit, mapping and unmapping its frame stack
    each time; on this host that churn (page faults, TLB shootdowns across cores) was a fifth of
    a job commit's CPU. One extra `PyGILState_Ensure`, never released, keeps the state: each
    later entry only takes the GIL. Python frees the state at shutdown, after which the CRT no
    longer calls into Python.
    """
    if _CPYTHON and not getattr(_native_thread, "kept", False):
        ctypes.pythonapi.PyGILState_Ensure()
        _native_thread.kept = True


def started_in_a_parent() -> bool:
    """Whether this process was forked from one whose CRT threads were running.

    The CRT's native state (threads, locks they held, its allocator) does not survive a fork: a
    child that used it crashed here with a segmentation fault. Such a child sends its requests
    through boto3 instead; a process that forks before using the CRT, or spawns, is unaffected.
    """
    return _bootstrap is not None and _bootstrap[0] != os.getpid()


def _process_bootstrap() -> crt_io.ClientBootstrap:
    """One event loop group per process, shared by its stores."""
    global _bootstrap
    with _bootstrap_lock:
        if _bootstrap is None:
            group = crt_io.EventLoopGroup()
            _bootstrap = (os.getpid(), crt_io.ClientBootstrap(group, crt_io.DefaultHostResolver(group)))
        return _bootstrap[1]
