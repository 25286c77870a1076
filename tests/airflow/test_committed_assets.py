"""Asset events and OpenLineage from CommittedSparkSubmitOperator, in Airflow: dag.test() on the fake
spark-submit (fake_spark_submit.py) writing one partition to a file:// table.

- the writer's asset event carries the commit's extra and the partition key ``dt=<day>``;
- the scheduler step that turns queued asset events into runs creates one run of the reader DAG
  (scheduled with ``day_partition_schedule``) for the day, whose task sees that key and extra;
- the real OpenLineage provider (file transport, tests/support/openlineage.py) records START and
  COMPLETE (or FAIL) with one output dataset, its statistics and partitions, and the Spark job
  was given the parent-job confs naming the task's OpenLineage run.
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from dag_runs import create_asset_triggered_runs, load_dag, run_dag, run_task, task_instances, xcom
from fake_spark import FakeSpark, install_fake_spark
from support.openlineage import lineage_events

from airflow_commit_provider.devtools.demo import asset_events

WRITER = "test_committed_assets_writer"
READER = "test_committed_assets_reader"
DAY = datetime(2024, 1, 2, tzinfo=timezone.utc)


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
    airflow_db: Any, fake_spark: FakeSpark, table: Path, monkeypatch: pytest.MonkeyPatch
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
        "partition_key": "dt=2024-01-02",
        "extra": extra,
    }

    [reader_run] = create_asset_triggered_runs(READER)
    assert reader_run.partition_key == "2024-01-02", "StartOfDayMapper read the day from dt=2024-01-02"
    assert run_task(READER, "read", reader_run.run_id).state == "success"
    assert xcom(reader_run, "read") == {
        "partition_key": "2024-01-02",
        "events": [{"extra": extra, "partition_key": "dt=2024-01-02"}],
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
        "dt=2024-01-02",
        written["job_id"],
        20,
    )
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
