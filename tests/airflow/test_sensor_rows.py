"""A partition's ``_SUCCESS`` carries that partition's rows, so the sensor's XCom has them.

The example DAG's sensor watches ``dt=<day>``, whose ``_SUCCESS`` the ``partitioned`` committer
writes per partition. Its rows must be the partition's own: here every Spark task writes into
every day, so a day's rows are summed across tasks, and each day has a different count.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

pytestmark = [pytest.mark.spark]

#: Rows per day: different, so a count of the wrong partition (or of the whole job) shows.
DAY_ROWS = {"2024-05-01": 17, "2024-05-02": 5, "2024-05-03": 29}


def days_frame(spark: Any) -> Any:
    """The days' rows in three Spark partitions, each holding rows of every day."""
    values = ", ".join(f"({index}, '{day}')" for day, count in DAY_ROWS.items() for index in range(count))
    return spark.sql(f"SELECT * FROM VALUES {values} AS t(id, dt)").repartition(3, "id")


def partition_sensor(path: str, job_id: str) -> Any:
    from airflow_commit_provider.sensors import SuccessManifestSensor

    return SuccessManifestSensor(
        task_id=f"wait_{uuid.uuid4().hex[:8]}",
        destination=path,
        job_id=job_id,
        committers=["partitioned"],
        deferrable=False,
        poke_interval=0,
        timeout=0,
    )


def test_each_partition_success_reports_its_own_rows(
    spark: Any, aws_default: EmbeddedS3, s3_bucket: str, airflow_db: Any
) -> None:
    from airflow_commit_provider.spark import write_committed
    from airflow_commit_provider.success.check import SuccessExpectations, load_success

    table = StorePath("s3", s3_bucket, "warehouse/events")
    options = {
        "s3.endpoint_url": aws_default.endpoint_url,
        "s3.access_key_id": aws_default.access_key,
        "s3.secret_access_key": aws_default.secret_key,
        "s3.region": aws_default.region,
    }
    written = write_committed(
        days_frame(spark),
        str(table),
        partition_by=["dt"],
        committer="partitioned",
        conflict_mode="replace",
        options=options,
    )
    assert written.rows == sum(DAY_ROWS.values())
    assert written.tasks == 3

    store = aws_default.store()
    try:
        for day, rows in DAY_ROWS.items():
            partition = table.join(f"dt={day}")
            summary = partition_sensor(str(partition), written.job_id).execute({})
            assert summary["path"] == str(partition.join("_SUCCESS"))
            assert summary["rows"] == rows, f"dt={day}: the sensor's XCom has the partition's rows"
            marker = load_success(store, partition)
            assert marker.rows == rows
            names = [status.path.name for status in store.list_files(partition)]
            tasks_writing = {name.split("-")[1] for name in names if name.startswith("part-")}
            assert len(tasks_writing) > 1, f"dt={day} is written by several tasks, whose rows add up"
        # The table's _SUCCESS: the sensor on the table reports what the write did.
        on_table = partition_sensor(str(table), written.job_id).execute({})
        assert (
            on_table["rows"]
            == written.rows
            == SuccessExpectations().check(store, table).xcom_summary()["rows"]
        )
    finally:
        store.close()
