"""A real Airflow deployment on this machine: the four Airflow services and the REST API (its
PostgreSQL is ``devtools.postgres``, shared with the tests of catalog tables).

- `AirflowServices`: ``airflow db migrate``, then ``scheduler``, ``dag-processor``, ``triggerer`` and
  ``api-server`` on LocalExecutor, 127.0.0.1 only (``--skip-serve-logs``: the log servers bind every
  interface), each in a process group of its own with its output in ``$AIRFLOW_HOME/services/``;
- `RestClient`: ``/api/v2`` with a bearer token from ``POST /auth/token`` (the simple auth manager).

Every wait polls something observable with a bound; every process is stopped, its group killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from support.waiting import wait_until

from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

#: How long the services may take to start and report healthy on 2 busy cores.
START_BOUND_SECONDS = 180.0
#: How long a stopped service may take to exit after SIGTERM before its group is SIGKILLed.
STOP_BOUND_SECONDS = 10.0
#: Variables of the test process that must not leak into the deployment (the Airflow tests set them).
FOREIGN_PREFIXES = (
    "AIRFLOW",
    "AWS_",
    "PYSPARK_",
    "SPARK_",
    "OPENLINEAGE",
    "DAILY_INGEST_",
    "PYTHONPATH",
    "VIRTUAL_ENV",
)


class DeploymentError(RuntimeError):
    """A component of the deployment could not be started."""


def kill_group(pid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_process(process: subprocess.Popen[Any]) -> None:
    """SIGTERM its group, SIGKILL the group if it lingers (and in any case: stray children go too)."""
    if process.poll() is None:
        kill_group(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_BOUND_SECONDS)
    kill_group(process.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(STOP_BOUND_SECONDS)


# Airflow ------------------------------------------------------------------------------------------
def clean_environment() -> dict[str, str]:
    """This process's environment without what configures Airflow, AWS or Spark for the other tests."""
    return {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN_PREFIXES)}


class AirflowServices:
    """The four services of a deployment, started from `venv` with `env`; `api` is their REST API."""

    def __init__(self, venv: Path, home: Path, env: Mapping[str, str], api_port: int, password: str) -> None:
        self.venv = venv
        self.home = home
        self.env = dict(env)
        self.api_port = api_port
        self.password = password
        self.logs = home / "services"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def airflow(self, *args: str, timeout: float = 300) -> str:
        """Run one ``airflow`` command to its end (db migrate); its output, or an error with its tail."""
        done = subprocess.run(
            [str(self.venv / "bin" / "airflow"), *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        with (self.logs / f"{args[0]}-{args[-1]}.log").open("a") as log:
            log.write(done.stdout + done.stderr)
        if done.returncode:
            raise DeploymentError(f"airflow {' '.join(args)} failed:\n{(done.stdout + done.stderr)[-4000:]}")
        return done.stdout

    def start(self) -> None:
        commands = {
            "scheduler": ["scheduler", "--skip-serve-logs"],
            "dag-processor": ["dag-processor"],
            "triggerer": ["triggerer", "--skip-serve-logs"],
            "api-server": ["api-server", "--port", str(self.api_port), "--host", "127.0.0.1"],
        }
        for name, args in commands.items():
            with (self.logs / f"{name}.log").open("wb") as log:
                self.processes[name] = subprocess.Popen(
                    [str(self.venv / "bin" / "airflow"), *args],
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

    def check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise DeploymentError(f"airflow {name} exited ({process.returncode}):\n{self.log_tail(name)}")

    def log_tail(self, name: str, chars: int = 4000) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def wait_healthy(self) -> RestClient:
        """Once the API answers and reports the scheduler, triggerer and dag-processor healthy."""
        base = f"http://127.0.0.1:{self.api_port}"

        def healthy() -> bool:
            self.check_alive()
            try:
                health = httpx.get(f"{base}/api/v2/monitor/health", timeout=5).json()
            except (httpx.HTTPError, ValueError):
                return False
            parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
            return all((health.get(part) or {}).get("status") == "healthy" for part in parts)

        wait_until(healthy, "the Airflow services to report healthy", START_BOUND_SECONDS, interval=0.5)
        return RestClient(base, "admin", self.password, self.check_alive)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                kill_group(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            stop_process(process)


class RestClient:
    """``/api/v2`` as a user of the simple auth manager; every call fails loudly on an error status."""

    def __init__(self, base: str, username: str, password: str, check_alive: Callable[[], None]) -> None:
        self.base = base
        self._check_alive = check_alive
        token = httpx.post(
            f"{base}/auth/token", json={"username": username, "password": password}, timeout=30
        )
        token.raise_for_status()
        self._client = httpx.Client(
            base_url=f"{base}/api/v2",
            headers={"Authorization": f"Bearer {token.json()['access_token']}"},
            timeout=60,
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._client.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise AssertionError(f"{method} {path}: {response.status_code} {response.text[:2000]}")
        return response.json() if response.content else None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, json=body)

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, json=body)

    def close(self) -> None:
        self._client.close()

    # Reading the deployment ---------------------------------------------------------------------
    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.get(f"/dags/{dag_id}/dagRuns", limit=100, order_by="run_after")["dag_runs"]

    def run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return self.get(f"/dags/{dag_id}/dagRuns/{run_id}")

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        found = self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances", limit=100)["task_instances"]
        return {ti["task_id"]: ti for ti in found}

    def tries(self, dag_id: str, run_id: str, task_id: str) -> list[dict[str, Any]]:
        path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/tries"
        return self.get(path)["task_instances"]

    def xcom(self, dag_id: str, run_id: str, task_id: str) -> Any:
        path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value"
        return self.get(path, deserialize=True)["value"]

    def all_xcoms(self) -> list[dict[str, Any]]:
        return self.get("/dags/~/dagRuns/~/taskInstances/~/xcomEntries", limit=1000)["xcom_entries"]

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
        content = self.get(path, full_content=True)["content"]
        if isinstance(content, list):
            return "\n".join(json.dumps(line) if not isinstance(line, str) else line for line in content)
        return str(content)

    def wait_run(
        self, dag_id: str, run_id: str, bound: float, states: tuple[str, ...] = ("success",)
    ) -> dict[str, Any]:
        """The run once it ended; fails if it ended in a state not in `states`."""

        def ended() -> dict[str, Any] | None:
            self._check_alive()
            run = self.run(dag_id, run_id)
            return run if run["state"] in ("success", "failed") else None

        run = wait_until(ended, f"run {dag_id}/{run_id} to end", bound, interval=0.5)
        if run["state"] not in states:
            raise AssertionError(
                f"run {dag_id}/{run_id} ended {run['state']}:\n{self.describe_run(dag_id, run_id)}"
            )
        return run

    def describe_run(self, dag_id: str, run_id: str) -> str:
        """Each task's state, and the end of the log of each task that tried and did not succeed."""
        lines = []
        for task_id, ti in self.task_instances(dag_id, run_id).items():
            lines.append(f"{task_id}: {ti['state']} (try {ti['try_number']})")
            if ti["try_number"] >= 1 and ti["state"] not in ("success", "skipped"):
                for number in range(1, ti["try_number"] + 1):
                    try:
                        lines.append(self.task_log(dag_id, run_id, task_id, number)[-4000:])
                    except AssertionError as error:
                        lines.append(f"(no log of try {number}: {error})")
        return "\n".join(lines)

    def wait_task_state(
        self, dag_id: str, run_id: str, task_id: str, state: str, bound: float
    ) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            self._check_alive()
            ti = self.task_instances(dag_id, run_id).get(task_id)
            if ti and ti["state"] in ("failed", "upstream_failed") and state not in ("failed",):
                raise AssertionError(f"{dag_id}/{run_id}/{task_id} {ti['state']} while waiting for {state}")
            return ti if ti and ti["state"] == state else None

        return wait_until(reached, f"{dag_id}/{run_id}/{task_id} to be {state}", bound, interval=0.25)


def kill_processes_of(home: Path) -> list[int]:
    """SIGKILL the process group of every process whose environment has ``AIRFLOW_HOME=<home>``.

    What the deployment started and might outlive it: task processes, the spark-submit each task
    starts in a session of its own (an orphan once its task is killed), Spark's Python workers.
    """
    needle = f"AIRFLOW_HOME={home}".encode()
    groups = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                groups.add(os.getpgid(int(entry.name)))
    groups.discard(os.getpgid(0))
    for group in groups:
        kill_group(group)
    return sorted(groups)


@dataclass
class Deployment:
    """What the checks need: the API, the store, and the secrets that must never show."""

    api: RestClient
    s3: EmbeddedS3
    bucket: str
    home: Path
    markers: Path
    secrets: dict[str, str]
