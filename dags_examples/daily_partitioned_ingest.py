"""Daily partitioned ingest: each run owns one ``dt=<day>`` partition of a shared table.

1. ``land_source_data`` lands the day's source events as CSV (``<root>/landing/events/dt=<day>/``);
2. ``write_partition`` runs the PySpark job ``jobs/daily_ingest_job.py`` with
   :class:`~airflow_commit_provider.operators.CommittedSparkSubmitOperator`: the ``partitioned``
   committer in ``replace`` mode writes ``dt=<day>`` of ``<root>/warehouse/events`` and replaces only
   that partition, atomically, at job commit;
3. ``wait_for_success`` waits for the day's partition marker ``dt=<day>/_SUCCESS`` (the
   ``partitioned`` committer writes one in each partition it commits) with
   :class:`~airflow_commit_provider.sensors.SuccessManifestSensor` and checks it is this run's job
   (job ID from the writer's XCom), lists ``dt=<day>`` and is newer than the data interval. It is
   deferrable: a marker not there yet is waited for by the triggerer, not by a worker slot;
4. ``check_partition`` counts the partition's rows and compares them with what was landed.

``write_partition`` declares the table as its outlet asset (``s3://<bucket>/warehouse/events``).
After the commit is verified, the task's asset event carries the job ID, committer, files, bytes,
rows and the partitions written, and on Airflow 3.3 the partition key ``dt=<day>``: the
``daily_events_report`` DAG runs on it for exactly that day. With the OpenLineage provider enabled,
the write is one output dataset with its statistics and partitions, and the Spark job gets the
parent-job confs that link Spark's own lineage to the task.

**Which day.** The schedule is a data-interval timetable (``CronDataIntervalTimetable``, daily at
00:00 UTC), so a scheduled run ingests the day that has just ended: the run made at midnight
starting the 2nd has the data interval of the 1st, and its logical date ``{{ ds }}`` is the 1st.
(Airflow 3's plain ``schedule="@daily"`` makes runs with no data interval whose logical date is the
moment they run: they would ingest the day that has just begun.) A backfill's runs are the same
intervals; a manual run ingests the day of the logical date it is given.

Re-running a day or backfilling several days leaves exactly one copy of each day and never touches
the other days. A failed try of ``write_partition`` leaves nothing behind (its job is aborted) and the
retry is a new job. ``max_active_runs=4``: runs of different days write different ``dt=``
partitions and each commits its own partition ``_SUCCESS``, so a backfill's days run in parallel.

**Table mode** (off by default). With ``$DAILY_INGEST_TABLE`` set (``db.events``), the job writes
the catalog table of that name at the same location, ``write_committed(df, table=..., create_table=True,
conflict_mode="replace")``: the first run creates the table (and its database), and each run
registers its ``dt=<day>`` partition in the catalog as part of its commit. The catalog is the Hive
metastore at ``$DAILY_INGEST_METASTORE_URI`` (``thrift://host:9083``), which the operator gives the
job as Spark conf (``spark.sql.catalogImplementation=hive``, ``spark.hadoop.hive.metastore.uris``,
and ``spark.sql.warehouse.dir=<root>/warehouse`` for the database): a metastore *service*, because
backfilled days run as parallel Spark applications and all of them must see one catalog (an embedded
Derby metastore admits one application at a time). ``wait_for_success`` then waits on the job's
record at the table, which says whether the day is registered yet, instead of the partition's
``_SUCCESS`` (written before registration); ``daily_events_report`` reads the day from the table.
The metastore must reach the table's filesystem (``s3a://`` needs hadoop-aws on its classpath).

Connections: ``aws_default`` (endpoint_url in the extras for S3-compatible stores) for ``s3://``
roots, ``spark_default`` (host ``local[*]`` runs Spark locally). The root is ``$DAILY_INGEST_ROOT``
(default ``s3://commit-demo``; ``file://`` roots work too), read when the DAG is parsed: the table's
asset URI is fixed then, as every asset's is.
"""

from __future__ import annotations

import csv
import io
import os
import random
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_commit_provider.compat import CronDataIntervalTimetable
from airflow_commit_provider.operators import CommittedSparkSubmitOperator
from airflow_commit_provider.sensors import SuccessManifestSensor
from airflow_commit_provider.spark.config import thrift_metastore_conf

DAG_ID = "daily_partitioned_ingest"
JOB = Path(__file__).resolve().parent / "jobs" / "daily_ingest_job.py"
ROOT = os.environ.get("DAILY_INGEST_ROOT", "s3://commit-demo")
TABLE = f"{ROOT}/warehouse/events"
#: Table mode (see "Table mode"): the catalog table written at TABLE, and the metastore that has it.
CATALOG_TABLE = os.environ.get("DAILY_INGEST_TABLE") or None
METASTORE_URI = os.environ.get("DAILY_INGEST_METASTORE_URI", "")


def catalog_conf() -> dict[str, str]:
    """The Spark conf of table mode's catalog (none in path mode); a missing URI fails the parse."""
    if CATALOG_TABLE is None:
        return {}
    if not METASTORE_URI:
        raise ValueError("DAILY_INGEST_TABLE needs DAILY_INGEST_METASTORE_URI (thrift://host:port)")
    return thrift_metastore_conf(METASTORE_URI, f"{ROOT}/warehouse")


def events_for(day: str) -> list[dict[str, Any]]:
    """The day's source events: deterministic per day, a different count each day."""
    parsed = date.fromisoformat(day)
    rng = random.Random(parsed.toordinal())
    start = datetime(parsed.year, parsed.month, parsed.day, tzinfo=timezone.utc)
    count = 200 + (parsed.toordinal() % 7) * 25
    return [
        {
            "event_id": f"{day}-{index:06d}",
            "user_id": rng.randrange(1, 500),
            "kind": rng.choice(("view", "click", "purchase")),
            "amount": round(rng.uniform(0, 250), 2),
            "event_time": (start + timedelta(seconds=rng.randrange(86_400))).isoformat(),
        }
        for index in range(count)
    ]


with DAG(
    dag_id=DAG_ID,
    description="Land a day of events, write its dt= partition with a committed PySpark job, verify it",
    # A data interval per day: each scheduled run is for the day that ended (see "Which day").
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=4,
    params={
        "fail_on_try": Param(0, type="integer", description="make the Spark job fail on this try (demo)"),
    },
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    tags=["commit-protocols", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def land_source_data(ds: str) -> dict[str, Any]:
        """Write the day's events as one CSV object; re-landing a day overwrites it."""
        from airflow_commit_provider.core.paths import StorePath
        from airflow_commit_provider.hooks import CommitStoreHook

        path = f"{ROOT}/landing/events/dt={ds}/events.csv"
        events = events_for(ds)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(events[0]))
        writer.writeheader()
        writer.writerows(events)
        store = CommitStoreHook().get_store(path)
        try:
            store.write_bytes(StorePath.parse(path), buffer.getvalue().encode("utf-8"))
        finally:
            store.close()
        return {"path": path, "rows": len(events)}

    landed = land_source_data()

    # [START howto_operator_committed_write]
    write_partition = CommittedSparkSubmitOperator(
        task_id="write_partition",
        application=str(JOB),
        destination=TABLE,
        table=CATALOG_TABLE,
        committer="partitioned",
        conflict_mode="replace",
        engine="python",
        application_args=[
            "--source",
            "{{ ti.xcom_pull(task_ids='land_source_data')['path'] }}",
            "--ds",
            "{{ ds }}",
            "--fail-on-try",
            "{{ params.fail_on_try }}",
        ],
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "1g",
            **catalog_conf(),
        },
        name="daily-ingest-{{ ds }}",
    )

    wait_for_success = SuccessManifestSensor(
        task_id="wait_for_success",
        # Table mode: the job's record at the table, which alone says the day is registered.
        destination=TABLE if CATALOG_TABLE else TABLE + "/dt={{ ds }}",
        job_id="{{ ti.xcom_pull(task_ids='write_partition')['job_id'] }}",
        committers=["partitioned"],
        required_partitions=["dt={{ ds }}"],
        newer_than="{{ data_interval_end }}",
        min_files=1,
        deferrable=True,
        poke_interval=60,
        timeout=2 * 60 * 60,
    )
    # [END howto_operator_committed_write]

    @task
    def check_partition(landed: dict[str, Any], success: dict[str, Any], ds: str) -> dict:
        """The day's partition holds exactly the landed rows: one copy, complete."""
        import pyarrow.parquet as pq

        from airflow_commit_provider.core.paths import StorePath
        from airflow_commit_provider.hooks import CommitStoreHook

        partition = StorePath.parse(f"{TABLE}/dt={ds}")
        store = CommitStoreHook().get_store(partition)
        try:
            files = sorted(s.path for s in store.list_files(partition) if s.path.name.endswith(".parquet"))
            rows = sum(pq.ParquetFile(io.BytesIO(store.read_bytes(f))).metadata.num_rows for f in files)
        finally:
            store.close()
        if rows != landed["rows"]:
            raise ValueError(
                f"{partition} holds {rows} rows in {len(files)} files, {landed['rows']} were landed"
            )
        return {"partition": str(partition), "rows": rows, "files": len(files), "job_id": success["job_id"]}

    landed >> write_partition >> wait_for_success
    check_partition(landed, wait_for_success.output)


if __name__ == "__main__":
    dag.test()
