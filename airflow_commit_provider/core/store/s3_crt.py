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

import io
import os
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from awscrt import auth, http, s3
from awscrt import io as crt_io
from awscrt.s3 import S3RetryConfig  # awscrt >= 0.38: an older one is not used
from botocore.exceptions import BotoCoreError, ClientError

from airflow_commit_provider.core.store.s3_requests import Body

#: A key whose presigned URL shows how the client addresses a bucket; never requested.
_PROBE_KEY = "airflow-commit-endpoint-probe"

_bootstrap_lock = threading.Lock()
_bootstrap: tuple[int, crt_io.ClientBootstrap] | None = None


class CrtRequestError(BotoCoreError):
    """The CRT could not get an answer from S3 (connection, TLS, timeout), after its retries."""

    fmt = "{operation} failed without an S3 response: {error}"


@dataclass(frozen=True)
class _BucketEndpoint:
    host: str
    path_prefix: str
    """The URL path before the key: ``/bucket/`` (path style) or ``/`` (virtual host)."""


@dataclass
class _Response:
    """What the CRT callbacks report for one request."""

    headers: list[tuple[str, str]] = field(default_factory=list)
    body: list[bytes] = field(default_factory=list)
    status: int | None = None
    error: BaseException | None = None
    error_body: bytes | None = None

    def on_headers(self, status_code: int, headers: list[tuple[str, str]], **_: Any) -> None:
        self.status = status_code
        self.headers = headers

    def on_body(self, chunk: bytes, **_: Any) -> None:
        self.body.append(bytes(chunk))

    def on_done(
        self,
        error: BaseException | None = None,
        error_body: bytes | None = None,
        status_code: int | None = None,
        **_: Any,
    ) -> None:
        self.error, self.error_body = error, error_body
        if status_code is not None:
            self.status = status_code

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((value for key, value in self.headers if key.lower() == name), None)


class CrtHotRequests:
    """The four hot calls over one CRT S3 client, for one boto3 client's configuration."""

    name = "crt"

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

        def current_credentials() -> auth.AwsCredentials:
            frozen = credentials.get_frozen_credentials()
            return auth.AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token)

        signing = auth.AwsSigningConfig(
            algorithm=auth.AwsSigningAlgorithm.V4,
            signature_type=auth.AwsSignatureType.HTTP_REQUEST_HEADERS,
            credentials_provider=auth.AwsCredentialsProvider.new_delegate(current_credentials),
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
            retry_config=S3RetryConfig(max_retries=max(1, max_attempts - 1)),
        )

    # The four calls ------------------------------------------------------------------------------
    def complete_multipart_upload(self, bucket: str, key: str, upload_id: str, etags: list[str]) -> str:
        parts = "".join(
            f"<Part><ETag>{escape(etag)}</ETag><PartNumber>{number}</PartNumber></Part>"
            for number, etag in enumerate(etags, start=1)
        )
        body = f"<CompleteMultipartUpload>{parts}</CompleteMultipartUpload>".encode()
        query = f"?uploadId={quote(upload_id, safe='')}"
        response = self._send("POST", bucket, key, query, "CompleteMultipartUpload", body=body)
        return _xml_text(b"".join(response.body), "ETag")

    def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None:
        query = f"?uploadId={quote(upload_id, safe='')}"
        self._send("DELETE", bucket, key, query, "AbortMultipartUpload")

    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int, body: bytes) -> str:
        query = f"?partNumber={part_number}&uploadId={quote(upload_id, safe='')}"
        response = self._send("PUT", bucket, key, query, "UploadPart", body=body)
        return response.header("ETag") or ""

    def put_object(self, bucket: str, key: str, body: Body, size: int, *, if_absent: bool) -> None:
        headers = [("If-None-Match", "*")] if if_absent else []
        self._send("PUT", bucket, key, "", "PutObject", body=body, size=size, headers=headers)

    def close(self) -> None:
        """Drop the CRT client; its connections close once in-flight requests finish."""
        self._crt = None  # type: ignore[assignment]

    # Sending ---------------------------------------------------------------------------------------
    def _send(
        self,
        method: str,
        bucket: str,
        key: str,
        query: str,
        operation: str,
        *,
        body: Body | None = None,
        size: int | None = None,
        headers: list[tuple[str, str]] | None = None,
    ) -> _Response:
        endpoint = self._endpoint(bucket)
        request_headers = http.HttpHeaders([("Host", endpoint.host), *(headers or ())])
        stream = None
        if body is not None:
            stream = io.BytesIO(body) if isinstance(body, bytes) else body
            request_headers.add("Content-Length", str(len(body) if isinstance(body, bytes) else size))
        path = endpoint.path_prefix + quote(key, safe="/~") + query
        response = _Response()
        request = self._crt.make_request(
            type=s3.S3RequestType.DEFAULT,
            request=http.HttpRequest(method, path, request_headers, stream),
            operation_name=operation,
            on_headers=response.on_headers,
            on_body=response.on_body,
            on_done=response.on_done,
        )
        try:
            request.finished_future.result()
        except Exception as exc:  # the details are in on_done's arguments, read below
            response.error = response.error or exc
        if response.error is not None:
            raise _error(response, operation)
        return response

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


def _error(response: _Response, operation: str) -> Exception:
    """botocore's exception for this failure, so the store maps both request paths alike."""
    if response.status is None:
        return CrtRequestError(operation=operation, error=response.error)
    body = response.error_body or b"".join(response.body)
    code = _xml_text(body, "Code") or str(response.status)
    message = _xml_text(body, "Message")
    error = {"Code": code, "Message": message} if message else {"Code": code}
    return ClientError(
        {"Error": error, "ResponseMetadata": {"HTTPStatusCode": response.status}},
        operation,
    )


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


def _tls_options(verify: bool | str | None) -> crt_io.TlsConnectionOptions:
    """TLS as boto3's `verify` says: False skips verification, a path is the CA bundle."""
    options = crt_io.TlsContextOptions()
    bundle = verify if isinstance(verify, str) else os.environ.get("AWS_CA_BUNDLE")
    if verify is False:
        options.verify_peer = False
    elif bundle:
        options.override_default_trust_store_from_path(ca_filepath=bundle)
    return crt_io.ClientTlsContext(options).new_connection_options()


def _process_bootstrap() -> crt_io.ClientBootstrap:
    """One event loop group per process, made again in a forked child (a fork keeps no threads)."""
    global _bootstrap
    with _bootstrap_lock:
        if _bootstrap is None or _bootstrap[0] != os.getpid():
            group = crt_io.EventLoopGroup()
            _bootstrap = (os.getpid(), crt_io.ClientBootstrap(group, crt_io.DefaultHostResolver(group)))
        return _bootstrap[1]
