"""Two Spark applications sharing one Hive metastore kept in PostgreSQL: what the writer commits
into a partitioned table the reader sees, with its partitions and their locations, and a day the
writer has not committed yet it never sees.

``shared_metastore_app.py`` runs as two processes (the suite's own session is on embedded Derby,
which admits one application): the writer A and the reader B. For each table, on ``file://`` and
on the embedded S3 (``s3a://``), A replaces a first day with ``write_committed(table=...)``, then a
second one whose last task waits on a ``TaskGate``; once A's first task has committed and the last
one waits, B looks, then the gate opens, A's write commits and registers the day, and B looks again. Markers order the steps; nothing sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shared_metastore_app import PHASES
from support.task_gate import TaskGate
from support.waiting import wait_until
from tables_support import SharedMetastore

pytestmark = [pytest.mark.spark, pytest.mark.s3, pytest.mark.slow, pytest.mark.hadoop_peers]

APP = Path(__file__).resolve().parent / "shared_metastore_app.py"
#: Bound of every wait on an application (each starts a JVM with Hadoop's jars and the Hive client).
APP_BOUND_SECONDS = 300.0
ROWS = 6
DAYS = ("2024-01-01", "2024-01-02")


def app_env(embedded_s3: Any) -> dict[str, str]:
    """Credentials and region for S3A and our store; the endpoint is in the spec."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    env.update({k: v for k, v in embedded_s3.env().items() if k != "AWS_ENDPOINT_URL"})
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return env


class Applications:
    """The writer and the reader, each in a process group of its own, with its log."""

    def __init__(self, spec_file: Path, env: dict[str, str]) -> None:
        self.markers = spec_file.parent
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        for role in ("reader", "writer"):
            with (self.markers / f"{role}.log").open("wb") as log:
                self.processes[role] = subprocess.Popen(
                    [sys.executable, str(APP), str(spec_file), role],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

    def log(self, role: str) -> str:
        return (self.markers / f"{role}.log").read_text(errors="replace")

    def wait_marker(self, name: str) -> Path:
        """The marker once an application wrote it; fails with the log of an application that
        failed, or of both once they have ended without it."""
        path = self.markers / name

        def written() -> bool:
            if path.exists():
                return True
            ended = {role: process.poll() for role, process in self.processes.items()}
            for role, code in ended.items():
                if code is not None and (code != 0 or None not in ended.values()):
                    raise AssertionError(f"{role} exited ({code}) before {name}:\n{self.log(role)[-5000:]}")
            return False

        wait_until(written, f"marker {name}", APP_BOUND_SECONDS)
        return path

    def command_lines(self) -> list[str]:
        """The command line of every process the applications started (their JVMs included)."""
        groups = {process.pid for process in self.processes.values()}
        lines = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and os.getpgid(int(entry.name)) in groups:
                    lines.append(
                        (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    )
            except (OSError, ProcessLookupError):
                continue
        return lines

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(60)


@pytest.fixture(scope="module")
def shared_run(
    shared_metastore: SharedMetastore, embedded_s3: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Both applications' run; what B saw in each phase, by case, and the command lines seen while
    A was held."""
    markers = tmp_path_factory.mktemp("shared-metastore")
    bucket = embedded_s3.create_bucket(f"tables-{uuid.uuid4().hex[:12]}")
    locations = {"file": (markers / "tables" / "events").as_uri(), "s3": f"s3a://{bucket}/tables/events"}
    gates = {name: TaskGate(markers / f"gate-{name}") for name in locations}
    spec = {
        "markers": str(markers),
        "password_conf": str(shared_metastore.password_conf),
        "metastore": shared_metastore.spec(),
        "s3": {"endpoint": embedded_s3.endpoint_url, "region": embedded_s3.region},
        "rows": ROWS,
        "cases": [
            {
                "name": name,
                "table": f"db_{name}.events",
                "location": location,
                "days": list(DAYS),
                "gate": gates[name].column(f"id = {ROWS - 1}"),
            }
            for name, location in locations.items()
        ],
    }
    (markers / "spec.json").write_text(json.dumps(spec))
    apps = Applications(markers / "spec.json", app_env(embedded_s3))
    run: dict[str, Any] = {"seen": {}, "command_lines": [], "locations": locations}
    try:
        for name, gate in gates.items():
            apps.wait_marker(f"held-{name}")
            run["command_lines"] += apps.command_lines()
            for phase in PHASES:
                if phase == "written":
                    gate.open()
                    apps.wait_marker(f"written-{name}")
                (markers / f"look-{name}-{phase}").write_text("look")
                seen = apps.wait_marker(f"seen-{name}-{phase}.json")
                run["seen"][name, phase] = json.loads(seen.read_text())
        for role, process in apps.processes.items():
            assert process.wait(APP_BOUND_SECONDS) == 0, f"{role} failed:\n{apps.log(role)[-5000:]}"
        run["logs"] = {role: apps.log(role) for role in apps.processes}
        yield run
    finally:
        for gate in gates.values():
            gate.open()
        apps.close()
        embedded_s3.delete_bucket(bucket)


def hadoop_location(location: str) -> str:
    """How the metastore spells a location (Hadoop's ``file:/x`` for ``file:///x``)."""
    return location.replace("file:///", "file:/", 1)


@pytest.mark.parametrize("case", ["file", "s3"])
def test_reader_never_sees_an_uncommitted_day(shared_run: dict[str, Any], case: str) -> None:
    first, second = DAYS
    seen = shared_run["seen"][case, "held"]
    assert seen["rows"] == {first: ROWS}
    assert seen["pruned"] == {first: ROWS, second: 0}
    assert list(seen["partitions"]) == [f"dt={first}"]


@pytest.mark.parametrize("case", ["file", "s3"])
def test_reader_sees_the_committed_day_and_its_partition(shared_run: dict[str, Any], case: str) -> None:
    seen = shared_run["seen"][case, "written"]
    assert seen["rows"] == dict.fromkeys(DAYS, ROWS)
    assert seen["pruned"] == dict.fromkeys(DAYS, ROWS)
    table = hadoop_location(shared_run["locations"][case])
    assert seen["partitions"] == {f"dt={day}": f"{table}/dt={day}" for day in DAYS}


def test_metastore_password_reaches_no_command_line_and_no_log(
    shared_run: dict[str, Any], shared_metastore: SharedMetastore
) -> None:
    password = shared_metastore.database.password
    assert shared_run["command_lines"], "no process of the applications was seen"
    assert any("shared_metastore_app.py" in line for line in shared_run["command_lines"])
    assert not [line for line in shared_run["command_lines"] if password in line]
    assert not [role for role, log in shared_run["logs"].items() if password in log]
