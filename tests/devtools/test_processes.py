"""`interrupt_on_sigterm`: a SIGTERM'd process that started a server stops it on its way out.

The child below starts a server stand-in (a `sleep` in a session of its own, as the devtools
servers run) and registers its stop with ``atexit``, as `EmbeddedS3.start` does; then it is sent
SIGTERM. With the handler, the server is gone once the child has exited; without it, Python dies
at once and the server outlives it (the case that shows the test can fail, cleaned up after).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest

#: Bound of the child's start and exit (a hang guard: both take milliseconds).
BOUND_SECONDS = 60

CHILD = textwrap.dedent(
    """
    import atexit, os, signal, subprocess, sys, threading
    from airflow_commit_provider.devtools.processes import interrupt_on_sigterm

    if sys.argv[1] == "install":
        assert interrupt_on_sigterm()
    server = subprocess.Popen(["sleep", "600"], start_new_session=True)

    def stop():
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()

    atexit.register(stop)
    print(server.pid, flush=True)
    threading.Event().wait()
    """
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(("install", "server_outlives"), [(True, False), (False, True)])
def test_a_sigterm_unwinds_and_stops_the_servers_started(install: bool, server_outlives: bool) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "install" if install else "default"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    server = int(child.stdout.readline())
    try:
        child.send_signal(signal.SIGTERM)
        code = child.wait(BOUND_SECONDS)
        # An uncaught KeyboardInterrupt ends Python as SIGINT would; without the handler SIGTERM kills it.
        assert code == (-signal.SIGINT if install else -signal.SIGTERM)
        assert alive(server) is server_outlives
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server, signal.SIGKILL)
        child.kill()
        child.wait()
