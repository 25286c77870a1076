"""Hooks the Spark tests inject into tasks, and the coordinator the slow attempt talks to.

Executors are separate Python processes that cannot import test modules, so the conftest registers
this module with cloudpickle to be pickled by value. Every wait here is on a real event (a socket
message or its end) with a bound; nothing sleeps to synchronise.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: How long a deliberately slow attempt waits for the test to release or kill it.
SLOW_ATTEMPT_BOUND_SECONDS = 120.0


@dataclass(frozen=True)
class FailFirstAttempt:
    """Fails attempt 0 of one partition: ``raise`` (the task's own abort runs) or ``crash``
    (``os._exit``: the Python worker dies, nothing in the task cleans up)."""

    partition: int
    mode: str = "raise"

    def __call__(self, info: Any, *_: Any) -> None:
        if info.partition != self.partition or info.attempt_number != 0:
            return
        if self.mode == "crash":
            os._exit(17)
        raise RuntimeError(f"injected failure: partition {info.partition} attempt {info.attempt_id}")


@dataclass(frozen=True)
class SlowFirstAttempt:
    """Makes attempt 0 of one partition deliberately slow once it has written a file: it reports its
    task attempt ID to the coordinator and blocks until released (never, in the tests: Spark kills
    it as it kills a losing speculative attempt) or until the bound expires."""

    partition: int
    host: str
    port: int

    def __call__(self, info: Any, *_: Any) -> None:
        if info.partition != self.partition or info.attempt_number != 0:
            return
        with socket.create_connection((self.host, self.port), timeout=SLOW_ATTEMPT_BOUND_SECONDS) as conn:
            conn.sendall(json.dumps({"attempt_id": info.attempt_id}).encode() + b"\n")
            reply = conn.recv(16)
        raise RuntimeError(f"slow attempt {info.attempt_id} was not killed (coordinator said {reply!r})")


@dataclass
class SlowAttemptCoordinator:
    """Accepts the slow attempt's report and kills that attempt through Spark's own API
    (``SparkContext.killTaskAttempt``, what TaskSetManager does to a losing speculative attempt)."""

    kill: Callable[[int], bool]
    killed: list[int] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(SLOW_ATTEMPT_BOUND_SECONDS)
        self._connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, name="slow-attempt-coordinator", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.getsockname()[:2]
        return host, port

    def __enter__(self) -> SlowAttemptCoordinator:
        self._thread.start()
        return self

    def _serve(self) -> None:
        try:
            conn, _ = self._server.accept()
            self._connections.append(conn)
            conn.settimeout(SLOW_ATTEMPT_BOUND_SECONDS)
            attempt_id = int(json.loads(conn.makefile("rb").readline())["attempt_id"])
            if not self.kill(attempt_id):
                raise RuntimeError(f"Spark did not kill task attempt {attempt_id}")
            self.killed.append(attempt_id)
        except BaseException as error:  # reported by the test
            self.errors.append(error)

    def __exit__(self, *_: object) -> None:
        for conn in self._connections:
            conn.close()
        self._server.close()
        self._thread.join(timeout=SLOW_ATTEMPT_BOUND_SECONDS)


@dataclass(frozen=True)
class Chain:
    """Several hooks at one hook point."""

    hooks: tuple[Callable[..., None], ...]

    def __call__(self, *args: Any) -> None:
        for hook in self.hooks:
            hook(*args)


@dataclass(frozen=True)
class ExpectLocalProperty:
    """Fails the task unless the driver's local property reached it (TaskContext.getLocalProperty)."""

    key: str
    expected: str

    def __call__(self, info: Any, *_: Any) -> None:
        from pyspark import TaskContext

        value = TaskContext.get().getLocalProperty(self.key)
        if value != self.expected:
            raise AssertionError(f"task {info.partition}: {self.key}={value!r}, expected {self.expected!r}")


@dataclass(frozen=True)
class BatchLog:
    """Logs every Arrow batch a task receives (rows, bytes, and the job's Arrow byte limit as the
    task sees it) to a JSON-lines file per process under `directory`, for the test to read."""

    directory: str

    def __call__(self, info: Any, batch: Any) -> None:
        from pyspark import TaskContext

        limit = TaskContext.get().getLocalProperty("spark.sql.execution.arrow.maxBytesPerBatch")
        entry = {"task": info.partition, "rows": batch.num_rows, "bytes": batch.nbytes, "limit": limit}
        with open(os.path.join(self.directory, f"batches-{os.getpid()}.jsonl"), "a") as log:
            log.write(json.dumps(entry) + "\n")

    def read(self) -> list[dict[str, Any]]:
        entries = []
        for name in sorted(os.listdir(self.directory)):
            with open(os.path.join(self.directory, name)) as log:
                entries += [json.loads(line) for line in log]
        return entries


@dataclass(frozen=True)
class ObservedSelect:
    """A ``mapInArrow`` body that logs every batch it receives to `batch_log` and passes on only
    the `columns`: a step before a write that sends other (wider) rows to Python."""

    batch_log: BatchLog
    columns: tuple[str, ...]

    def __call__(self, batches: Any) -> Any:
        from airflow_commit_provider.spark.task_info import current_task_info

        info = current_task_info()
        for batch in batches:
            self.batch_log(info, batch)
            yield batch.select(list(self.columns))


def observed_data_source(batch_log: BatchLog, name: str = "committed") -> type:
    """The ``committed`` data source, its tasks logging every batch they receive to `batch_log`
    (registered under the same name, it replaces the plain one until that is registered again;
    under another `name`, it is a Python data source of someone else's)."""
    from airflow_commit_provider.spark.datasource import CommittedDataSource, CommittedWriter
    from airflow_commit_provider.spark.task_info import current_task_info

    class ObservedWriter(CommittedWriter):
        def write(self, iterator: Any) -> Any:
            def logged() -> Any:
                info = current_task_info()
                for batch in iterator:
                    batch_log(info, batch)
                    yield batch

            return super().write(logged())

    class ObservedDataSource(CommittedDataSource):
        @classmethod
        def name(cls) -> str:
            return name

        def writer(self, schema: Any, overwrite: bool) -> Any:
            plain = super().writer(schema, overwrite)
            return ObservedWriter(plain.plan, plain.task_config, plain.catalog)

    return ObservedDataSource


def instrumented_write(df: Any, path: str, instrumentation: Any, **arguments: Any) -> Any:
    """``write_committed(df, path, **arguments)`` with `instrumentation` (a WriteInstrumentation):
    planned as ``write_committed`` plans it, then run through the writer's instrumented seam."""
    from airflow_commit_provider.spark.config import SparkConf
    from airflow_commit_provider.spark.write_plan import plan_write
    from airflow_commit_provider.spark.writer import run_write

    plan = plan_write(path, conf=SparkConf(df.sparkSession), **arguments)
    return run_write(df, plan, instrumentation=instrumentation)
