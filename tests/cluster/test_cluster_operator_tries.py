"""``CommittedSparkSubmitOperator`` across Airflow tries, on the real standalone cluster.

Each try is a task process of its own (operator_try.py: the real operator and SparkSubmitHook
submitting ``cluster_app.py`` to ``spark://127.0.0.1:<port>``), so a dead Airflow worker is a real
SIGKILL of that process. spark-submit runs in a session of its own and lives on: the Spark job is
an orphan. The tests synchronise on the markers the application writes, on the store and on
process exits, never on sleeps.

- a try SIGKILLed while its job runs: the retry fences the orphan and writes, under real speculation
  (a straggler of partition 0 and its speculative copy on the other host both write; the copy
  commits the task): the store holds one copy of every row. The orphan, released later, tries to
  commit, is refused and removes what it wrote; the retry's output is the only copy;
- a try SIGKILLed after its job committed: the retry adopts that job, runs no Spark job and returns
  its summary.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cluster_support import (
    APP,
    EVENT_BOUND_SECONDS,
    assert_speculated,
    cluster_conf,
    connections_env,
    kill_group,
    read_marker,
    submit_env,
    wait_for_group_exit,
    wait_for_marker,
)
from support.one_copy import assert_one_copy, leftovers
from support.standalone import StandaloneCluster, group_alive

from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.tries.plan import try_job_id

TRY_PROCESS = Path(__file__).resolve().parent / "operator_try.py"
ROWS = 1200
PARTITIONS = 3


@dataclass
class Tries:
    """Runs tries of one task instance as separate processes; kills whatever is left at the end."""

    cluster: StandaloneCluster
    s3: EmbeddedS3
    directory: Path
    markers: Path
    event_log_dir: Path
    destination: StorePath
    operator: dict[str, Any]
    key: TaskKey = field(
        default_factory=lambda: TaskKey("cluster_tries", "write", f"manual__{uuid.uuid4().hex}")
    )
    processes: list[subprocess.Popen[str]] = field(default_factory=list)
    orphan_groups: list[int] = field(default_factory=list)

    def job_id(self, try_number: int) -> str:
        return try_job_id(self.key, try_number)

    def start(self, try_number: int) -> subprocess.Popen[str]:
        spec = {
            "operator": self.operator,
            "ti": {
                "dag_id": self.key.dag_id,
                "task_id": self.key.task_id,
                "run_id": self.key.run_id,
                "map_index": self.key.map_index,
                "try_number": try_number,
            },
            "result": str(self.result_path(try_number)),
        }
        spec_path = self.directory / f"try{try_number}.json"
        spec_path.write_text(json.dumps(spec))
        env = {**submit_env(self.s3), **connections_env(self.cluster, self.s3)}
        env = {k: v for k, v in env.items() if not k.startswith("AWS_")}  # S3 only from aws_default
        log = (self.directory / f"try{try_number}.log").open("w")
        process = subprocess.Popen(
            [sys.executable, str(TRY_PROCESS), str(spec_path)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # like a worker's task process: its own group, killed alone
        )
        log.close()
        self.processes.append(process)
        return process

    def result_path(self, try_number: int) -> Path:
        return self.directory / f"result-try{try_number}.json"

    def log(self, try_number: int) -> str:
        path = self.directory / f"try{try_number}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def run(self, try_number: int) -> dict[str, Any]:
        """A whole try, to its end; its result (XCom value or error)."""
        process = self.start(try_number)
        try:
            process.wait(timeout=EVENT_BOUND_SECONDS)
        except subprocess.TimeoutExpired:
            kill_group(process.pid)
            raise AssertionError(
                f"try {try_number} did not finish:\n{self.log(try_number)[-5000:]}"
            ) from None
        assert self.result_path(try_number).exists(), self.log(try_number)[-5000:]
        return json.loads(self.result_path(try_number).read_text())

    def kill_at_gate(self, process: subprocess.Popen[str], try_number: int, gate: str) -> dict[str, Any]:
        """SIGKILL the task process once its Spark application waits at `gate`; the driver's start marker."""
        wait_for_marker(self.markers / f"gate-{gate}-try{try_number}.json", unless_exited=process)
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=EVENT_BOUND_SECONDS) == -signal.SIGKILL
        started = read_marker(self.markers / f"started-try{try_number}.json")
        self.orphan_groups.append(started["pgid"])
        return started

    def release(self, try_number: int) -> None:
        (self.markers / f"release-try{try_number}").write_text("go")

    def close(self) -> None:
        """Kill every try process and every Spark application a try started, even after a failure."""
        for process in self.processes:
            kill_group(process.pid)
        groups = set(self.orphan_groups)
        for started in self.markers.glob("started-try*.json"):
            groups.add(read_marker(started)["pgid"])
        for pgid in groups:
            kill_group(pgid)


@pytest.fixture
def tries(
    spark_cluster: StandaloneCluster,
    embedded_s3: EmbeddedS3,
    cluster_bucket: str,
    markers: Path,
    event_log_dir: Path,
    tmp_path: Path,
) -> Iterator[Tries]:
    made: list[Tries] = []

    def make(committer: str, conflict_mode: str, gate: str) -> Tries:
        destination = StorePath("s3", cluster_bucket, f"tables/{committer}")
        app_args = ["--markers", str(markers), "--rows", str(ROWS), "--partitions", str(PARTITIONS)]
        app_args += ["--gate", gate, "--gate-on-try", "1", "--straggler"]
        if committer == "partitioned":
            app_args.append("--partitioned")
        operator = {
            "application": str(APP),
            "destination": str(destination),
            "committer": committer,
            "conflict_mode": conflict_mode,
            "conf": cluster_conf(event_log_dir),
            "application_args": app_args,
            "name": "cluster-tries",
        }
        made.append(
            Tries(spark_cluster, embedded_s3, tmp_path, markers, event_log_dir, destination, operator)
        )
        return made[-1]

    yield make  # type: ignore[misc]
    for t in made:
        t.close()


@pytest.fixture
def store(embedded_s3: EmbeddedS3) -> Iterator[S3Store]:
    store = embedded_s3.store()
    yield store
    store.close()


def test_killed_try_orphan_is_fenced_and_aborts_itself(tries: Any, store: S3Store) -> None:
    run: Tries = tries("magic", "append", "before-commit")
    job1, job2 = run.job_id(1), run.job_id(2)

    # Try 1: its Spark job has written every task (pending uploads) and waits before job commit;
    # then the task process dies. spark-submit, in its own session, lives on.
    first = run.start(1)
    started = run.kill_at_gate(first, 1, "before-commit")
    assert started["job_id"] == job1
    assert group_alive(started["pgid"]), "the orphaned Spark job died with its task process"
    assert inspect_job(store, run.destination, job1).state is JobState.ACTIVE
    assert leftovers(store, run.destination)["pending uploads"], "the orphan wrote nothing yet"

    # Try 2: fences job 1 (its uploads and temp trees go), then runs and commits job 2.
    second = run.run(2)
    assert second["ok"], run.log(2)[-5000:]
    assert second["summary"]["job_id"] == job2 and second["summary"]["rows"] == ROWS
    assert inspect_job(store, run.destination, job1).state is JobState.ABORTED
    started2 = read_marker(run.markers / "started-try2.json")
    assert started2["job_id"] == job2
    assert read_marker(run.markers / "result-try2.json")["summary"]["tasks"] == PARTITIONS
    # The retry's write ran with real speculation: a speculative copy of partition 0 on the other
    # host, and the straggler and its copy both wrote files (the race was real).
    assert_speculated(run.event_log_dir, started2["app_id"])
    assert (run.markers / "attempt-try2-p0-0.json").exists()
    assert (run.markers / "try2-p0-copy-committed").exists()

    # The orphan comes back and tries to commit: refused, and it leaves nothing.
    run.release(1)
    orphan = wait_for_marker(run.markers / "result-try1.json")
    assert not orphan["ok"] and "Fenced" in orphan["error"], orphan
    wait_for_group_exit(started["pgid"], "the orphaned spark-submit")
    assert inspect_job(store, run.destination, job1).state is JobState.ABORTED

    success = assert_one_copy(store, run.destination, ROWS, job2)
    assert (success.committer, success.rows) == ("magic", ROWS)


def test_retry_adopts_a_try_that_committed(tries: Any, store: S3Store) -> None:
    run: Tries = tries("partitioned", "replace", "after-commit")
    job1 = run.job_id(1)

    # Try 1: its job commits, then the task process dies before the operator saw spark-submit end.
    first = run.start(1)
    started = run.kill_at_gate(first, 1, "after-commit")
    assert started["job_id"] == job1
    status = inspect_job(store, run.destination, job1)
    assert status.state is JobState.COMMITTED and not status.delivered
    run.release(1)
    wait_for_group_exit(started["pgid"], "try 1's spark-submit")
    assert_speculated(run.event_log_dir, started["app_id"])  # the adopted write ran with real speculation

    # Try 2 adopts job 1: no Spark job, job 1's summary.
    second = run.run(2)
    assert second["ok"], run.log(2)[-5000:]
    summary = second["summary"]
    assert summary["job_id"] == job1 and summary["rows"] == ROWS and summary["adopted_from_try"] == 1
    assert summary["partitions"] == ["part=0", "part=1"]
    assert not (run.markers / "started-try2.json").exists(), "the retry ran a Spark job"
    assert "adopt" in run.log(2).lower()
    assert inspect_job(store, run.destination, job1).delivered

    success = assert_one_copy(store, run.destination, ROWS, job1)
    assert success.committer == "partitioned"
