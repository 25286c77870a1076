"""Asset events and OpenLineage from CommittedSparkSubmitOperator, in Airflow: dag.test() on the fake
spark-submit (fake_spark_submit.py) writing one partition to a file:// table.

- the writer's asset event carries the commit's extra and the partition key ``dt=<day>``;
- the scheduler step that turns queued asset events into runs creates one run of the reader DAG
  (scheduled with ``day_partition_schedule``) for the day, whose task sees that key and extra;
- on Airflow 3.1 and 3.2, where a task cannot give its event a partition key (no
  ``add_partitions``), the event has no key and the commit's extra, this is logged, and the reader
  DAG is a plain asset schedule whose run sees the extra (and no key);
- the real OpenLineage provider (file transport, tests/support/openlineage.py) records START and
  COMPLETE (or FAIL) with one output dataset, its statistics and partitions, and the Spark job
  was given the parent-job confs naming the task's OpenLineage run;
- a job of 5,000 partitions emits one event without partition keys (not 5,000), whose extra lists
  the first 100, counts them all and names the job record that lists every one; a DAG scheduled
  on the asset runs once on it. Up to `PARTITION_EVENTS` partitions each is its own event.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from airflow import __version__ as AIRFLOW_VERSION
from dag_runs import (
    PARTITION_KEYS,
    create_asset_triggered_runs,
    load_dag,
    run_dag,
    run_task,
    start_run,
    task_instances,
    xcom,
)
from fake_spark import FakeSpark, install_fake_spark
from support.openlineage import lineage_events

from airflow_commit_provider import assets
from airflow_commit_provider.core.formats.file_list import iter_partitions
from airflow_commit_provider.core.job_records import load_job_record
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import open_store
from airflow_commit_provider.devtools.demo import asset_events

WRITER = "test_committed_assets_writer"
READER = "test_committed_assets_reader"
WIDE_WRITER = "test_committed_assets_wide_writer"
WIDE_READER = "test_committed_assets_wide_reader"
#: Partitions of the wide job: far past `assets.PARTITION_EVENTS`.
WIDE_PARTITIONS = 5000
DAY = datetime(2024, 1, 2, tzinfo=timezone.utc)

#: What the writer's event and the reader see as the partition key, on this Airflow.
EVENT_KEY = "dt=2024-01-02" if PARTITION_KEYS else None
RUN_KEY = "2024-01-02" if PARTITION_KEYS else None
NOT_EMITTED = "has no outlet_events[...].add_partitions"


@pytest.fixture
def not_emitted_log(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Any:
    """The info lines of this test saying partition keys are not emitted (said once per process)."""
    monkeypatch.setattr(assets._PartitionsNotEmitted, "logged", False)
    caplog.set_level(logging.INFO, logger=assets.__name__)
    return lambda: [r.getMessage() for r in caplog.records if NOT_EMITTED in r.getMessage()]


def test_the_capability_check_agrees_with_the_airflow_version() -> None:
    assert assets.partition_keys_supported() is PARTITION_KEYS, AIRFLOW_VERSION


def test_day_partition_schedule_is_partitioned_only_where_tasks_emit_partition_keys() -> None:
    table = assets.destination_asset("file:///tmp/table")
    schedule = assets.day_partition_schedule(table)
    if PARTITION_KEYS:
        from airflow.sdk import PartitionedAssetTimetable

        assert isinstance(schedule, PartitionedAssetTimetable)
    else:
        # Airflow 3.2 has PartitionedAssetTimetable, but a DAG on it would never run on our events.
        assert schedule == [table], f"Airflow {AIRFLOW_VERSION}: a plain asset schedule"


class _Event:
    """An outlet event accessor as Airflow 3.1/3.2 have it (no add_partitions), or with one (3.3)."""

    def __init__(self, with_add_partitions: bool) -> None:
        self.extra: dict[str, Any] = {}
        self.keys: list[str] = []
        if with_add_partitions:
            self.add_partitions = self.keys.extend


class _Outlets:
    """``context["outlet_events"]`` for one asset (not a dict: Airflow 3.1's ``Asset`` is unhashable)."""

    def __init__(self, asset: Any, event: _Event) -> None:
        self.asset, self.event = asset, event

    def __getitem__(self, asset: Any) -> _Event:
        assert asset == self.asset
        return self.event


@pytest.mark.parametrize("with_add_partitions", [True, False], ids=["3.3", "3.1-3.2"])
def test_emit_commit_event_adds_the_keys_or_says_once_that_it_cannot(
    with_add_partitions: bool, not_emitted_log: Any
) -> None:
    table = assets.destination_asset("file:///tmp/table")
    extra = {"job_id": "j", "partitions": ["dt=2024-01-01", "dt=2024-01-02"], "partition_count": 2}
    for _ in range(2):
        event = _Event(with_add_partitions)
        context = {"outlet_events": _Outlets(table, event)}
        assets.emit_commit_event(context, table, dict(extra), ["dt=2024-01-01", "dt=2024-01-02"])
        assert event.extra == extra
        assert event.keys == (["dt=2024-01-01", "dt=2024-01-02"] if with_add_partitions else [])
    assert len(not_emitted_log()) == (0 if with_add_partitions else 1), "logged once per process"
    assets.emit_commit_event({}, table, extra, ["dt=1"])  # outside a task (no outlet_events): a no-op


@pytest.mark.parametrize("with_add_partitions", [True, False], ids=["3.3", "3.1-3.2"])
@pytest.mark.parametrize("count", [assets.PARTITION_EVENTS, assets.PARTITION_EVENTS + 1])
def test_past_the_cap_one_event_without_keys_stands_for_all_partitions(
    with_add_partitions: bool, count: int, caplog: pytest.LogCaptureFixture
) -> None:
    table = assets.destination_asset("file:///tmp/table")
    partitions = ["", *(f"dt=2024-01-01/shard={n:05d}" for n in range(count))]  # "" is the top level
    result = {"job_id": "j", "committer": "partitioned", "files": count, "bytes": 1, "rows": None}
    extra = assets.commit_extra(result, partitions, partition_list="file:///tmp/table/_airflow_commit/j")
    assert extra["partitions"] == partitions[1 : assets.EXTRA_PARTITIONS + 1]
    assert extra["partition_count"] == count
    listed_in_full = count <= assets.EXTRA_PARTITIONS
    assert ("partition_list" in extra) is not listed_in_full, "named only when the extra lists fewer"

    event = _Event(with_add_partitions)
    caplog.set_level(logging.WARNING, logger=assets.__name__)
    assets.emit_commit_event({"outlet_events": _Outlets(table, event)}, table, extra, partitions)
    assert event.extra == extra
    keyed = with_add_partitions and count <= assets.PARTITION_EVENTS
    assert event.keys == (partitions[1:] if keyed else [])
    past_the_cap = [r for r in caplog.records if "more than the" in r.getMessage()]
    assert len(past_the_cap) == (count > assets.PARTITION_EVENTS)


def test_a_partition_count_past_the_cap_withholds_keys_whatever_the_listed_partitions() -> None:
    """The count decides: a job's inline partitions may be fewer than it wrote."""
    table = assets.destination_asset("file:///tmp/table")
    event = _Event(with_add_partitions=True)
    context = {"outlet_events": _Outlets(table, event)}
    assets.emit_commit_event(context, table, {}, ["dt=1", "dt=2"], partition_count=10_000)
    assert event.keys == []


@pytest.fixture
def fake_spark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark_default: None) -> FakeSpark:
    return install_fake_spark(tmp_path, monkeypatch)


@pytest.fixture
def table() -> Path:
    """The writer's destination (the test DAGs' one table), emptied for this test."""
    path = Path(os.environ["AIRFLOW_HOME"], "committed-assets", "table")
    shutil.rmtree(path, ignore_errors=True)
    return path


def test_a_committed_day_runs_the_reader_for_that_day_with_the_commits_extra(
    airflow_db: Any, fake_spark: FakeSpark, table: Path, monkeypatch: pytest.MonkeyPatch, not_emitted_log: Any
) -> None:
    monkeypatch.setenv("FAKE_SPARK_PARTITION", "dt=2024-01-02")
    run = run_dag(load_dag(WRITER), DAY)
    assert task_instances(run)["write"].state == "success"
    written = xcom(run, "write")
    extra = {
        "job_id": written["job_id"],
        "committer": "partitioned",
        "files": 2,
        "bytes": written["bytes"],
        "rows": 20,
        "partitions": ["dt=2024-01-02"],
        "partition_count": 1,
    }
    [event] = asset_events(run)
    assert event == {
        "asset": f"file://{table}",
        "source_task_id": "write",
        "partition_key": EVENT_KEY,
        "extra": extra,
    }
    # Before Airflow 3.3 the task says (once per process) that the event carries no partition key.
    assert len(not_emitted_log()) == (0 if PARTITION_KEYS else 1), AIRFLOW_VERSION

    [reader_run] = create_asset_triggered_runs(READER)
    start_run(reader_run)
    if PARTITION_KEYS:
        assert reader_run.partition_key == "2024-01-02", "StartOfDayMapper read the day from dt=2024-01-02"
    else:  # a plain asset-triggered run (3.1 has no partition_key column at all)
        assert getattr(reader_run, "partition_key", None) is None
    assert run_task(READER, "read", reader_run.run_id).state == "success"
    assert xcom(reader_run, "read") == {
        "partition_key": RUN_KEY,
        "events": [{"extra": extra, "partition_key": EVENT_KEY}],
    }
    assert create_asset_triggered_runs(READER) == [], "one event, one run"

    lineage = lineage_events(run.run_id, "write")
    assert set(lineage) == {"START", "COMPLETE"}
    [started] = lineage["START"]["outputs"]
    [completed] = lineage["COMPLETE"]["outputs"]
    assert (completed["namespace"], completed["name"]) == ("file", str(table))
    assert started["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert "outputStatistics" not in started.get("outputFacets", {}), "nothing is written at start"
    statistics = completed["outputFacets"]["outputStatistics"]
    assert (statistics["rowCount"], statistics["size"], statistics["fileCount"]) == (20, written["bytes"], 2)
    partitions = completed["outputFacets"]["subset"]["outputCondition"]["partitions"]
    assert partitions == [{"dimensions": {"dt": "2024-01-02"}, "identifier": "dt=2024-01-02"}]

    confs = fake_spark.record()["confs"]
    assert confs["spark.openlineage.parentJobName"] == f"{WRITER}.write"
    assert confs["spark.openlineage.parentRunId"] == lineage["START"]["run"]["runId"]
    assert confs["spark.openlineage.rootParentJobName"] == WRITER


def test_a_retry_adopting_the_committed_try_emits_that_jobs_event(
    airflow_db: Any, fake_spark: FakeSpark, table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SPARK_PARTITION", "dt=2024-01-02")
    monkeypatch.setenv("FAKE_SPARK_MODE_BY_TRY", "1=commit-then-fail")  # committed, then the try failed
    run = run_dag(load_dag(WRITER), DAY)
    ti = task_instances(run)["write"]
    assert (ti.state, ti.try_number) == ("success", 2)
    written = xcom(run, "write")
    assert written["adopted_from_try"] == 1
    [event] = asset_events(run)
    assert (event["partition_key"], event["extra"]["job_id"], event["extra"]["rows"]) == (
        EVENT_KEY,
        written["job_id"],
        20,
    )
    assert event["extra"]["partitions"] == ["dt=2024-01-02"]
    statistics = lineage_events(run.run_id, "write")["COMPLETE"]["outputs"][0]["outputFacets"]
    assert statistics["outputStatistics"]["rowCount"] == 20


def test_a_failed_write_reports_its_destination_without_statistics_and_emits_no_event(
    airflow_db: Any, fake_spark: FakeSpark, table: Path
) -> None:
    fake_spark.mode("crash")  # the driver dies before job commit, in both tries: nothing becomes visible
    run = run_dag(load_dag(WRITER), DAY)
    assert task_instances(run)["write"].state == "failed"
    assert asset_events(run) == []

    lineage = lineage_events(run.run_id, "write")
    assert set(lineage) == {"START", "FAIL"}
    [failed] = lineage["FAIL"]["outputs"]
    assert (failed["namespace"], failed["name"]) == ("file", str(table))
    assert "outputStatistics" not in failed.get("outputFacets", {})


@pytest.fixture
def wide_table() -> Path:
    """The wide writer's destination, emptied for this test."""
    path = Path(os.environ["AIRFLOW_HOME"], "committed-assets", "wide")
    shutil.rmtree(path, ignore_errors=True)
    return path


def test_a_job_of_thousands_of_partitions_emits_one_event_that_counts_them_and_names_their_list(
    airflow_db: Any, fake_spark: FakeSpark, wide_table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SPARK_PARTITION", "dt=2024-01-02")
    monkeypatch.setenv("FAKE_SPARK_PARTITION_COUNT", str(WIDE_PARTITIONS))
    run = run_dag(load_dag(WIDE_WRITER), DAY)
    assert task_instances(run)["write"].state == "success"
    written = xcom(run, "write")
    assert (written["files"], written["partition_count"]) == (2 * WIDE_PARTITIONS, WIDE_PARTITIONS)
    partitions = [f"dt=2024-01-02/shard={n:05d}" for n in range(WIDE_PARTITIONS)]

    [event] = asset_events(run)  # one event, not one per partition
    extra = event["extra"]
    root = StorePath.parse(f"file://{wide_table}")
    store = open_store(root)
    try:
        record = load_job_record(store, root, written["job_id"])
        assert record is not None and record.partition_list is not None, "past the cap: a partition list"
        list_uri = record.partition_list.path_under(root).uri()
        # Where the extra says every partition is listed, every partition is.
        listed = [name for name, _ in iter_partitions(store, root, record.partition_list)]
    finally:
        store.close()
    assert sorted(listed) == partitions
    assert extra == {
        "job_id": written["job_id"],
        "committer": "partitioned",
        "files": 2 * WIDE_PARTITIONS,
        "bytes": written["bytes"],
        "rows": 20 * WIDE_PARTITIONS,
        "partitions": partitions[: assets.EXTRA_PARTITIONS],
        "partition_count": WIDE_PARTITIONS,
        "partition_list": list_uri,
    }
    assert event["partition_key"] is None
    assert len(json.dumps(extra)) < 8 * 1024, "one small event, whatever the job wrote"

    [reader_run] = create_asset_triggered_runs(WIDE_READER)
    start_run(reader_run)
    assert run_task(WIDE_READER, "read", reader_run.run_id).state == "success"
    assert xcom(reader_run, "read") == [{"extra": extra, "partition_key": None}]
    assert create_asset_triggered_runs(WIDE_READER) == [], "one event, one run"
