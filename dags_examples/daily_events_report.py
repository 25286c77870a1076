"""Daily events report: runs when a day of the events table is committed, and reads exactly that day.

``daily_partitioned_ingest``'s ``write_partition`` emits an asset event for the table
(``$DAILY_INGEST_ROOT/warehouse/events``) once its commit is verified. This DAG is scheduled on
that asset:

- on Airflow 3.3 it is partition-aware (:func:`~airflow_commit_provider.assets.day_partition_schedule`):
  the event's partition key ``dt=2024-01-01`` becomes this run's ``partition_key`` ``2024-01-01``,
  one run per day committed, however many days one job wrote;
- on Airflow 3.1 and 3.2 (whose tasks cannot give an event a partition key) it is a plain asset
  schedule and takes the days from its triggering events' ``extra``. The scheduler then makes one
  run of all the events queued since the last one, so a run can cover several days (a backfill's
  parallel days): it reports each of them.

``report_day`` reads the day's partition ``_SUCCESS`` (the ``partitioned`` committer writes one per
partition it commits) and then exactly the files it lists: not whatever else the directory holds.
It returns the day's report; a run of several days returns ``{"days": [<report>, ...]}``.

**Table mode** (``$DAILY_INGEST_TABLE``, e.g. ``db.events``, with ``$DAILY_INGEST_METASTORE_URI``: see
``daily_partitioned_ingest``): ``report_day`` reads the day from the catalog table instead, as a SQL
user would (``SELECT .. FROM db.events WHERE dt = <day>``), in a Spark application of its own
(``jobs/daily_report_job.py``, submitted through ``spark_default`` with the metastore's conf). The
job ID is then the day's asset event's: the table, not a ``_SUCCESS``, is what the report reads.
"""

from __future__ import annotations

import io
import json
import logging
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, task

from airflow_commit_provider.assets import day_partition_schedule, destination_asset

DAG_ID = "daily_events_report"
ROOT = os.environ.get("DAILY_INGEST_ROOT", "s3://commit-demo")
TABLE = f"{ROOT}/warehouse/events"
EVENTS = destination_asset(TABLE)
#: Table mode (module docstring): the catalog table the report reads, and the metastore that has it.
CATALOG_TABLE = os.environ.get("DAILY_INGEST_TABLE") or None
METASTORE_URI = os.environ.get("DAILY_INGEST_METASTORE_URI", "")
REPORT_JOB = Path(__file__).resolve().parent / "jobs" / "daily_report_job.py"

log = logging.getLogger(__name__)


def event_days(event: Any) -> list[str]:
    """The ``dt=`` days an event's ``extra`` lists (its first path segment: ``dt=2024-01-01/...``)."""
    extra = event.extra or {}
    partitions = list(extra.get("partitions") or ())
    if extra.get("partition_count", len(partitions)) > len(partitions):
        log.warning(
            "an event lists %d of its %s partitions in its extra: the days of the others are not reported",
            len(partitions),
            extra["partition_count"],
        )
    segments = (partition.split("/", 1)[0] for partition in partitions)
    return [segment.removeprefix("dt=") for segment in segments if segment.startswith("dt=")]


def committed_days(partition_key: str | None, events: list[Any]) -> list[str]:
    """The days this run is for: its partition key (Airflow 3.3), else the days its events wrote."""
    if partition_key:
        return [partition_key]
    days = sorted({day for event in events for day in event_days(event)})
    if not days:
        raise ValueError("the triggering events name no dt= partition in their extra: nothing to report")
    return days


def read_table_day(table: str, day: str) -> dict[str, Any]:
    """``{"day", "rows", "files"}`` of the day as the catalog table has it (``jobs/daily_report_job.py``)."""
    from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook
    from airflow_commit_provider.spark.config import thrift_metastore_conf

    with tempfile.TemporaryDirectory(prefix="daily-report-") as directory:
        out = Path(directory, "report.json")
        # Ours for its local-master Python and spark-submit lookup; it runs no committed write here.
        hook = CommittedSparkSubmitHook(
            conn_id="spark_default",
            conf={**thrift_metastore_conf(METASTORE_URI, f"{ROOT}/warehouse"), "spark.ui.enabled": "false"},
            application_args=["--table", table, "--day", day, "--out", str(out)],
            name=f"daily-report-{day}",
        )
        hook.submit(str(REPORT_JOB))
        return dict(json.loads(out.read_text()))


# [START howto_day_partition_schedule]
with DAG(
    dag_id=DAG_ID,
    description="Summarise each day of the events table as soon as its partition is committed",
    schedule=day_partition_schedule(EVENTS),
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    tags=["commit-protocols", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def report_day(**context: Any) -> dict[str, Any]:
        """Rows and files of each committed day, read through its partition ``_SUCCESS``."""
        import pyarrow.parquet as pq

        from airflow_commit_provider.core.paths import StorePath
        from airflow_commit_provider.hooks import CommitStoreHook
        from airflow_commit_provider.success.check import load_success

        events = list(context["triggering_asset_events"][EVENTS])
        partition_key = context.get("partition_key")
        # [END howto_day_partition_schedule]

        def read_committed_day(day: str) -> dict[str, Any]:
            partition = StorePath.parse(TABLE).join(f"dt={day}")
            store = CommitStoreHook().get_store(partition)
            try:
                committed = load_success(store, partition)
                files = [StorePath.from_uri(f.uri) for f in committed.iter_all_files(store, partition)]
                rows = sum(pq.ParquetFile(io.BytesIO(store.read_bytes(f))).metadata.num_rows for f in files)
            finally:
                store.close()
            return {"job_id": committed.job_id, "rows": rows, "files": len(files)}

        def report(day: str) -> dict[str, Any]:
            # The day's latest event (Airflow 3.3: the run's events are all the day's).
            day_events = [e for e in events if partition_key or day in event_days(e)]
            event = day_events[-1].extra if day_events else None
            if CATALOG_TABLE:
                read = read_table_day(CATALOG_TABLE, day)
                read["job_id"] = event["job_id"] if event else None
            else:
                read = read_committed_day(day)
            return {
                "day": day,
                "partition_key": partition_key,
                "job_id": read["job_id"],
                "rows": read["rows"],
                "files": read["files"],
                "event": event,
            }

        reports = [report(day) for day in committed_days(partition_key, events)]
        return reports[0] if len(reports) == 1 else {"days": reports}

    report_day()


if __name__ == "__main__":
    dag.test()
