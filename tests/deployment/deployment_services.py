"""A real Airflow deployment on this machine: Debian's PostgreSQL, the four Airflow services, the REST API.

- `Postgres`: a private cluster (``initdb`` on a temporary directory, ``pg_ctl`` on a free loopback
  port and a socket in that directory), a database and a user with a random password;
- `AirflowServices`: ``airflow db migrate``, then ``scheduler``, ``dag-processor``, ``triggerer`` and
  ``api-server`` on LocalExecutor, 127.0.0.1 only (``--skip-serve-logs``: the log servers bind every
  interface), each in a process group of its own with its output in ``$AIRFLOW_HOME/services/``;
- `RestClient`: ``/api/v2`` with a bearer token from ``POST /auth/token`` (the simple auth manager).

Every wait polls something observable with a bound; every process is stopped, its group killed.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import secrets
import shutil
import signal
import socket
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


# PostgreSQL ---------------------------------------------------------------------------------------
def postgres_bindir() -> Path:
    """Debian's newest ``/usr/lib/postgresql/<version>/bin``, else the directory of ``initdb`` on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    raise DeploymentError(
        "PostgreSQL's initdb was not found: install Debian's postgresql (scripts/bootstrap.sh does, as root)"
    )


class Postgres:
    """A private PostgreSQL cluster; `url` is SQLAlchemy's URL of its `airflow` database."""

    def __init__(self) -> None:
        self.bindir = postgres_bindir()
        # Its own directory outside pytest's (0700) tree: the server may run as the postgres user.
        self.root = Path(os.environ.get("TMPDIR", "/tmp")) / f"airflow-deploy-pg-{secrets.token_hex(6)}"
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = free_port()
        self.password = secrets.token_urlsafe(18)
        self._started = False

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://airflow:{self.password}@127.0.0.1:{self.port}/airflow"

    def _as_owner(self, command: list[str]) -> list[str]:
        """PostgreSQL refuses to run as root: as root, run it as the `postgres` user."""
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command

    def _run(self, command: list[str], what: str, stdin: str | None = None) -> None:
        done = subprocess.run(
            self._as_owner(command), input=stdin, capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode:
            raise DeploymentError(
                f"{what} failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"
            )

    def start(self) -> Postgres:
        self.root.mkdir(mode=0o700)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            "initdb",
        )
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c full_page_writes=off"
        self._started = True
        self._run(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ],
            "pg_ctl start",
        )
        # The password travels on stdin, never on a command line.
        sql = (
            f"CREATE USER airflow PASSWORD '{self.password}';\n"
            "CREATE DATABASE airflow OWNER airflow ENCODING 'UTF8';\n"
        )
        self._run(
            [
                str(self.bindir / "psql") if (self.bindir / "psql").exists() else "psql",
                "-h",
                str(self.root),
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-q",
                "-f",
                "-",
            ],
            "creating the airflow database",
            stdin=sql,
        )
        return self

    def stop(self) -> None:
        if self._started:
            with contextlib.suppress(Exception):
                self._run(
                    [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                    "pg_ctl stop",
                )
            pid_file = self.data / "postmaster.pid"
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
            self._started = False
        shutil.rmtree(self.root, ignore_errors=True)


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
