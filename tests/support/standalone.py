"""A real Spark standalone cluster on loopback: one master and two workers on two addresses.

Started from PySpark's bundled ``bin/spark-class`` (no separate Spark download):

- the master on ``127.0.0.1`` (free RPC and web UI ports);
- one worker on ``127.0.0.1`` and one on ``127.0.0.2`` (``SPARK_LOCAL_IP`` per worker). Any 127.x
  address is loopback on Linux, and to Spark they are two hosts: it never places a speculative copy
  of a task on a host where the task already runs, so real speculation needs both.

Each daemon is its own process in its own session (``start_new_session=True``), with its output in
a log file of the cluster's temporary directory. Readiness is the master's ``/json/`` listing both
workers ``ALIVE``, polled until a deadline. ``stop()`` always runs (context manager, and ``atexit`` as
a last resort): SIGTERM to each process group, SIGKILL to any group still alive after a grace
period, then the temporary directory goes.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.waiting import wait_until

MASTER_HOST = "127.0.0.1"
WORKER_HOSTS = ("127.0.0.1", "127.0.0.2")
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(RuntimeError):
    """The cluster could not be started or did not become ready."""


def spark_home() -> Path:
    """PySpark's own Spark home (it has ``bin/spark-class`` and ``jars/``)."""
    from pyspark.find_spark_home import _find_spark_home

    home = Path(_find_spark_home())
    if not (home / "bin" / "spark-class").is_file():
        raise ClusterError(f"{home} has no bin/spark-class: is PySpark installed from PyPI?")
    return home


def free_port(host: str = MASTER_HOST) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def group_alive(pgid: int) -> bool:
    """True while any live (non-zombie) process belongs to process group ``pgid``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


@dataclass
class Daemon:
    """One server process in its own session (so its process group holds all it starts)."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def launch(cls, name: str, command: list[str], env: dict[str, str], log: Path, cwd: Path) -> Daemon:
        """Start `command` in a new session, its output in `log`."""
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=cwd,
            )
        return cls(name, process, log)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class StandaloneCluster:
    """Master + two workers. ``with StandaloneCluster() as cluster: ... cluster.master_url``."""

    worker_cores: int = 2
    worker_memory: str = "2g"
    daemon_memory: str = "256m"
    startup_timeout: float = 300.0
    """Three JVMs starting at once took more than 120 s in a full run whose three lanes shared 2 cores."""
    stop_timeout: float = 15.0
    base_dir: Path | None = None
    port: int = 0
    webui_port: int = 0
    daemons: list[Daemon] = field(default_factory=list)
    startup_seconds: float | None = None

    @property
    def master_url(self) -> str:
        return f"spark://{MASTER_HOST}:{self.port}"

    @property
    def webui_url(self) -> str:
        return f"http://{MASTER_HOST}:{self.webui_port}"

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # Lifecycle -----------------------------------------------------------------------------------
    def start(self) -> StandaloneCluster:
        started = time.monotonic()
        home = spark_home()
        self.base_dir = Path(tempfile.mkdtemp(prefix="spark-standalone-"))
        atexit.register(self.stop)
        try:
            self.port, self.webui_port = free_port(), free_port()
            self._launch(
                "master",
                home,
                MASTER_HOST,
                [
                    MASTER_CLASS,
                    "--host",
                    MASTER_HOST,
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(self.webui_port),
                ],
            )
            for index, host in enumerate(WORKER_HOSTS):
                work_dir = self.base_dir / f"worker-{index}"
                work_dir.mkdir()
                self._launch(
                    f"worker-{index}",
                    home,
                    host,
                    [
                        WORKER_CLASS,
                        *("--host", host, "--webui-port", str(free_port(host))),
                        *("--cores", str(self.worker_cores), "--memory", self.worker_memory),
                        *("--work-dir", str(work_dir), self.master_url),
                    ],
                )
            wait_until(
                self._ready,
                "the master to list both workers ALIVE",
                self.startup_timeout,
                interval=0.25,
                failure=ClusterError,
            )
        except BaseException as error:
            logs = "\n".join(f"--- {d.name} ({d.log}):\n{d.log_tail()}" for d in self.daemons)
            self.stop()
            if isinstance(error, ClusterError):
                raise ClusterError(f"{error}\n{logs}") from None
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _launch(self, name: str, home: Path, host: str, args: list[str]) -> None:
        assert self.base_dir is not None
        log = self.base_dir / f"{name}.log"
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": host,
            "SPARK_LOCAL_HOSTNAME": host,
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_LOG_DIR": str(self.base_dir),
            "SPARK_PID_DIR": str(self.base_dir),
            "SPARK_CONF_DIR": str(self.base_dir / "conf"),  # empty: no stray spark-defaults.conf
            # Fast-starting daemons that never need much: no JIT warm-up for a long run.
            "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        }
        self.daemons.append(
            Daemon.launch(name, [str(home / "bin" / "spark-class"), *args], env, log, self.base_dir)
        )

    def state(self) -> dict[str, Any]:
        """The master's ``/json/`` document (workers, applications, status)."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as response:
            return json.loads(response.read())

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", ()) if w.get("state") == "ALIVE"]

    def _ready(self) -> bool:
        for daemon in self.daemons:
            if daemon.process.poll() is not None:
                raise ClusterError(f"{daemon.name} exited with {daemon.process.returncode}")
        try:
            hosts = {w.get("host") for w in self.alive_workers()}
        except (OSError, ValueError, urllib.error.URLError):
            return False
        return set(WORKER_HOSTS) <= hosts

    def stop(self) -> None:
        """SIGTERM every process group, SIGKILL what is still alive after ``stop_timeout``; idempotent."""
        daemons, self.daemons = self.daemons, []
        stop_daemons(daemons, self.stop_timeout)
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)


def stop_daemons(daemons: list[Daemon], timeout: float) -> None:
    """SIGTERM every daemon's process group, then SIGKILL any group still alive after `timeout`."""
    for daemon in daemons:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(daemon.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for daemon in daemons:
        with contextlib.suppress(subprocess.TimeoutExpired):
            daemon.process.wait(timeout=max(0.0, deadline - time.monotonic()))
    for daemon in daemons:
        # The group may hold more than the daemon (a worker's executors): kill whatever is left.
        if daemon.process.poll() is None or group_alive(daemon.process.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(daemon.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.process.wait(timeout=timeout)
