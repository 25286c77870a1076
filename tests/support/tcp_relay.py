"""A loopback TCP relay that serves a fixed number of connections, then refuses every other.

A test that needs a service to vanish at a known point of a protocol (the metastore at a table
write's commit point, after planning asked it once) points the client at the relay: the first
`connections` connections are relayed byte for byte to the service, and once they are accepted
the relay stops listening, so the next connection is refused by the kernel. `before_relaying`, if
given, runs with each connection's number (from 1) before it is relayed: a test changes the service
at that point of the client's protocol (drops the table the client is about to register into).
Nothing is timed.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable


class TcpRelay:
    """``with TcpRelay(("127.0.0.1", port), connections=1) as relay: ... relay.port``."""

    def __init__(
        self,
        target: tuple[str, int],
        *,
        connections: int,
        before_relaying: Callable[[int], None] | None = None,
    ) -> None:
        self.target = target
        self.remaining = connections
        self.accepted = 0
        self.before_relaying = before_relaying
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="tcp-relay", daemon=True)

    def __enter__(self) -> TcpRelay:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _accept(self) -> None:
        with self._listener:
            while self.remaining > 0:
                try:
                    client, _ = self._listener.accept()
                except OSError:  # closed by close()
                    return
                self.remaining -= 1
                self.accepted += 1
                if self.before_relaying is not None:
                    self.before_relaying(self.accepted)
                upstream = socket.create_connection(self.target)
                self._sockets += [client, upstream]
                for source, sink in ((client, upstream), (upstream, client)):
                    threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        """Stop listening and cut every relayed connection."""
        with contextlib.suppress(OSError):
            self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    """Copy `source` to `sink` until either end closes."""
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)
