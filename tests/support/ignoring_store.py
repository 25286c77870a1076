"""A real S3 endpoint that ignores ``If-None-Match``: a loopback proxy in front of the embedded S3.

Some S3-compatible stores accept ``PutObject`` with ``If-None-Match: *`` and simply overwrite
(Hadoop's third-party-store notes; SeaweedFS before conditional writes). This proxy turns the
embedded SeaweedFS, which honours the header, into such a store, so the doctor and the committers'
refusal are tested against real requests and a real server, not a stub.

Dropping the header is not enough, because clients sign it. Both request paths of `S3Store` list
it in SigV4's ``SignedHeaders`` (checked on the wire: boto3 sends
``host;if-none-match;x-amz-checksum-crc32;x-amz-content-sha256;x-amz-date;...``, the CRT
``content-length;host;if-none-match;x-amz-content-sha256;x-amz-date``), so a request with the
header removed no longer matches its signature and the server answers 403, which is not what a
store that ignores the header does. A store that ignores it still authenticates the request as
signed, then stores the object unconditionally. The proxy therefore does both halves, with the
server's credentials (the test's own, never logged):

1. it verifies the client's signature over the request as sent, header included (a mismatch is
   counted in `signature_mismatches`, and the request is forwarded untouched so the server
   refuses it as it would);
2. it removes ``If-None-Match`` and signs the request again over the remaining signed headers,
   with the client's own ``x-amz-date``, scope and payload hash (``x-amz-content-sha256`` covers
   the body, which passes through byte for byte), so the server sees an ordinary unconditional
   ``PutObject``.

Every other request is forwarded byte for byte by `S3Gate`, with the ``Host`` header untouched,
so its signature stays valid. `requests` logs every request as the client sent it, which is how
the tests count a probe's requests. Loopback only.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from support.s3_gate import Request, S3Gate

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<access_key>[^/]+)/(?P<scope>[^,]+), ?"
    r"SignedHeaders=(?P<signed>[^,]+), ?Signature=(?P<signature>[0-9a-f]+)"
)
DROPPED = "if-none-match"


class IfNoneMatchIgnoringProxy(S3Gate):
    """Forwards to `upstream_url`, making every conditional PUT unconditional; see the module doc."""

    def __init__(self, upstream_url: str, access_key: str, secret_key: str) -> None:
        self._access_key = access_key
        self._secret_key = secret_key
        self._counts_lock = threading.Lock()
        self.rewritten = 0
        """Requests whose ``If-None-Match`` was dropped."""
        self.signature_mismatches = 0
        """Requests whose signature did not verify (forwarded unchanged; the server refuses them)."""
        super().__init__(upstream_url)

    def __repr__(self) -> str:
        return f"IfNoneMatchIgnoringProxy({self.endpoint_url})"

    def _forwarded_head(self, head: bytes, request: Request) -> bytes:
        if DROPPED not in request.headers:
            return head
        parsed = _AUTHORIZATION.fullmatch(request.headers.get("authorization", ""))
        if parsed is None or parsed["access_key"] != self._access_key:
            self._count("signature_mismatches")
            return head
        signed = parsed["signed"].split(";")
        if not hmac.compare_digest(self._signature(request, signed, parsed["scope"]), parsed["signature"]):
            self._count("signature_mismatches")
            return head
        remaining = [name for name in signed if name != DROPPED]
        signature = self._signature(request, remaining, parsed["scope"])
        authorization = (
            f"AWS4-HMAC-SHA256 Credential={self._access_key}/{parsed['scope']}, "
            f"SignedHeaders={';'.join(remaining)}, Signature={signature}"
        )
        lines = head.decode("latin-1").split("\r\n")
        kept = [lines[0]]
        for line in lines[1:]:
            name = line.partition(":")[0].strip().lower()
            if name == DROPPED:
                continue
            kept.append(f"Authorization: {authorization}" if name == "authorization" else line)
        self._count("rewritten")
        return "\r\n".join(kept).encode("latin-1")

    def _count(self, counter: str) -> None:
        with self._counts_lock:
            setattr(self, counter, getattr(self, counter) + 1)

    def _signature(self, request: Request, signed: list[str], scope: str) -> str:
        """SigV4 over `signed` headers, as S3 computes it (no double URI encoding, no normalising)."""
        target = urlsplit(request.target)
        canonical = "\n".join(
            [
                request.method,
                target.path or "/",
                _canonical_query(target.query),
                "".join(f"{name}:{' '.join(request.headers.get(name, '').split())}\n" for name in signed),
                ";".join(signed),
                request.headers.get("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
            ]
        )
        string_to_sign = "\n".join(
            [
                "AWS4-HMAC-SHA256",
                request.headers.get("x-amz-date", ""),
                scope,
                hashlib.sha256(canonical.encode()).hexdigest(),
            ]
        )
        key = ("AWS4" + self._secret_key).encode()
        for part in scope.split("/"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


def _canonical_query(query: str) -> str:
    """The query's pairs sorted, as sent (clients already encode them the SigV4 way)."""
    pairs = []
    for item in query.split("&") if query else ():
        name, _, value = item.partition("=")
        pairs.append((name, value))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


@pytest.fixture(name="ignoring_proxy")
def ignoring_proxy_fixture(embedded_s3: EmbeddedS3) -> Iterator[IfNoneMatchIgnoringProxy]:
    """The embedded S3 behind the proxy; checked on the way out that it re-signed exactly what each
    client signed (a mismatch would make a refusal the server's, not the missing header's)."""
    with IfNoneMatchIgnoringProxy(
        embedded_s3.endpoint_url, embedded_s3.access_key, embedded_s3.secret_key
    ) as proxy:
        yield proxy
    assert proxy.signature_mismatches == 0, "the proxy must re-sign exactly what the client signed"
