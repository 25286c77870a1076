"""The example DAG end to end: Airflow's dag.test(), real Spark (local), the embedded S3.

One scenario, in order, because each step checks what the previous ones left:

1. day 1 with a Spark task failing on the first try: the try fails, leaves nothing behind, and
   the retry (a new job) writes the day;
2. day 2 (a backfilled day): written, and day 1 is untouched;
3. day 1 again (a re-run): replaced by exactly one new copy, and day 2 is untouched.

Each day's sensor waits on the day's partition ``_SUCCESS``, which lists exactly the day's files;
a day whose job no longer owns the table's ``_SUCCESS`` is still proven by its job record.

Each verified write emits the table's asset event with the partition key ``dt=<day>``: the
scheduler's run-creation step then makes one run of ``daily_events_report`` for the day (its
partition key ``<day>``), which reads exactly the files the day's partition ``_SUCCESS`` lists.

Spark runs four times here (fail, retry, day 2, re-run): the slowest test of the suite.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
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

from airflow_commit_provider.core.layout import RECORDS_DIR, JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAY1 = datetime(2024, 1, 1, tzinfo=timezone.utc)
DAY2 = datetime(2024, 1, 2, tzinfo=timezone.utc)
FAST_JVM = {"spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"}


def table_files(store: Store, table: StorePath) -> dict[str, str | None]:
    """Every visible object under the table: relative path -> ETag."""
    return {s.path.relative_to(table): s.etag for s in store.list_files(table)}


def day_files(files: dict[str, Any], day: str) -> dict[str, Any]:
    return {path: etag for path, etag in files.items() if path.startswith(f"dt={day}/")}


def data_paths(files: dict[str, Any]) -> list[str]:
    """The data files among a day's files (its partition _SUCCESS names no job in its path)."""
    return [path for path in files if not path.endswith("/_SUCCESS")]


def assert_clean(store: Store, root: StorePath, table: StorePath) -> None:
    """No pending upload anywhere in the bucket, no temporary directory in the table."""
    assert list(store.list_multipart_uploads(root)) == []
    leftovers = [
        p
        for p in table_files(store, table)
        if p != "_SUCCESS" and not p.startswith(("dt=", f"{RECORDS_DIR}/"))
    ]
    assert leftovers == [], f"temporary files left in the table: {leftovers}"


def assert_day_marker(store: Store, table: StorePath, day: str, job_id: str, waited: dict[str, Any]) -> None:
    """The sensor accepted the day's partition _SUCCESS, which lists exactly the day's files."""
    from airflow_commit_provider.core.success_check import load_success

    partition = table.join(f"dt={day}")
    assert (waited["job_id"], waited["source"], waited["path"]) == (
        job_id,
        "_SUCCESS",
        str(partition.join("_SUCCESS")),
    )
    marker = load_success(store, partition)
    assert (marker.job_id, marker.partitions) == (job_id, [f"dt={day}"])
    files = {s.path.uri(): s.size for s in store.list_files(partition) if s.path.name != "_SUCCESS"}
    assert {f.uri: f.size for f in marker.iter_files()} == files and marker.file_count == len(files)


def run_day(day: datetime, **conf: Any) -> Any:
    """One run of the example DAG; a fresh DAG object each time (a run's conf updates its params)."""
    dag = load_dag("daily_partitioned_ingest")
    writer = dag.get_task("write_partition")
    # A retry without the production minute of delay (dag.test would wait it out), and a JVM tuned
    # for starting fast rather than running long.
    writer.retry_delay = timedelta(0)
    writer.conf = {**writer.conf, **FAST_JVM}
    return run_dag(dag, day, {"fail_on_try": 0, **conf})


def report_day(written: dict[str, Any], day: str) -> dict[str, Any]:
    """The one run of daily_events_report the day's asset event makes: what its task read."""
    [report_run] = create_asset_triggered_runs("daily_events_report")
    key = day if PARTITION_KEYS else None  # Airflow 3.1/3.2: a plain asset-triggered run
    assert getattr(report_run, "partition_key", None) == key
    start_run(report_run)
    assert run_task("daily_events_report", "report_day", report_run.run_id).state == "success"
    report = xcom(report_run, "report_day")
    assert (report["day"], report["partition_key"], report["job_id"]) == (day, key, written["job_id"])
    assert report["event"] == {
        **{key: written[key] for key in ("job_id", "committer", "files", "bytes", "rows")},
        "partitions": [f"dt={day}"],
        "partition_count": 1,
    }
    return report


@pytest.fixture
def s3_bucket(embedded_s3: EmbeddedS3) -> Iterator[str]:
    """The example's bucket, named by the session's DAILY_INGEST_ROOT (tests/airflow/conftest.py)."""
    bucket = embedded_s3.create_bucket(StorePath.parse(os.environ["DAILY_INGEST_ROOT"]).bucket)
    yield bucket
    embedded_s3.delete_bucket(bucket)


def test_failed_try_retry_backfill_and_rerun(
    airflow_db: Any, aws_default: EmbeddedS3, spark_default: None, s3_bucket: str
) -> None:
    from airflow_commit_provider.core.success_check import SuccessExpectations, load_success

    store = aws_default.store()
    root = StorePath("s3", s3_bucket, "")
    table = root.join("warehouse", "events")
    conf: dict[str, Any] = {}

    # 1. Day 1: the first try's Spark job fails, the retry writes the day.
    run1 = run_day(DAY1, **conf, fail_on_try=1)
    tis = task_instances(run1)
    assert {t: ti.state for t, ti in tis.items()} == dict.fromkeys(tis, "success"), "the retry succeeded"
    assert tis["write_partition"].try_number == 2, "the first try failed and was retried"
    written = xcom(run1, "write_partition")
    landed = xcom(run1, "land_source_data")
    checked = xcom(run1, "check_partition")
    assert written["try_number"] == 2 and written["committer"] == "partitioned"
    assert written["partitions"] == ["dt=2024-01-01"] and written["rows"] == landed["rows"]
    assert checked["rows"] == landed["rows"] and checked["job_id"] == written["job_id"]
    assert_day_marker(store, table, "2024-01-01", written["job_id"], xcom(run1, "wait_for_success"))
    assert aws_default.secret_key not in repr([written, landed, checked])
    assert load_success(store, table).job_id == written["job_id"]
    assert_clean(store, root, table)
    assert report_day(written, "2024-01-01")["rows"] == landed["rows"], "the report read the whole day"
    after_day1 = table_files(store, table)
    day1_first = day_files(after_day1, "2024-01-01")
    assert day1_first and all(written["job_id"] in path for path in data_paths(day1_first)), (
        "every file of the day is the retry's: nothing of the failed try became visible"
    )

    # 2. Day 2: a backfilled day; day 1 stays as it was.
    run2 = run_day(DAY2, **conf)
    assert task_instances(run2)["check_partition"].state == "success"
    written2 = xcom(run2, "write_partition")
    assert written2["try_number"] == 1 and written2["partitions"] == ["dt=2024-01-02"]
    after_day2 = table_files(store, table)
    assert day_files(after_day2, "2024-01-01") == day1_first, "day 2 did not touch day 1"
    day2_files = day_files(after_day2, "2024-01-02")
    assert day2_files and all(written2["job_id"] in path for path in data_paths(day2_files))
    assert xcom(run2, "check_partition")["rows"] == xcom(run2, "land_source_data")["rows"]
    assert_day_marker(store, table, "2024-01-02", written2["job_id"], xcom(run2, "wait_for_success"))
    assert load_success(store, table).job_id == written2["job_id"]
    day1_expectations = SuccessExpectations(job_id=written["job_id"], required_partitions=("dt=2024-01-01",))
    day1_proof = day1_expectations.check(store, table)
    assert (
        day1_proof.state == "accepted" and day1_proof.path == JobLayout(table, written["job_id"]).job_record
    )
    assert_clean(store, root, table)
    assert report_day(written2, "2024-01-02")["rows"] == xcom(run2, "land_source_data")["rows"]

    # 3. Day 1 again: exactly one new copy of day 1; day 2 stays as it was.
    rerun = run_day(DAY1, **conf)
    assert task_instances(rerun)["check_partition"].state == "success"
    rewritten = xcom(rerun, "write_partition")
    assert rewritten["job_id"] != written["job_id"]
    after_rerun = table_files(store, table)
    day1_again = day_files(after_rerun, "2024-01-01")
    assert day1_again and all(rewritten["job_id"] in path for path in data_paths(day1_again)), (
        "day 1 replaced"
    )
    assert not set(data_paths(day1_again)) & set(data_paths(day1_first)), (
        "no file of the earlier copy remains"
    )
    assert xcom(rerun, "check_partition")["rows"] == landed["rows"], "exactly one copy of day 1"
    assert day_files(after_rerun, "2024-01-02") == day2_files, "the re-run did not touch day 2"
    assert_day_marker(store, table, "2024-01-01", rewritten["job_id"], xcom(rerun, "wait_for_success"))
    assert_clean(store, root, table)
    assert report_day(rewritten, "2024-01-01")["rows"] == landed["rows"], "the re-run's copy, once"
    store.close()
