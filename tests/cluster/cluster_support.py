"""Helpers of the cluster tests: Spark conf, environments, event logs and store checks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from support.spark_events import event_log, task_starts
from support.standalone import StandaloneCluster, group_alive
from support.waiting import wait_until

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

HERE = Path(__file__).resolve().parent
APP = HERE / "cluster_app.py"
VENV_BIN = Path(sys.executable).parent
#: Bound of every wait on an observable event (a marker file, a process exit, a cluster state).
EVENT_BOUND_SECONDS = 240.0


def cluster_conf(event_log_dir: Path) -> dict[str, str]:
    """Spark conf of every application here: one executor (1 core, 512 MB) on each worker, so two
    applications can run at once, and speculation as eager as Spark allows."""
    fast_jvm = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    return {
        "spark.cores.max": "2",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.driver.memory": "512m",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": fast_jvm,
        "spark.executor.extraJavaOptions": fast_jvm,
        "spark.ui.enabled": "false",
        "spark.speculation": "true",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "1.5",
        "spark.speculation.interval": "100ms",
        "spark.speculation.minTaskRuntime": "100ms",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.compress": "false",
        "spark.eventLog.dir": event_log_dir.as_uri(),
        "spark.python.worker.reuse": "true",
    }


def submit_env(embedded_s3: EmbeddedS3) -> dict[str, str]:
    """The environment of spark-submit and of the operator's task process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(embedded_s3.env())
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = os.pathsep.join([str(VENV_BIN), env.get("PATH", "")])
    return env


def connections_env(cluster: StandaloneCluster, embedded_s3: EmbeddedS3) -> dict[str, str]:
    """``spark_default`` on the cluster's master and ``aws_default`` on the embedded S3."""
    host, port = cluster.master_url.removeprefix("spark://").split(":")
    return {
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(
            {"conn_type": "spark", "host": f"spark://{host}", "port": int(port)}
        ),
        "AIRFLOW_CONN_AWS_DEFAULT": embedded_s3.airflow_connection(),
    }


# Waiting on observable events -------------------------------------------------------------------
def read_marker(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def wait_for_marker(path: Path, *, unless_exited: subprocess.Popen[Any] | None = None) -> dict[str, Any]:
    """The marker's content once it exists; fails early if ``unless_exited`` exits before it appears."""

    def ready() -> bool:
        if path.exists():
            return True
        if unless_exited is not None and unless_exited.poll() is not None:
            raise AssertionError(
                f"{path.name} never appeared: the process exited with {unless_exited.returncode}"
            )
        return False

    wait_until(ready, f"marker {path}", EVENT_BOUND_SECONDS)
    return read_marker(path)


def wait_for_group_exit(pgid: int, what: str) -> None:
    wait_until(lambda: not group_alive(pgid), f"{what} (process group {pgid}) to exit", EVENT_BOUND_SECONDS)


def kill_group(pgid: int) -> None:
    """Last resort in teardown: nothing a test started may outlive it."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return


# spark-submit -------------------------------------------------------------------------------------
def spark_submit_command(
    cluster: StandaloneCluster, conf: Mapping[str, str], py_files: str, app: Path, app_args: list[str]
) -> list[str]:
    command = [str(VENV_BIN / "spark-submit"), "--master", cluster.master_url, "--py-files", py_files]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, str(app), *app_args]


# Event logs ---------------------------------------------------------------------------------------
def run_submit(command: list[str], embedded_s3: EmbeddedS3, bound: float) -> None:
    """Run one spark-submit in a process group of its own, always killed afterwards; a failed
    submit fails the test with the end of its output.

    The group goes even when the submit ends or times out first: executors' Python workers
    outlive a driver that was told to stop.
    """
    process = subprocess.Popen(
        command,
        env=submit_env(embedded_s3),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=bound)
    finally:
        kill_group(process.pid)
    assert process.returncode == 0, output[-5000:]


def assert_speculated(directory: Path, app_id: str | None = None) -> dict[str, Any]:
    """A task attempt the event log marks ``"Speculative": true``, on another host than the original."""
    starts = task_starts(event_log(directory, app_id))
    speculative = [t for t in starts if t.get("Speculative")]
    assert speculative, (
        f"no speculative attempt in the event log of {app_id or 'any app'} ({len(starts)} starts)"
    )
    copy = speculative[0]
    originals = [t for t in starts if t["Index"] == copy["Index"] and not t.get("Speculative")]
    assert originals and all(o["Host"] != copy["Host"] for o in originals), (originals, copy)
    assert {t["Host"] for t in starts} == {"127.0.0.1", "127.0.0.2"}
    return copy
