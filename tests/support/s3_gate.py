"""A transparent forwarder in front of the embedded S3 that can hold chosen requests until released.

Hadoop's committers run inside the JVM, where a test cannot put a hook; what they do is visible
only as the S3 requests they send. Pointing a client (S3A's ``fs.s3a.endpoint``, or ours) at this
gate instead of the server lets a test stop a job at a real point of its protocol (its first
``CompleteMultipartUpload`` = job commit under way, a task commit's copy, ...), observe the store
there, then release the job or kill its process. Requests are forwarded byte for byte, so the
server sees exactly what the client sent (SigV4 signatures stay valid: the ``Host`` header is
passed through untouched); nothing is answered by the gate itself.

Only the request side is parsed (head, then a ``Content-Length`` or chunked body, so keep-alive
connections carry several requests); responses are piped back as they come. The gate binds
127.0.0.1 only, and every wait is bounded.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

#: Longest a held request waits for its release (a test releases, or kills the client, long before).
HOLD_BOUND_SECONDS = 300.0
_HEAD_LIMIT = 64 * 1024


@dataclass(frozen=True)
class Request:
    """The head of one forwarded request (path-style addressing: ``/bucket/key?query``)."""

    method: str
    target: str
    headers: dict[str, str]

    @property
    def key(self) -> str:
        path = unquote(urlsplit(self.target).path).lstrip("/")
        return path.split("/", 1)[1] if "/" in path else ""

    @property
    def completes_upload(self) -> bool:
        """``CompleteMultipartUpload``: makes a pending upload a visible object."""
        query = parse_qs(urlsplit(self.target).query, keep_blank_values=True)
        return self.method == "POST" and "uploadId" in query


@dataclass
class Hold:
    """Requests matching `matches` are held (after the first `skip` of them) until `release()`
    forwards them or `drop()` discards them (their connections are closed, unanswered)."""

    matches: Callable[[Request], bool]
    skip: int = 0
    seen: list[Request] = field(default_factory=list)
    """Every matching request, passed or held, in arrival order."""
    _released: threading.Event = field(default_factory=threading.Event)
    _dropped: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def held(self) -> list[Request]:
        """The matching requests that were (or are) held."""
        with self._lock:
            return self.seen[self.skip :]

    def release(self) -> None:
        self._released.set()

    def drop(self) -> None:
        """Never forward what is held or arrives later: what a request in flight from a killed
        process amounts to once nothing delivers it."""
        self._dropped = True
        self._released.set()

    def _arrive(self, request: Request) -> bool:
        """Record a matching request; True when it must wait."""
        with self._lock:
            self.seen.append(request)
            return len(self.seen) > self.skip and not self._released.is_set()

    def _wait(self) -> None:
        """Until released; OSError (the connection closes unanswered) if dropped or never released."""
        if not self._released.wait(HOLD_BOUND_SECONDS) or self._dropped:
            raise OSError("request dropped at the gate")


class S3Gate:
    """Forwards every connection to ``upstream`` (host, port); see the module doc."""

    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream_url {upstream_url!r}: expected http://host:port")
        self.upstream = (parts.hostname, parts.port)
        self.requests: list[Request] = []
        """Every request forwarded, in arrival order."""
        self._holds: list[Hold] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._closed = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._accepting = threading.Thread(target=self._accept, name="s3-gate", daemon=True)
        self._accepting.start()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def hold(self, matches: Callable[[Request], bool], *, skip: int = 0) -> Hold:
        """Hold the requests `matches` selects, letting the first `skip` of them through."""
        hold = Hold(matches, skip)
        with self._lock:
            self._holds.append(hold)
        return hold

    def close(self) -> None:
        """Drop every held request and close every connection."""
        self._closed.set()
        with self._lock:
            holds, sockets = list(self._holds), list(self._sockets)
        for hold in holds:
            hold.drop()
        for sock in [self._listener, *sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._accepting.join(5)

    def __enter__(self) -> S3Gate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # Forwarding -----------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), name="s3-gate-conn", daemon=True).start()

    def _track(self, *sockets: socket.socket) -> None:
        with self._lock:
            self._sockets.update(sockets)

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        self._track(client, upstream)
        threading.Thread(target=_pipe, args=(upstream, client), name="s3-gate-reply", daemon=True).start()
        reader = client.makefile("rb")
        try:
            for head, request in _requests(reader):
                self._gate(request)
                upstream.sendall(self._forwarded_head(head, request))
                for chunk in _body(reader, request.headers):
                    upstream.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _forwarded_head(self, head: bytes, request: Request) -> bytes:
        """The request head sent upstream: byte for byte here; a subclass may rewrite it."""
        return head

    def _gate(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)
            holds = [hold for hold in self._holds if hold.matches(request)]
        for hold in holds:
            if hold._dropped or hold._arrive(request):
                hold._wait()


def _requests(reader: object) -> Iterator[tuple[bytes, Request]]:
    """(raw head, parsed head) of each request on a connection, until it closes."""
    while True:
        lines: list[bytes] = []
        size = 0
        while True:
            line = reader.readline(_HEAD_LIMIT)  # type: ignore[attr-defined]
            if not line:
                return
            lines.append(line)
            size += len(line)
            if line in (b"\r\n", b"\n") and len(lines) > 1:
                break
            if line in (b"\r\n", b"\n"):
                lines.clear()  # stray blank line between requests
            if size > _HEAD_LIMIT:
                raise OSError("request head too large")
        method, target, _version = lines[0].decode("latin-1").split(" ", 2)
        headers = {}
        for raw in lines[1:-1]:
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        yield b"".join(lines), Request(method, target, headers)


def _body(reader: object, headers: dict[str, str]) -> Iterator[bytes]:
    """The raw bytes of a request body, framed by Content-Length or chunked encoding."""
    read = reader.read  # type: ignore[attr-defined]
    readline = reader.readline  # type: ignore[attr-defined]
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = readline(_HEAD_LIMIT)
            if not size_line:
                raise OSError("connection closed inside a chunked body")
            yield size_line
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while True:  # trailers, up to the blank line
                    trailer = readline(_HEAD_LIMIT)
                    if not trailer:
                        raise OSError("connection closed inside chunk trailers")
                    yield trailer
                    if trailer in (b"\r\n", b"\n"):
                        return
            yield from _exactly(read, size + 2)  # data and its CRLF
        return
    yield from _exactly(read, int(headers.get("content-length", "0") or 0))


def _exactly(read: Callable[[int], bytes], count: int) -> Iterator[bytes]:
    while count > 0:
        chunk = read(min(count, 1 << 16))
        if not chunk:
            raise OSError("connection closed inside a request body")
        count -= len(chunk)
        yield chunk


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(1 << 16):
            target.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_RDWR)
