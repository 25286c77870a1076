"""Daily events report: runs when a day of the events table is committed, and reads exactly that day.

``daily_partitioned_ingest``'s ``write_partition`` emits an asset event for the table
(``$DAILY_INGEST_ROOT/warehouse/events``) once its commit is verified. This DAG is scheduled on
that asset:

- on Airflow 3.3 it is partition-aware (:func:`~airflow_commit_provider.assets.day_partition_schedule`):
  the event's partition key ``dt=2024-01-01`` becomes this run's ``partition_key`` ``2024-01-01``,
  one run per day committed, however many days one job wrote;
- on older Airflow it runs on each event and takes the day from the event's ``extra``.

``report_day`` reads the day's partition ``_SUCCESS`` (the ``partitioned`` committer writes one per
partition it commits) and then exactly the files it lists: not whatever else the directory holds.
"""

from __future__ import annotations

import io
import os
from datetime import datetime, timezone
from typing import Any

from airflow.sdk import DAG, task

from airflow_commit_provider.assets import day_partition_schedule, destination_asset

DAG_ID = "daily_events_report"
ROOT = os.environ.get("DAILY_INGEST_ROOT", "s3://commit-demo")
TABLE = f"{ROOT}/warehouse/events"
EVENTS = destination_asset(TABLE)


def committed_day(partition_key: str | None, events: list[Any]) -> str:
    """The day this run is for: its partition key (Airflow 3.3), else the one day its events wrote."""
    if partition_key:
        return partition_key
    days = {p.removeprefix("dt=") for event in events for p in event.extra.get("partitions", ())}
    if len(days) != 1:
        raise ValueError(f"the triggering events wrote {sorted(days)}: expected exactly one dt= day")
    return days.pop()


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
        """Rows and files of the committed day, read through its partition ``_SUCCESS``."""
        import pyarrow.parquet as pq

        from airflow_commit_provider.core.paths import StorePath
        from airflow_commit_provider.core.success_check import load_success
        from airflow_commit_provider.hooks import CommitStoreHook

        events = list(context["triggering_asset_events"][EVENTS])
        partition_key = context.get("partition_key")
        day = committed_day(partition_key, events)
        partition = StorePath.parse(TABLE).join(f"dt={day}")
        store = CommitStoreHook().get_store(partition)
        try:
            committed = load_success(store, partition)
            files = [StorePath.from_uri(f.uri) for f in committed.iter_files()]
            rows = sum(pq.ParquetFile(io.BytesIO(store.read_bytes(f))).metadata.num_rows for f in files)
        finally:
            store.close()
        return {
            "day": day,
            "partition_key": partition_key,
            "job_id": committed.job_id,
            "rows": rows,
            "files": len(files),
            "event": events[-1].extra if events else None,
        }

    report_day()


if __name__ == "__main__":
    dag.test()
