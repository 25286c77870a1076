"""Free TCP ports on loopback, for the development servers (embedded S3, PostgreSQL) to listen on."""

from __future__ import annotations

import socket


def free_loopback_ports(count: int) -> list[int]:
    """Distinct free loopback ports (all held open together so none repeats)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
