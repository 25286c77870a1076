"""The example DAG end to end: Airflow's dag.test(), real Spark (local), the embedded S3.

A day whose Spark task fails on the first try: the try fails, leaves nothing behind, and the retry
(a new job) writes the day. The day's sensor waits on the day's partition ``_SUCCESS``, which lists
exactly the day's files. The verified write emits the table's asset event with the partition key
``dt=<day>``: the scheduler's run-creation step then makes one run of ``daily_events_report`` for
the day (its partition key ``<day>``), which reads exactly the files the day's partition
``_SUCCESS`` lists.

Spark runs twice here (the failing try, the retry). What a later day and a re-run of a day do to
the table is checked on the deployed example (tests/deployment/test_deployment.py: a backfill of
two days leaves the other days untouched; a cleared day is replaced by one new copy, reported
again from its new job), and a day proven by its job record once a later job owns the table's
``_SUCCESS`` in tests/airflow/test_parallel_days.py and test_success_records.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from dag_runs import run_daily_ingest, run_daily_report, task_instances, xcom

from airflow_commit_provider.core.layout import RECORDS_DIR
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAY = datetime(2024, 1, 1, tzinfo=timezone.utc)


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
    from airflow_commit_provider.success.check import load_success

    partition = table.join(f"dt={day}")
    assert (waited["job_id"], waited["source"], waited["path"]) == (
        job_id,
        "_SUCCESS",
        str(partition.join("_SUCCESS")),
    )
    marker = load_success(store, partition)
    assert (marker.job_id, marker.partitions) == (job_id, [f"dt={day}"])
    files = {s.path.uri(): s.size for s in store.list_files(partition) if s.path.name != "_SUCCESS"}
    assert {
        f.uri: f.size for f in marker.iter_all_files(store, partition)
    } == files and marker.file_count == len(files)


@pytest.fixture
def s3_bucket(embedded_s3: EmbeddedS3) -> Iterator[str]:
    """The example's bucket, named by the session's DAILY_INGEST_ROOT (tests/airflow/conftest.py)."""
    bucket = embedded_s3.create_bucket(StorePath.parse(os.environ["DAILY_INGEST_ROOT"]).bucket)
    yield bucket
    embedded_s3.delete_bucket(bucket)


def test_a_failed_try_is_retried_and_the_day_reported(
    airflow_db: Any, aws_default: EmbeddedS3, spark_default: None, s3_bucket: str
) -> None:
    from airflow_commit_provider.success.check import load_success

    store = aws_default.store()
    root = StorePath("s3", s3_bucket, "")
    table = root.join("warehouse", "events")

    run = run_daily_ingest(DAY, fail_on_try=1)
    tis = task_instances(run)
    assert {t: ti.state for t, ti in tis.items()} == dict.fromkeys(tis, "success"), "the retry succeeded"
    assert tis["write_partition"].try_number == 2, "the first try failed and was retried"
    written = xcom(run, "write_partition")
    landed = xcom(run, "land_source_data")
    checked = xcom(run, "check_partition")
    assert written["try_number"] == 2 and written["committer"] == "partitioned"
    assert written["partitions"] == ["dt=2024-01-01"] and written["rows"] == landed["rows"]
    assert checked["rows"] == landed["rows"] and checked["job_id"] == written["job_id"]
    assert_day_marker(store, table, "2024-01-01", written["job_id"], xcom(run, "wait_for_success"))
    assert aws_default.secret_key not in repr([written, landed, checked])
    assert load_success(store, table).job_id == written["job_id"]
    assert_clean(store, root, table)
    assert run_daily_report(written, "2024-01-01")["rows"] == landed["rows"], "the report read the whole day"
    day = day_files(table_files(store, table), "2024-01-01")
    assert day and all(written["job_id"] in path for path in data_paths(day)), (
        "every file of the day is the retry's: nothing of the failed try became visible"
    )
    store.close()
