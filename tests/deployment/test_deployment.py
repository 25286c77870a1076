"""The provider as a platform team deploys it, driven only through Airflow's REST API.

One deployment (conftest.py: the checkout's wheel, PostgreSQL, scheduler, dag-processor, triggerer
and api-server on LocalExecutor, the embedded S3, local Spark) serves every check, in this order,
each building on the store the previous ones left:

1. three days at once: the scheduler's own run of the daily ingest (the day that ended, through the
   data-interval timetable) and two manual days; a consumer's deferrable sensor waits for one of
   them in the real triggerer and is resumed by its commit;
2. a backfill of two days, in parallel;
3. the report DAG ran once per committed day, with the day as its partition key;
4. a day cleared through the API is replaced: its partition holds only the new try's files;
5. a task process SIGKILLed mid-write under the real scheduler: once after its job committed (the
   orphan alive: the retry adopts it), once before (the orphan stalled: the retry fences it);
6. the commit report pages of a committed day, the adopted retry and the fenced try, opened from
   the tasks' extra links in a real headless Chromium after signing in; refused without a session;
   the Commits page from Airflow's Browse menu, and a task instance's Commit tab;
7. the cleanup DAG's scheduled run aborts the uploads under its root and spares ``out/dataset10``;
8. no secret in any log under ``$AIRFLOW_HOME`` nor in any XCom.

Every wait polls the API, the store or a marker file with a bound; nothing sleeps.
"""

from __future__ import annotations

import io
import json
import os
import signal
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from deployment_services import Deployment, group_alive
from support.invariants import assert_nothing_left_behind, pending_uploads
from support.waiting import wait_until

from airflow_commit_provider.core.job_control import JobState, inspect_job
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.hdfs import HdfsStore
from airflow_commit_provider.core.store.s3 import S3Store
from airflow_commit_provider.core.store.settings import HdfsSettings
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster
from airflow_commit_provider.operators.durable_submission import job_tag
from airflow_commit_provider.report.addresses import commits_page
from airflow_commit_provider.success.check import load_success
from airflow_commit_provider.tries.plan import try_job_id

INGEST = "daily_partitioned_ingest"
REPORT = "daily_events_report"
AWAIT = "await_committed_day"
KILLED = "killed_write"
CLEANUP = "upload_cleanup"
DURABLE = "durable_yarn_write"
#: The rows tests/hadoop/gated_yarn_app.py writes.
GATED_ROWS = 200
#: Bound of a whole DAG run that runs Spark (several at once, on two busy cores: a cleared run
#: took more than 300 s in a CI run whose three lanes shared them).
RUN_BOUND_SECONDS = 600.0
#: Bound of a short wait: a task reaching a state, a marker appearing, a process exiting.
EVENT_BOUND_SECONDS = 120.0
MANUAL_DAYS = ("2024-01-01", "2024-01-02")
BACKFILL_DAYS = ("2024-01-03", "2024-01-04")
KILLED_ROWS = 300

#: The first test also waits for the deployment's virtualenv, which a new key installs (minutes).
pytestmark = pytest.mark.timeout(1500)


def iso_day(day: str) -> str:
    return f"{day}T00:00:00Z"


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def store(deployment: Deployment) -> Iterator[S3Store]:
    store = deployment.s3.store()
    yield store
    store.close()


@pytest.fixture(scope="module")
def table(deployment: Deployment) -> StorePath:
    return StorePath("s3", deployment.bucket, "warehouse/events")


@pytest.fixture(scope="module")
def written() -> dict[str, dict[str, Any]]:
    """Each committed day's run and the XCom of its write, as the checks find them."""
    return {}


@pytest.fixture(scope="module")
def other_destinations() -> list[str]:
    """Destinations written besides the daily table and the killed writes' (the durable YARN
    write's, when it ran), which the Commits page lists too."""
    return []


def unpause(deployment: Deployment, dag_id: str) -> None:
    deployment.api.patch(f"/dags/{dag_id}", {"is_paused": False})


def clear_run(deployment: Deployment, dag_id: str, run_id: str) -> None:
    """Clear every task of a finished run through the API, and wait until the run restarts."""
    api = deployment.api
    api.post(
        f"/dags/{dag_id}/clearTaskInstances", {"dry_run": False, "dag_run_id": run_id, "only_failed": False}
    )
    wait_until(
        lambda: api.run(dag_id, run_id)["state"] != "success",
        "the cleared run to restart",
        EVENT_BOUND_SECONDS,
    )


def trigger(
    deployment: Deployment, dag_id: str, run_id: str, conf: dict[str, Any], day: str | None = None
) -> None:
    body: dict[str, Any] = {"dag_run_id": run_id, "conf": conf, "logical_date": iso_day(day) if day else None}
    deployment.api.post(f"/dags/{dag_id}/dagRuns", body)


def day_of(run: dict[str, Any]) -> str:
    return run["logical_date"][:10]


def record_day(
    deployment: Deployment, written: dict[str, dict[str, Any]], run: dict[str, Any]
) -> dict[str, Any]:
    """Check one finished ingest run's XComs and the day's partition; remember them for later checks."""
    api, day = deployment.api, day_of(run)
    write = api.xcom(INGEST, run["dag_run_id"], "write_partition")
    landed = api.xcom(INGEST, run["dag_run_id"], "land_source_data")
    checked = api.xcom(INGEST, run["dag_run_id"], "check_partition")
    waited = api.xcom(INGEST, run["dag_run_id"], "wait_for_success")
    assert write["partitions"] == [f"dt={day}"] and write["rows"] == landed["rows"], write
    assert checked["rows"] == landed["rows"] and checked["job_id"] == write["job_id"] == waited["job_id"]
    assert waited["rows"] == landed["rows"], "the sensor's XCom carries the committed rows"
    written[day] = {"run": run, "write": write, "rows": landed["rows"]}
    return written[day]


def day_files(store: S3Store, table: StorePath, day: str) -> dict[str, str | None]:
    partition = table.join(f"dt={day}")
    return {s.path.relative_to(table): s.etag for s in store.list_files(partition)}


def assert_one_copy_of_day(store: S3Store, table: StorePath, day: str, job_id: str, rows: int) -> None:
    """The day's partition holds exactly the files its _SUCCESS (this job's) lists, with the landed rows."""
    import pyarrow.parquet as pq

    partition = table.join(f"dt={day}")
    success = load_success(store, partition)
    assert success.job_id == job_id and success.partitions == [f"dt={day}"]
    listed = {StorePath.from_uri(f.uri).relative_to(table) for f in success.iter_all_files(store, partition)}
    present = {name for name in day_files(store, table, day) if not name.endswith("/_SUCCESS")}
    assert present == listed, f"dt={day} holds {sorted(present)}, its _SUCCESS lists {sorted(listed)}"
    read = sum(
        pq.ParquetFile(io.BytesIO(store.read_bytes(table.join(name)))).metadata.num_rows for name in present
    )
    assert read == rows, f"dt={day}: {read} rows, {rows} landed"


# 1. Three days at once; the deferrable sensor in the triggerer -------------------------------------
def test_three_days_at_once_and_a_sensor_resumed_by_the_triggerer(
    deployment: Deployment, store: S3Store, table: StorePath, written: dict[str, dict[str, Any]]
) -> None:
    api = deployment.api
    for dag_id in (REPORT, AWAIT):
        unpause(deployment, dag_id)
    # A consumer waits for a day that is not there yet: its sensor defers to the triggerer.
    awaited = MANUAL_DAYS[1]
    trigger(deployment, AWAIT, "await_day", {"day": awaited})
    api.wait_task_state(AWAIT, "await_day", "wait_for_day", "deferred", EVENT_BOUND_SECONDS)

    # The scheduler's own run (catchup=False: the last whole day) and two manual days, at once.
    unpause(deployment, INGEST)
    for day in MANUAL_DAYS:
        trigger(deployment, INGEST, f"day_{day}", {}, day)
    scheduled = wait_until(
        lambda: [r for r in api.runs(INGEST) if r["run_type"] == "scheduled"],
        "the scheduled run",
        EVENT_BOUND_SECONDS,
    )
    scheduled_run = min(scheduled, key=lambda r: r["logical_date"])  # a run past midnight UTC would be a 2nd
    run_ids = [scheduled_run["dag_run_id"], *(f"day_{day}" for day in MANUAL_DAYS)]
    runs = [api.wait_run(INGEST, run_id, RUN_BOUND_SECONDS) for run_id in run_ids]

    # The scheduled run ingested the day that had ended when it ran, not the day it ran on.
    start, end = (
        parse_time(scheduled_run["data_interval_start"]),
        parse_time(scheduled_run["data_interval_end"]),
    )
    assert end - start == timedelta(days=1) and start.time() == datetime.min.time(), scheduled_run
    assert parse_time(runs[0]["logical_date"]) == start and end <= parse_time(runs[0]["start_date"])
    assert (runs[0]["logical_date"][:10], day_of(runs[1]), day_of(runs[2])) == (
        start.date().isoformat(),
        *MANUAL_DAYS,
    )
    for run in runs:
        record = record_day(deployment, written, run)
        assert_one_copy_of_day(store, table, day_of(run), record["write"]["job_id"], record["rows"])

    assert_nothing_left_behind(store, table)

    # The three writes ran at once: each started before any of them ended.
    writes = [api.task_instances(INGEST, run_id)["write_partition"] for run_id in run_ids]
    assert max(parse_time(w["start_date"]) for w in writes) < min(
        parse_time(w["end_date"]) for w in writes
    ), [(w["start_date"], w["end_date"]) for w in writes]

    # The consumer went through the deferred state and the triggerer resumed it on the commit.
    api.wait_run(AWAIT, "await_day", RUN_BOUND_SECONDS)
    sensor = api.task_instances(AWAIT, "await_day")["wait_for_day"]
    assert sensor["try_number"] == 1, "resumed from the trigger, not retried"
    accepted = api.xcom(AWAIT, "await_day", "wait_for_day")
    assert accepted["job_id"] == written[awaited]["write"]["job_id"], accepted
    log = api.task_log(AWAIT, "await_day", "wait_for_day", 1)
    assert "deferring to the triggerer" in log, log[-3000:]
    # The triggerer writes what a trigger logs beside the task's log: ours looked until the commit.
    task_logs = deployment.home / "logs" / f"dag_id={AWAIT}" / "run_id=await_day" / "task_id=wait_for_day"
    trigger_logs = "".join(
        p.read_text(errors="replace") for p in task_logs.glob("attempt=1.log.trigger.*.log")
    )
    waited_in_trigger = (
        "does not exist yet; checking again every",
        "/_SUCCESS qualifies",
        "Trigger fired event",
    )
    assert all(line in trigger_logs for line in waited_in_trigger), trigger_logs[-3000:]


# 2. A backfill --------------------------------------------------------------------------------------
def test_a_backfill_runs_its_days_in_parallel(
    deployment: Deployment, store: S3Store, table: StorePath, written: dict[str, dict[str, Any]]
) -> None:
    api = deployment.api
    before = {day: day_files(store, table, day) for day in written}
    backfill = api.post(
        "/backfills",
        {
            "dag_id": INGEST,
            "from_date": iso_day(BACKFILL_DAYS[0]),
            "to_date": iso_day(BACKFILL_DAYS[-1]),
            "max_active_runs": len(BACKFILL_DAYS),
        },
    )

    def backfill_runs() -> list[dict[str, Any]] | None:
        runs = [r for r in api.runs(INGEST) if r["run_type"] == "backfill"]
        return runs if len(runs) == len(BACKFILL_DAYS) else None

    runs = wait_until(backfill_runs, f"the runs of backfill {backfill['id']}", EVENT_BOUND_SECONDS)
    assert sorted(day_of(r) for r in runs) == list(BACKFILL_DAYS)
    finished = [api.wait_run(INGEST, r["dag_run_id"], RUN_BOUND_SECONDS) for r in runs]
    for run in finished:
        record = record_day(deployment, written, run)
        assert_one_copy_of_day(store, table, day_of(run), record["write"]["job_id"], record["rows"])
    writes = [api.task_instances(INGEST, r["dag_run_id"])["write_partition"] for r in finished]
    assert max(parse_time(w["start_date"]) for w in writes) < min(parse_time(w["end_date"]) for w in writes)
    assert {day: day_files(store, table, day) for day in before} == before, "other days untouched"
    assert_nothing_left_behind(store, table)


# 3. Downstream runs per partition -------------------------------------------------------------------
def report_runs(deployment: Deployment, count: int) -> list[dict[str, Any]]:
    """The report DAG's runs once there are `count` of them and all ended."""

    def ended() -> list[dict[str, Any]] | None:
        runs = deployment.api.runs(REPORT)
        if len(runs) > count:
            raise AssertionError(
                f"{len(runs)} report runs, expected {count}: {[r.get('partition_key') for r in runs]}"
            )
        return runs if len(runs) == count and all(r["state"] in ("success", "failed") for r in runs) else None

    return wait_until(ended, f"{count} report runs", RUN_BOUND_SECONDS, interval=0.5)


def test_the_report_runs_once_per_committed_day(
    deployment: Deployment, written: dict[str, dict[str, Any]]
) -> None:
    assert len(written) == len(MANUAL_DAYS) + 1 + len(BACKFILL_DAYS), (
        "runs after the checks that commit the days"
    )
    runs = report_runs(deployment, len(written))
    assert sorted(r["partition_key"] for r in runs) == sorted(written), runs
    for run in runs:
        assert run["state"] == "success", run
        report = deployment.api.xcom(REPORT, run["dag_run_id"], "report_day")
        day = run["partition_key"]
        assert (report["day"], report["partition_key"]) == (day, day)
        assert report["job_id"] == written[day]["write"]["job_id"] and report["rows"] == written[day]["rows"]


# 4. A cleared day is replaced -----------------------------------------------------------------------
def test_a_cleared_day_is_replaced(
    deployment: Deployment, store: S3Store, table: StorePath, written: dict[str, dict[str, Any]]
) -> None:
    api = deployment.api
    day = MANUAL_DAYS[0]
    run_id = written[day]["run"]["dag_run_id"]
    old_job = written[day]["write"]["job_id"]
    old_files = day_files(store, table, day)
    others = {d: day_files(store, table, d) for d in written if d != day}
    clear_run(deployment, INGEST, run_id)
    run = api.wait_run(INGEST, run_id, RUN_BOUND_SECONDS)
    record = record_day(deployment, written, run)
    new_job = record["write"]["job_id"]
    assert (
        new_job != old_job
        and record["write"]["try_number"] == 2
        and record["write"]["adopted_from_try"] is None
    )
    assert_one_copy_of_day(store, table, day, new_job, record["rows"])
    new_files = day_files(store, table, day)
    assert not set(old_files) - {f"dt={day}/_SUCCESS"} & set(new_files), "none of the old files survived"
    assert {d: day_files(store, table, d) for d in others} == others, "the other days untouched"
    assert_nothing_left_behind(store, table)
    # The replaced day is reported again, from its new job.
    runs = report_runs(deployment, len(written) + 1)
    latest = max((r for r in runs if r["partition_key"] == day), key=lambda r: r["run_after"])
    assert deployment.api.xcom(REPORT, latest["dag_run_id"], "report_day")["job_id"] == new_job
    # The day checks are done: no scheduled run past midnight UTC may add a day to what follows.
    deployment.api.patch(f"/dags/{INGEST}", {"is_paused": True})


# 5. A task process SIGKILLed mid-write ----------------------------------------------------------------
def task_process(ti_id: str) -> int:
    """The pid of the task process of task instance `ti_id` (``airflow worker -- <id>``), not its supervisor."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if ti_id in command and "LocalExecutor" not in command:
            found.append(int(entry.name))
    assert len(found) == 1, f"task processes of {ti_id}: {found}"
    return found[0]


def kill_at_gate(deployment: Deployment, run_id: str, markers: Path, gate: str) -> dict[str, Any]:
    """Wait for try 1's job at `gate`, SIGKILL its task process; the orphaned job's start marker."""
    api = deployment.api

    def at_gate() -> bool:
        if api.run(KILLED, run_id)["state"] == "failed":
            raise AssertionError(f"{run_id} failed before its gate")
        return (markers / f"gate-{gate}-try1.json").exists()

    wait_until(at_gate, f"try 1 of {run_id} at its gate {gate}", RUN_BOUND_SECONDS, interval=0.25)
    ti = api.task_instances(KILLED, run_id)["write"]
    assert ti["state"] == "running" and ti["try_number"] == 1, ti
    os.kill(task_process(ti["id"]), signal.SIGKILL)
    started = json.loads((markers / "started-try1.json").read_text())
    assert group_alive(started["pgid"]), "the orphaned Spark job died with its task process"
    return started


def release(markers: Path, started: dict[str, Any]) -> None:
    (markers / "release-try1").write_text("go")
    wait_until(
        lambda: not group_alive(started["pgid"]), "the orphaned spark-submit to exit", EVENT_BOUND_SECONDS
    )


def assert_one_copy(store: S3Store, destination: StorePath, job_id: str) -> None:
    """Exactly the files the job's _SUCCESS lists, with every row once; nothing pending, no temp tree."""
    import pyarrow.parquet as pq

    success = load_success(store, destination)
    assert success.job_id == job_id
    listed = {
        StorePath.from_uri(f.uri).relative_to(destination) for f in success.iter_all_files(store, destination)
    }
    present = {s.path.relative_to(destination) for s in store.list_files(destination)}
    data = {name for name in present if not name.startswith(("_", "."))}
    assert data == listed, f"{destination} holds {sorted(data)}, its _SUCCESS lists {sorted(listed)}"
    ids = []
    for name in data:
        ids += pq.read_table(io.BytesIO(store.read_bytes(destination.join(name)))).column("id").to_pylist()
    assert sorted(ids) == list(range(KILLED_ROWS)), "every row exactly once"
    assert_nothing_left_behind(store, destination)


def test_a_killed_task_whose_job_committed_is_adopted_by_the_retry(
    deployment: Deployment, store: S3Store
) -> None:
    api, markers = deployment.api, deployment.markers / "adopt"
    markers.mkdir()
    destination = StorePath("s3", deployment.bucket, "killed/adopt")
    unpause(deployment, KILLED)
    trigger(deployment, KILLED, "adopt", {"case": "adopt", "markers": str(markers), "gate": "after-commit"})
    started = kill_at_gate(deployment, "adopt", markers, "after-commit")
    job = started["job_id"]
    assert inspect_job(store, destination, job).state is JobState.COMMITTED

    api.wait_run(KILLED, "adopt", RUN_BOUND_SECONDS)
    tries = {t["try_number"]: t["state"] for t in api.tries(KILLED, "adopt", "write")}
    assert tries == {1: "failed", 2: "success"}, tries
    summary = api.xcom(KILLED, "adopt", "write")
    assert summary["job_id"] == job and summary["adopted_from_try"] == 1 and summary["rows"] == KILLED_ROWS
    assert not (markers / "started-try2.json").exists(), "the retry ran no Spark job"
    assert group_alive(started["pgid"]), "the orphan was alive while the retry adopted its job"
    release(markers, started)
    assert inspect_job(store, destination, job).delivered
    assert_one_copy(store, destination, job)


def test_a_killed_task_whose_job_stalled_is_fenced_by_the_retry(
    deployment: Deployment, store: S3Store
) -> None:
    api, markers = deployment.api, deployment.markers / "fence"
    markers.mkdir()
    destination = StorePath("s3", deployment.bucket, "killed/fence")
    unpause(deployment, KILLED)
    trigger(deployment, KILLED, "fence", {"case": "fence", "markers": str(markers), "gate": "before-commit"})
    started = kill_at_gate(deployment, "fence", markers, "before-commit")
    orphan = started["job_id"]
    assert pending_uploads(store, destination), "the orphan's uploads are pending"

    api.wait_run(KILLED, "fence", RUN_BOUND_SECONDS)
    tries = {t["try_number"]: t["state"] for t in api.tries(KILLED, "fence", "write")}
    assert tries == {1: "failed", 2: "success"}, tries
    summary = api.xcom(KILLED, "fence", "write")
    assert summary["job_id"] != orphan and summary["adopted_from_try"] is None and summary["try_number"] == 2
    assert f"Fenced job {orphan} of try 1, which was still active" in api.task_log(
        KILLED, "fence", "write", 2
    )
    assert inspect_job(store, destination, orphan).state is JobState.ABORTED

    # The stalled orphan wakes up and tries to commit: refused, it leaves nothing.
    release(markers, started)
    result = json.loads((markers / "result-try1.json").read_text())
    assert not result["ok"], result
    assert inspect_job(store, destination, orphan).state is JobState.ABORTED
    assert_one_copy(store, destination, summary["job_id"])


# 5b. A YARN cluster-mode try whose worker is SIGKILLed: the retry reconnects -----------------------------
def log_events(deployment: Deployment, dag_id: str, run_id: str, try_number: int) -> list[dict[str, Any]]:
    """The structured lines of a try's task log (each with its ``timestamp`` and ``event``)."""
    path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/write/logs/{try_number}"
    content = deployment.api.get(path, full_content=True)["content"]
    return [line for line in content if isinstance(line, dict)]


def logged_at(events: list[dict[str, Any]], text: str) -> datetime:
    """When the first line holding `text` was logged."""
    found = next((e for e in events if text in str(e.get("event", ""))), None)
    assert found is not None, f"no log line holds {text!r}"
    return parse_time(found["timestamp"])


def rm_apps(hadoop_cluster: HadoopCluster, job_ids: list[str]) -> list[dict[str, Any]]:
    """The applications the ResourceManager knows with one of these jobs' tags."""
    tags = ",".join(job_tag(job_id) for job_id in job_ids)
    answer = httpx.get(f"{hadoop_cluster.rm_webapp_url}/ws/v1/cluster/apps", params={"applicationTags": tags})
    answer.raise_for_status()
    return sorted((answer.json().get("apps") or {}).get("app") or [], key=lambda app: app["id"])


def hdfs_rows(store: HdfsStore, destination: StorePath) -> list[int]:
    import pyarrow.parquet as pq

    rows: list[int] = []
    for status in store.list_files(destination):
        name = status.path.relative_to(destination)
        if not any(part.startswith(("_", ".")) for part in name.split("/")):
            rows += pq.read_table(io.BytesIO(store.read_bytes(status.path))).column("id").to_pylist()
    return sorted(rows)


def test_a_sigkilled_workers_yarn_application_is_reconnected_to_and_committed_once(
    deployment: Deployment, hadoop_cluster: HadoopCluster, other_destinations: list[str]
) -> None:
    """Try 1 submits in YARN cluster mode (RM tracking, durable) and stores its application; its
    application stops at a gate before the job commits and the task process is SIGKILLed. Try 2
    reconnects (the stored ID and the job's tag both name it), waits, and adopts the job once the
    gate is released: 1 application, 1 copy. Then a clear: try 3 finds the stored application
    ended and its job delivered, and writes again in a new application. The timeline goes to the
    log of this test (``-s``) and into the markers folder."""
    api, markers = deployment.api, deployment.markers / "durable"
    markers.mkdir()
    run_id, key = "durable", TaskKey(DURABLE, "write", "durable", -1)
    destination = StorePath.parse(f"{hadoop_cluster.fs_default_name}/deployment/durable")
    store = HdfsStore(HdfsSettings(webhdfs_url=hadoop_cluster.webhdfs_url))
    other_destinations.append(destination.uri())
    unpause(deployment, DURABLE)
    trigger(deployment, DURABLE, run_id, {"case": "durable", "markers": str(markers)})

    def at_gate() -> bool:
        if api.run(DURABLE, run_id)["state"] == "failed":
            raise AssertionError(f"{run_id} failed before its gate:\n{api.describe_run(DURABLE, run_id)}")
        return (markers / "gate-try1.json").exists()

    wait_until(at_gate, "try 1's application at its gate", RUN_BOUND_SECONDS, interval=0.25)
    ti = api.task_instances(DURABLE, run_id)["write"]
    assert ti["state"] == "running" and ti["try_number"] == 1, ti
    application = json.loads((markers / "started-try1.json").read_text())["application_id"]
    os.kill(task_process(ti["id"]), signal.SIGKILL)
    killed_at = datetime.now().astimezone()

    def reconnected() -> bool:
        tries = {t["try_number"]: t["state"] for t in api.tries(DURABLE, run_id, "write")}
        return tries.get(2) == "running" and f"Reconnecting to application {application}" in api.task_log(
            DURABLE, run_id, "write", 2
        )

    wait_until(reconnected, "try 2 to reconnect to try 1's application", RUN_BOUND_SECONDS, interval=0.5)
    [app] = rm_apps(hadoop_cluster, [try_job_id(key, 1), try_job_id(key, 2)])
    assert (app["id"], app["state"]) == (application, "RUNNING"), "the application outlived its worker"
    (markers / "release-try1").write_text("go")

    api.wait_run(DURABLE, run_id, RUN_BOUND_SECONDS)
    tries = {t["try_number"]: t for t in api.tries(DURABLE, run_id, "write")}
    assert {n: t["state"] for n, t in tries.items()} == {1: "failed", 2: "success"}
    summary = api.xcom(DURABLE, run_id, "write")
    job = try_job_id(key, 1)
    assert (summary["job_id"], summary["adopted_from_try"], summary["rows"]) == (job, 1, GATED_ROWS)
    assert not (markers / "started-try2.json").exists(), "the retry started no application"
    [app] = rm_apps(hadoop_cluster, [try_job_id(key, 1), try_job_id(key, 2)])
    assert (app["id"], app["state"], app["finalStatus"]) == (application, "FINISHED", "SUCCEEDED")
    assert load_success(store, destination).job_id == job
    assert hdfs_rows(store, destination) == list(range(GATED_ROWS)), "one copy: every row once"
    assert inspect_job(store, destination, job).delivered

    events = log_events(deployment, DURABLE, run_id, 2)
    timeline = {
        "submitted (RM startedTime)": datetime.fromtimestamp(app["startedTime"] / 1000).astimezone(),
        "try 1's worker SIGKILLed": killed_at,
        "try 2 started": parse_time(tries[2]["start_date"]),
        "try 2 reconnected": logged_at(events, f"Reconnecting to application {application}"),
        "application ended (RM finishedTime)": datetime.fromtimestamp(
            app["finishedTime"] / 1000
        ).astimezone(),
        "try 2 settled (adopts the job)": logged_at(events, f"Adopting job {job}"),
        "delivered (try 2 ended)": parse_time(tries[2]["end_date"]),
    }
    moments = list(timeline.values())
    assert moments == sorted(moments), timeline
    origin = moments[0]
    lines = [f"{(at - origin).total_seconds():7.1f} s  {what}" for what, at in timeline.items()]
    (markers / "timeline.txt").write_text("\n".join(lines) + "\n")
    print("durable YARN timeline:\n" + "\n".join(lines))

    # A clear: the stored application has ended and its job was delivered, so try 3 writes again.
    clear_run(deployment, DURABLE, run_id)
    api.wait_run(DURABLE, run_id, RUN_BOUND_SECONDS)
    again = api.xcom(DURABLE, run_id, "write")
    assert (again["job_id"], again["try_number"], again["adopted_from_try"]) == (try_job_id(key, 3), 3, None)
    assert f"Application {application} (stored by try 1 for job {job}) has ended" in api.task_log(
        DURABLE, run_id, "write", 3
    )
    apps = rm_apps(hadoop_cluster, [try_job_id(key, n) for n in (1, 2, 3)])
    assert len(apps) == 2 and apps[0]["id"] == application, apps  # try 1's, then the clear's
    assert all(a["finalStatus"] == "SUCCEEDED" for a in apps)
    assert load_success(store, destination).job_id == try_job_id(key, 3)
    assert hdfs_rows(store, destination) == sorted(list(range(GATED_ROWS)) * 2), "appended once more"
    store.close()


# 6. The commit report pages, in a real browser, behind Airflow's login ---------------------------------
def report_link(deployment: Deployment, dag_id: str, run_id: str, task_id: str) -> str:
    """The task instance's "Commit report" extra link, as the UI gets it from the REST API."""
    path = f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/links"
    link = deployment.api.get(path)["extra_links"].get("Commit report")
    assert link and link.startswith("/commit-report/tasks/"), link
    return deployment.api.base + link


def facts(page: Any) -> dict[str, str]:
    """The page's facts list (name: value)."""
    names = page.locator("dl dt").all_inner_texts()
    return dict(zip(names, page.locator("dl dd").all_inner_texts(), strict=True))


def table_rows(page: Any, name: str) -> list[list[str]]:
    return [
        row.locator("td").all_inner_texts() for row in page.locator(f'[data-testid="{name}"] tbody tr').all()
    ]


def test_commit_pages_in_a_browser_behind_login(
    deployment: Deployment,
    written: dict[str, dict[str, Any]],
    table: StorePath,
    other_destinations: list[str],
) -> None:
    """A committed day, an adopted retry and a fenced try each have a page, reached from the task's
    extra link in a real Chromium after signing in; without a session the pages are refused. The
    Commits page of Airflow's Browse menu lists every destination written, and the task instance's
    Commit tab shows its commit. (That a user sees only the DAGs they may read is
    tests/airflow/test_commit_report_ui.py's: this deployment has one user, an admin.)"""
    from support.browser import chromium_page, screenshot, sign_in

    adopt = report_link(deployment, KILLED, "adopt", "write")
    assert httpx.get(adopt, timeout=30).status_code == 401, "a page without a session"
    menu_page = deployment.api.base + commits_page()
    assert httpx.get(menu_page, timeout=30).status_code == 401, "the Commits page without a session"
    assert httpx.get(adopt, cookies={"_token": "forged"}, timeout=30).status_code == 403
    day = MANUAL_DAYS[1]  # a day no test clears, so this page's facts never hang on test 4's outcome
    ingest = report_link(deployment, INGEST, written[day]["run"]["dag_run_id"], "write_partition")
    fence = report_link(deployment, KILLED, "fence", "write")
    with chromium_page() as page:
        sign_in(page, deployment.api.base, "admin", deployment.secrets["the API user's password"])

        page.goto(ingest)
        shown = facts(page)
        assert shown["job"] == written[day]["write"]["job_id"] and shown["state"] == "committed (delivered)"
        assert shown["DAG"] == INGEST and shown["rows"] == f"{written[day]['rows']:,}", shown
        assert [row[0] for row in table_rows(page, "partitions")] == [f"dt={day}"]
        tasks = table_rows(page, "tasks")
        assert tasks and all(row[2] in ("committed", "adopted") for row in tasks), tasks
        phases = [row[0] for row in table_rows(page, "phases")]
        assert phases[0] == "load manifests" and "commit point" in phases and phases[-1] == "write _SUCCESS"
        screenshot(page, "commit-report-committed-day")

        page.goto(adopt)  # try 2 adopted the job try 1 committed before it was killed
        shown = facts(page)
        assert shown["job"] == written_job(deployment, "adopt") and shown["task"] == "write, try 1", shown
        assert shown["state"] == "committed (delivered)"
        screenshot(page, "commit-report-adopted-retry")

        page.goto(fence)  # try 2 fenced try 1's stalled job, then wrote its own
        commits = table_rows(page, "commits")
        orphan = next(row for row in commits if row[1].startswith("aborted"))
        assert "fenced by a later try" in orphan[1] and orphan[4] == "1", commits
        page.get_by_role("link", name=orphan[0]).click()
        page.wait_for_url(lambda url: f"job={orphan[0]}" in url)
        shown = facts(page)
        assert shown["state"] == "aborted" and "fenced by a later try" in shown["abort reason"], shown
        assert shown["task"] == "write, try 1" and table_rows(page, "files") == []
        screenshot(page, "commit-report-fenced-try")

        # The Commits page, from Airflow's Browse menu: every destination written, the day's commit
        # among the table's, a click away from its page (all inside Airflow's frame).
        page.goto(deployment.api.base + "/")
        page.get_by_role("button", name="Browse").click()
        page.get_by_role("menuitem", name="Commits").click()
        page.wait_for_url(lambda url: url.endswith("/plugin/commits"))
        menu_page = page.frame_locator('iframe[title="Commits"]')
        menu_page.locator("h1").wait_for()
        destinations = menu_page.locator('[data-testid="destination-name"]').all_inner_texts()
        killed = f"s3://{deployment.bucket}/killed"
        assert sorted(destinations) == sorted(
            [str(table), f"{killed}/adopt", f"{killed}/fence", *other_destinations]
        ), destinations
        events = menu_page.locator('[data-testid="destination"]').filter(has_text=str(table))
        jobs = events.locator('[data-testid="commits"] tbody tr td:first-child').all_inner_texts()
        job = written[day]["write"]["job_id"]
        assert job in jobs, jobs
        screenshot(page, "commits-page")
        events.get_by_role("link", name=job).click()
        menu_page.locator("dl").wait_for()
        assert facts(menu_page)["job"] == job

        # The task instance's Commit tab: the page of its try's commit.
        path = (
            f"/dags/{INGEST}/runs/{quote(written[day]['run']['dag_run_id'], safe='')}/tasks/write_partition"
        )
        page.goto(deployment.api.base + path)
        page.get_by_role("link", name="Commit", exact=True).click()
        page.wait_for_url(lambda url: url.endswith("/plugin/commit"))
        tab = page.frame_locator('iframe[title="Commit"]')
        tab.locator("dl").wait_for()
        shown = facts(tab)
        assert shown["job"] == job and shown["state"] == "committed (delivered)", shown
        screenshot(page, "commit-tab")


def written_job(deployment: Deployment, run_id: str) -> str:
    return str(deployment.api.xcom(KILLED, run_id, "write")["job_id"])


# 7. The cleanup DAG on its schedule -----------------------------------------------------------------
def test_the_scheduled_cleanup_spares_what_is_out_of_its_scope(
    deployment: Deployment, store: S3Store
) -> None:
    api, client = deployment.api, deployment.s3.client()
    uploads = {}
    for dataset in ("dataset1", "dataset10"):
        key = f"out/{dataset}/part-00000.parquet"
        upload = client.create_multipart_upload(Bucket=deployment.bucket, Key=key)["UploadId"]
        client.upload_part(Bucket=deployment.bucket, Key=key, UploadId=upload, PartNumber=1, Body=b"x" * 1024)
        uploads[dataset] = (key, upload)
    scope = f"s3://{deployment.bucket}/out/dataset1"
    api.post("/variables", {"key": "commit_cleanup_roots", "value": json.dumps([scope])})
    api.post("/variables", {"key": "commit_cleanup_older_than", "value": "0s"})
    unpause(deployment, CLEANUP)
    runs = wait_until(lambda: api.runs(CLEANUP), "the cleanup's scheduled run", EVENT_BOUND_SECONDS)
    run = min(runs, key=lambda r: r["run_after"])  # an hour boundary passed meanwhile would add one
    assert run["run_type"] == "scheduled", run
    api.wait_run(CLEANUP, run["dag_run_id"], RUN_BOUND_SECONDS)
    summary = api.xcom(CLEANUP, run["dag_run_id"], "report")
    assert (summary["roots"], summary["uploads_aborted"], summary["upload_bytes"]) == (1, 1, 1024), summary
    left = {
        (u["Key"], u["UploadId"])
        for u in client.list_multipart_uploads(Bucket=deployment.bucket).get("Uploads", [])
    }
    assert uploads["dataset1"] not in left, "the upload under the root was aborted"
    assert uploads["dataset10"] in left, "out/dataset10 is not under out/dataset1: spared"
    client.abort_multipart_upload(
        Bucket=deployment.bucket, Key=uploads["dataset10"][0], UploadId=uploads["dataset10"][1]
    )


# 8. No credentials in any log or XCom ---------------------------------------------------------------
def test_no_secret_in_any_log_or_xcom(deployment: Deployment) -> None:
    logs = [
        p for p in deployment.home.rglob("*") if p.is_file() and ("logs" in p.parts or p.suffix == ".log")
    ]
    assert any("logs" in p.parts for p in logs) and any(p.parent.name == "services" for p in logs), logs
    xcoms = json.dumps(
        [
            deployment.api.get(
                f"/dags/{x['dag_id']}/dagRuns/{x['run_id']}/taskInstances/{x['task_id']}/xcomEntries/{x['key']}",
                map_index=x["map_index"],
            )
            for x in deployment.api.all_xcoms()
        ]
    )
    for what, secret in deployment.secrets.items():
        leaked = [str(p) for p in logs if secret in p.read_text(errors="replace")]
        assert not leaked, f"{what} is in {leaked}"
        assert secret not in xcoms, f"{what} is in an XCom"
