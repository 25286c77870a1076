"""What the development servers (the metastore, the Hadoop cluster, the embedded S3) share about the
process each runs in: how its start-up line is read, and how its process group is signalled.

Each server is started in a session of its own (``start_new_session=True``), so signalling the
group reaches whatever it started too; each says it is ready with one line on stdout, read as it
comes (a selector, never a poll or a sleep). Run by hand, each serves until SIGINT or SIGTERM
(`serve_until_signal`). A test session or a benchmark that started servers turns SIGTERM into an
interrupt (`interrupt_on_sigterm`), so its fixtures and ``atexit`` stop them as they do on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Protocol


def read_first_line(
    process: subprocess.Popen[bytes],
    deadline: float,
    *,
    what: str,
    timeout: float,
    log_tail: Callable[[], str],
    error: type[Exception],
) -> bytes:
    """What `process` printed up to the end of its first line: its readiness signal.

    Raises `error`, naming `what` with the tail of its log, when `deadline` (``time.monotonic()``)
    passes first (`timeout` is the bound as the user set it, for the message) or when the process
    exits before the line ends."""
    assert process.stdout is not None
    stdout = process.stdout
    received = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stdout, selectors.EVENT_READ)
        while b"\n" not in received:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise error(f"{what} did not start within {timeout:.0f} s; log tail:\n{log_tail()}")
            if selector.select(remaining):
                chunk = os.read(stdout.fileno(), 4096)
                if not chunk:
                    process.wait()
                    raise error(
                        f"{what} exited ({process.returncode}) during startup; log tail:\n{log_tail()}"
                    )
                received += chunk
    return received


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send `sig` to the process group `pid` leads; a group already gone is no error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def interrupt_on_sigterm() -> bool:
    """Make SIGTERM raise ``KeyboardInterrupt`` in the main thread, as SIGINT does; True if installed.

    Python's default on SIGTERM is to die at once: no ``finally``, fixture finalizer or ``atexit``
    runs, so every server a test session or a benchmark started (SeaweedFS, Spark, the Hadoop
    cluster, PostgreSQL) would outlive it, each in a session of its own. As an interrupt, the stack
    unwinds and they are stopped. A handler someone else installed is kept, and only the main
    thread can install one.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _raise_interrupt)
    return True


def _raise_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


class Server(Protocol):
    """What `serve_until_signal` needs of a development server."""

    @property
    def running(self) -> bool: ...

    def start(self) -> object: ...

    def stop(self) -> None: ...

    def _log_tail(self) -> str: ...


def serve_until_signal(server: Server, announce: Callable[[], None], what: str) -> int:
    """Start `server`, `announce` it, and keep it until SIGINT or SIGTERM: 0 once stopped, 1 if it
    died first (its log's tail on stderr). The handlers the process had are restored after."""
    stopping = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stopping.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        announce()
        while not stopping.wait(1.0):  # wakes on the signal; the timeout only notices a dead server
            if not server.running:
                print(f"{what} exited; log tail:\n{server._log_tail()}", file=sys.stderr)
                return 1
        return 0
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
