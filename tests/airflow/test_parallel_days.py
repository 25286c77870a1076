"""Three days of the partitioned table written concurrently, then each day's sensors.

What the example DAG does when a backfill runs days in parallel (``max_active_runs=4``): three
real ``write_committed`` jobs (``partitioned`` committer, ``replace``) on one local Spark session,
in three threads, into one table on the embedded S3. A barrier in the writer's driver hook holds
every job between its task commits and its job commit until all three are there, so the three
job setups (each removes the table's ``_SUCCESS``) all come before the three job commits, which
then run at once.

Then, for each day: the sensor on the day's partition accepts its partition ``_SUCCESS``; the
sensor (and the trigger) on the table with the day's job ID accepts the table ``_SUCCESS`` for
the job that committed last and the job's record for the other two; the partition holds exactly
the day's rows; its ``_SUCCESS`` lists exactly its files; nothing is pending.
"""

from __future__ import annotations

import asyncio
import io
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from airflow_commit_provider.core.job_records import group_job_records
from airflow_commit_provider.core.layout import RECORDS_DIR, JobLayout
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DAYS = ("2024-03-01", "2024-03-02", "2024-03-03")
#: A barrier is synchronisation, not timing: this only bounds how long a broken run hangs.
BARRIER_BOUND_SECONDS = 300


def rows_for(day: str) -> int:
    return 30 + 11 * DAYS.index(day)


def day_frame(spark: Any, day: str) -> Any:
    """The day's events: ids unique across days, two Spark partitions (two files per day)."""
    offset = DAYS.index(day) * 1000
    return spark.range(rows_for(day), numPartitions=2).selectExpr(
        f"id + {offset} AS event_id", "id % 7 AS user_id", f"'{day}' AS dt"
    )


def sensor(path: str, **kwargs: Any) -> Any:
    from airflow_commit_provider.sensors import SuccessManifestSensor

    return SuccessManifestSensor(
        task_id=f"wait_{uuid.uuid4().hex[:8]}",
        destination=path,
        committers=["partitioned"],
        deferrable=False,
        poke_interval=0,
        timeout=0,
        **kwargs,
    )


def first_event(trigger: Any) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        events = trigger.run()
        try:
            return (await events.__anext__()).payload
        finally:
            await events.aclose()

    return asyncio.run(run())


def test_three_days_written_concurrently_each_proven_by_its_own_markers(
    spark: Any, aws_default: EmbeddedS3, s3_bucket: str, airflow_db: Any
) -> None:
    import pyarrow.parquet as pq

    from airflow_commit_provider.spark import plan_write
    from airflow_commit_provider.spark.config import SparkConf
    from airflow_commit_provider.spark.instrumentation import WriteInstrumentation
    from airflow_commit_provider.spark.writer import run_write
    from airflow_commit_provider.success.check import SuccessExpectations, load_success
    from airflow_commit_provider.triggers import SuccessManifestTrigger

    store = aws_default.store()
    table = StorePath("s3", s3_bucket, "warehouse/events")
    options = {
        "s3.endpoint_url": aws_default.endpoint_url,
        "s3.access_key_id": aws_default.access_key,
        "s3.secret_access_key": aws_default.secret_key,
        "s3.region": aws_default.region,
    }
    at_job_commit = threading.Barrier(len(DAYS))
    instrumentation = WriteInstrumentation(
        before_job_commit=lambda *_: at_job_commit.wait(BARRIER_BOUND_SECONDS)
    )
    started = datetime.now(timezone.utc) - timedelta(seconds=1)

    def write(day: str) -> Any:
        plan = plan_write(
            str(table),
            conf=SparkConf(spark),
            partition_by="dt",
            committer="partitioned",
            conflict_mode="replace",
            options=options,
        )
        return run_write(day_frame(spark, day), plan, instrumentation=instrumentation)

    with ThreadPoolExecutor(max_workers=len(DAYS)) as pool:
        written = dict(zip(DAYS, pool.map(write, DAYS), strict=True))
    jobs = {day: summary.job_id for day, summary in written.items()}
    assert len(set(jobs.values())) == 3
    for day, summary in written.items():
        assert (summary.partitions, summary.rows) == ([f"dt={day}"], rows_for(day))

    last = load_success(store, table).job_id
    assert last in jobs.values(), "the table's _SUCCESS names whichever job committed last"

    for day, job_id in jobs.items():
        partition = table.join(f"dt={day}")
        # The day's sensor, as the example DAG runs it: the partition's own _SUCCESS.
        summary = sensor(
            str(partition), job_id=job_id, required_partitions=[f"dt={day}"], min_files=1, newer_than=started
        ).execute({})
        assert (summary["job_id"], summary["source"], summary["path"]) == (
            job_id,
            "_SUCCESS",
            str(partition.join("_SUCCESS")),
        )
        assert (summary["partitions"], summary["files"]) == ([f"dt={day}"], written[day].files)

        # A sensor on the table with the day's job ID: the _SUCCESS if it is the job's, else its record.
        on_table = sensor(str(table), job_id=job_id, required_partitions=[f"dt={day}"]).execute({})
        expected_source = "_SUCCESS" if job_id == last else "job record"
        assert (on_table["job_id"], on_table["source"]) == (job_id, expected_source)
        if job_id != last:
            assert on_table["path"] == str(JobLayout(table, job_id).job_record)
            event = first_event(
                SuccessManifestTrigger(
                    destination=str(table), expectations=SuccessExpectations(job_id=job_id), poke_interval=0
                )
            )
            assert event["status"] == "success" and event["summary"]["source"] == "job record"

        # Exactly the day's rows, in exactly the files its _SUCCESS lists.
        data_files = {
            status.path.uri(): status.size
            for status in store.list_files(partition)
            if status.path.name != "_SUCCESS"
        }
        marker = load_success(store, partition)
        assert {f.uri: f.size for f in marker.iter_all_files(store, partition)} == data_files
        assert (marker.file_count, marker.total_bytes) == (len(data_files), sum(data_files.values()))
        assert all(job_id in uri for uri in data_files), "every file of the day is its own job's"
        ids = []
        for uri in data_files:
            table_part = pq.read_table(io.BytesIO(store.read_bytes(StorePath.parse(uri))))
            ids.extend(table_part.column("event_id").to_pylist())
        offset = DAYS.index(day) * 1000
        assert sorted(ids) == list(range(offset, offset + rows_for(day))), f"dt={day}: exactly its rows"

    assert list(store.list_multipart_uploads(table)) == [], "nothing pending"
    top = {status.path.relative_to(table).split("/", 1)[0] for status in store.list_files(table)}
    assert top == {"_SUCCESS", RECORDS_DIR, *(f"dt={day}" for day in DAYS)}, "no temporary tree left"
    grouped, unrecognised = group_job_records(store, table.join(RECORDS_DIR))
    kinds = {job_id: sorted(kind for kind, _ in files) for job_id, files in grouped.items()}
    assert unrecognised == 0 and kinds == {
        job: ["index", "lists", "outcome", "success"] for job in jobs.values()
    }
    store.close()
