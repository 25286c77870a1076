"""The in-process S3 stand-in (`bench.fake_s3`) hosted in a process of its own, so that a measured
process's memory is its own.

What the stand-in holds changes as job commit runs (a million uploads completed, the lists and
markers it keeps: its process grew by 42 MB at 1M magic files; an earlier stand-in kept a key per
completed upload, about 91 MB by tracemalloc), memory that a real S3 server holds, not the driver.
`served_stand_in(objects_file)` starts a child process that loads
the saved objects into a `FakeS3Client` and answers its calls over a Unix socket in a private
temporary directory (no network port; the connection's key reaches the child through its start
pipe, never a command line), and yields a `StandInClient`, which `S3Store(client=...)` drives as
it drives boto3's client. The measured process then holds only what our code holds, plus one
connection per calling thread.

Bodies travel as botocore moves them: a streamed PutObject body (a file, as `Store.write_stream`
sends it) goes up in chunks of `CHUNK` bytes, and a GetObject body is read from the child a chunk
at a time as the caller reads it, so neither is held whole on our side. Each call is one round
trip on the thread's own connection; the child answers each connection on a thread of its own.
The child reports its own peak RSS growth (`StandInClient.server_memory`), the store's share,
told apart from the measured process's.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from botocore.exceptions import ClientError

from bench.fake_s3 import FakeS3Client

#: Bytes per message of a streamed body, either way.
CHUNK = 256 * 1024
#: The calls of the stand-in the child answers as they are (S3Store's boto3 calls but GetObject
#: and a streamed PutObject, which move their bodies in chunks).
FORWARDED = frozenset(
    {
        "put_object",
        "head_object",
        "list_objects_v2",
        "delete_object",
        "delete_objects",
        "create_multipart_upload",
        "upload_part",
        "complete_multipart_upload",
        "abort_multipart_upload",
        "list_parts",
        "list_multipart_uploads",
    }
)
#: Stands for a PutObject body that follows the request in chunks, ended by an empty one.
STREAMED_BODY = "<streamed body>"


def _forward(name: str) -> Callable[..., Any]:
    def call(self: StandInClient, **kwargs: Any) -> Any:
        return self._call(name, kwargs)

    call.__name__ = name
    return call


class StandInClient:
    """The boto3 client calls `S3Store` makes, answered by a `FakeS3Client` in the child process."""

    def __init__(self, address: str, authkey: bytes) -> None:
        self._address = address
        self._authkey = authkey
        self._local = threading.local()

    def _connection(self) -> Connection:
        connection: Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = Client(self._address, family="AF_UNIX", authkey=self._authkey)
            self._local.connection = connection
        return connection

    def _call(self, name: str, kwargs: dict[str, Any], body: Any = None) -> Any:
        connection = self._connection()
        connection.send((name, kwargs))
        if body is not None:
            while chunk := body.read(CHUNK):
                connection.send_bytes(chunk)
            connection.send_bytes(b"")
        status, value = connection.recv()
        if status == "error":
            response, operation = value
            raise ClientError(response, operation)
        if status == "failed":
            raise RuntimeError(f"the S3 stand-in failed answering {name}: {value}")
        return value

    def put_object(self, **kwargs: Any) -> Any:
        body = kwargs["Body"]
        if isinstance(body, (bytes, bytearray, memoryview)):
            return self._call("put_object", kwargs)
        return self._call("put_object", {**kwargs, "Body": STREAMED_BODY}, body)

    def get_object(self, **kwargs: Any) -> dict[str, Any]:
        return {"Body": _RemoteBody(self, self._call("get_object", kwargs))}

    head_object = _forward("head_object")
    list_objects_v2 = _forward("list_objects_v2")
    delete_object = _forward("delete_object")
    delete_objects = _forward("delete_objects")
    create_multipart_upload = _forward("create_multipart_upload")
    upload_part = _forward("upload_part")
    complete_multipart_upload = _forward("complete_multipart_upload")
    abort_multipart_upload = _forward("abort_multipart_upload")
    list_parts = _forward("list_parts")
    list_multipart_uploads = _forward("list_multipart_uploads")

    def server_memory(self) -> dict[str, int]:
        """The child's RSS after it loaded the objects (`baseline`) and its peak since (`peak`)."""
        return dict(self._call("_memory", {}))

    def close(self) -> None:
        return None


class _RemoteBody(io.RawIOBase):
    """A GetObject body in the child, read a chunk at a time as the caller reads it."""

    def __init__(self, client: StandInClient, handle: int) -> None:
        super().__init__()
        self._client = client
        self._handle = handle
        self._read_all = False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(CHUNK), b""))
        data = bytes(self._client._call("_read", {"handle": self._handle, "size": min(size, CHUNK)}))
        self._read_all = self._read_all or (size > 0 and not data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed and not self._read_all:
            self._client._call("_close", {"handle": self._handle})
        super().close()


class _ReceivedBody:
    """A streamed PutObject body as the child reads it: the chunks that follow the request."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._ended = False

    def read(self, _size: int = -1) -> bytes:
        if self._ended:
            return b""
        chunk = self._connection.recv_bytes()
        self._ended = not chunk
        return chunk

    def drain(self) -> None:
        """Read what the call left unread (a refused create-if-absent reads none of it)."""
        while self.read():
            pass


class _Server:
    """The child's side: one `FakeS3Client`, the GetObject bodies being read, the RSS sampler."""

    def __init__(self, client: FakeS3Client, sampler: Any) -> None:
        self.client = client
        self.sampler = sampler
        self._bodies: dict[int, io.BytesIO] = {}
        self._next = 0
        self._lock = threading.Lock()

    def answer(self, connection: Connection) -> None:
        with connection:
            while True:
                try:
                    name, kwargs = connection.recv()
                except EOFError:
                    return
                received = _ReceivedBody(connection) if kwargs.get("Body") == STREAMED_BODY else None
                if received is not None:
                    kwargs["Body"] = received
                try:
                    reply: tuple[str, Any] = ("ok", self._call(name, kwargs))
                except ClientError as exc:
                    reply = ("error", (exc.response, exc.operation_name))
                except Exception as exc:
                    reply = ("failed", repr(exc))
                finally:
                    if received is not None:
                        received.drain()
                connection.send(reply)

    def _call(self, name: str, kwargs: dict[str, Any]) -> Any:
        if name in FORWARDED:
            return getattr(self.client, name)(**kwargs)
        if name == "get_object":
            body = self.client.get_object(**kwargs)["Body"]
            with self._lock:
                self._next += 1
                self._bodies[self._next] = body
                return self._next
        if name == "_read":  # a body read to its end is dropped: its reader need not close it
            body = self._bodies.get(kwargs["handle"])
            data = b"" if body is None else body.read(kwargs["size"])
            if not data:
                with self._lock:
                    self._bodies.pop(kwargs["handle"], None)
            return data
        if name == "_close":
            with self._lock:
                self._bodies.pop(kwargs["handle"], None)
            return None
        if name == "_memory":
            return {"baseline": self.sampler.baseline, "peak": max(self.sampler.peak, self.sampler.rss())}
        raise ValueError(f"the S3 stand-in does not answer {name!r}")


def _serve(objects_file: str | None, address: str, authkey: bytes, started: Connection) -> None:
    """The child: load the objects, say so on `started`, and answer every connection."""
    from bench.common import RSSSampler

    client = FakeS3Client.load(objects_file) if objects_file else FakeS3Client()
    listener = Listener(address, family="AF_UNIX", authkey=authkey)
    sampler = RSSSampler(interval=0.05).__enter__()  # runs until the process ends
    server = _Server(client, sampler)
    started.send(sampler.baseline)
    started.close()
    while True:
        connection = listener.accept()
        threading.Thread(target=server.answer, args=(connection,), daemon=True).start()


@contextlib.contextmanager
def served_stand_in(objects_file: str | None = None) -> Iterator[StandInClient]:
    """A `StandInClient` whose stand-in, loaded from `objects_file` (`FakeS3Client.save`), runs in
    a child process for the block's duration."""
    directory = tempfile.mkdtemp(prefix="fake-s3-")  # mode 0700: the socket is ours alone
    address = os.path.join(directory, "s3.sock")
    authkey = os.urandom(32)
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe(duplex=False)
    child = context.Process(
        target=_serve, args=(objects_file, address, authkey, theirs), name="fake-s3", daemon=True
    )
    child.start()
    theirs.close()
    try:
        try:
            ours.recv()  # the child listens once it has loaded the objects
        except EOFError:
            raise RuntimeError(f"the S3 stand-in's process ended while loading {objects_file}") from None
        yield StandInClient(address, authkey)
    finally:
        child.terminate()
        child.join()
        shutil.rmtree(directory, ignore_errors=True)
