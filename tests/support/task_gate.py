"""A gate that stops chosen rows of a Spark task in the task's JVM until a test lets them go.

Hadoop's committers and Spark's own writer run in the JVM, where a test has no hook; a Python
function in the query cannot stop them either (its output reaches the JVM in buffered batches).
Spark's ``reflect`` can call ``scala.io.Source.fromFile`` on a named pipe, and opening a pipe for
reading blocks until someone opens it for writing: the row waits in the JVM, whatever writer
consumes it, with no sleep anywhere. Used in-process (tests/spark) and by the cluster application
(tests/cluster/s3a_speculation_app.py), whose executors share this machine's filesystem.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

#: Bound of the wait for the threads whose tasks may still reach the gate.
GATE_BOUND_SECONDS = 120.0


class TaskGate:
    """A named pipe; :meth:`column` is the SQL expression that makes the rows it selects wait on it.

    :meth:`open` opens the pipe read-write, which never blocks and lets every reader through, now
    and later; the descriptor is closed only once the threads whose tasks may still reach the pipe
    have ended, so no task can wait for ever.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self._descriptor: int | None = None

    def column(self, when: str) -> str:
        """``''`` for every row; the rows where SQL condition `when` holds first open the pipe.
        The query needs an ``id`` column."""
        # The path depends on a column so the optimizer cannot evaluate the call while planning.
        literal = str(self.path).replace("\\", "\\\\").replace("'", "\\'")
        path = f"concat('{literal}', substr(CAST(id AS STRING), 1, 0))"
        opened = f"substr(reflect('scala.io.Source', 'fromFile', {path}, 'UTF-8'), 1, 0)"
        return f"CASE WHEN {when} THEN {opened} ELSE '' END"

    def open(self) -> None:
        if self._descriptor is None:
            self._descriptor = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)

    @contextlib.contextmanager
    def opened_at_exit(self, *threads: threading.Thread) -> Iterator[TaskGate]:
        """Always open the gate on the way out, and close it once `threads` have ended."""
        try:
            yield self
        finally:
            self.open()
            for thread in threads:
                thread.join(GATE_BOUND_SECONDS)
            if not any(thread.is_alive() for thread in threads) and self._descriptor is not None:
                os.close(self._descriptor)
