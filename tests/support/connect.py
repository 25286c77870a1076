"""A real Spark Connect server on loopback, started from PySpark's bundled connect jar.

``bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer spark-internal``
runs the server (``jars/spark-connect_*.jar`` ships with PySpark), in local mode, on 127.0.0.1 and a
free port. Its Python workers run this interpreter (``PYSPARK_PYTHON``), so they import this package
as executors do. The server is one process in its own session (``start_new_session=True``), its
output in a log file. Readiness: a TCP connection to the gRPC port succeeds, polled until a
deadline (the server opens the port once its SparkContext is up). ``stop()`` always runs (context
manager, and ``atexit`` as a last resort): SIGTERM to the process group, SIGKILL if anything of it
is still alive after a grace period.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from airflow_commit_provider.spark.source_batches import server_conf
from support.standalone import Daemon, free_port, spark_home, stop_daemons
from support.waiting import wait_until

HOST = "127.0.0.1"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectServerError(RuntimeError):
    """The server could not be started or did not open its port in time."""


@dataclass
class ConnectServer:
    """``with ConnectServer() as server: SparkSession.builder.remote(server.url).getOrCreate()``."""

    master: str = "local[2,4]"
    """As the shared classic session: 2 cores, a failed task retried up to 3 times."""
    confs: dict[str, str] = field(
        default_factory=lambda: {
            "spark.ui.enabled": "false",
            "spark.driver.bindAddress": HOST,
            "spark.driver.host": HOST,
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "50",
            "spark.python.task.killTimeout": "100ms",
            "spark.driver.memory": "1g",
            # As a platform team would run it: the data source's batches bounded in the JVM.
            **server_conf(),
        }
    )
    startup_timeout: float = 300.0
    """A JVM start with the peers' jars took more than 120 s in a CI run whose three lanes shared 2 cores."""
    stop_timeout: float = 15.0
    port: int = 0
    base_dir: Path | None = None
    daemon: Daemon | None = None
    startup_seconds: float | None = None

    @property
    def url(self) -> str:
        return f"sc://{HOST}:{self.port}"

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> ConnectServer:
        started = time.monotonic()
        home = spark_home()
        self.base_dir = Path(tempfile.mkdtemp(prefix="spark-connect-"))
        atexit.register(self.stop)
        try:
            self.port = free_port(HOST)
            confs = {
                **self.confs,
                "spark.connect.grpc.binding.address": HOST,
                "spark.connect.grpc.binding.port": str(self.port),
            }
            env = {
                **os.environ,
                "SPARK_HOME": str(home),
                "SPARK_LOCAL_IP": HOST,
                "SPARK_CONF_DIR": str(self.base_dir),  # empty: no stray spark-defaults.conf
                "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable,
            }
            command = [
                str(home / "bin" / "spark-submit"),
                *("--master", self.master, "--class", SERVER_CLASS),
                *(item for key, value in confs.items() for item in ("--conf", f"{key}={value}")),
                "spark-internal",
            ]
            log = self.base_dir / "connect-server.log"
            self.daemon = Daemon.launch("connect-server", command, env, log, self.base_dir)
            wait_until(
                self._accepting,
                f"the Spark Connect server to accept connections on {HOST}:{self.port}",
                self.startup_timeout,
                interval=0.25,
                failure=ConnectServerError,
            )
        except BaseException as error:
            tail = self.daemon.log_tail() if self.daemon is not None else ""
            self.stop()
            if isinstance(error, ConnectServerError):
                raise ConnectServerError(f"{error}\n--- server log:\n{tail}") from None
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _accepting(self) -> bool:
        assert self.daemon is not None
        if self.daemon.process.poll() is not None:
            raise ConnectServerError(f"the server exited with {self.daemon.process.returncode}")
        try:
            with socket.create_connection((HOST, self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM the server's process group (its Python workers too), SIGKILL it if still alive
        after ``stop_timeout``; idempotent."""
        daemon, self.daemon = self.daemon, None
        stop_daemons([daemon] if daemon is not None else [], self.stop_timeout)
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
