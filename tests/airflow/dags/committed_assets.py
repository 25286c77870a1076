"""Test DAGs: a committed write whose destination is its outlet asset, and a DAG scheduled on that asset.

The destination is a table in the Airflow home: one URI for the whole test session, because
Airflow keeps what it first saw of an asset-scheduled DAG's timetable for the partition keys it
queues, and a test process parses these DAGs many times.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any

from airflow.sdk import DAG, task

from airflow_commit_provider.assets import day_partition_schedule, destination_asset
from airflow_commit_provider.operators import CommittedSparkSubmitOperator

DESTINATION = f"file://{os.environ['AIRFLOW_HOME']}/committed-assets/table"
TABLE = destination_asset(DESTINATION)
#: A table whose jobs write thousands of partitions at once (the writer's environment says how many).
WIDE_DESTINATION = f"file://{os.environ['AIRFLOW_HOME']}/committed-assets/wide"
WIDE_TABLE = destination_asset(WIDE_DESTINATION)

with DAG(
    dag_id="test_committed_assets_writer",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
):
    CommittedSparkSubmitOperator(
        task_id="write",
        application="/jobs/app.py",
        destination=DESTINATION,
        committer="partitioned",
        conflict_mode="replace",
        retries=1,
        retry_delay=timedelta(0),  # dag.test() would wait a real delay out
    )

with DAG(
    dag_id="test_committed_assets_reader",
    schedule=day_partition_schedule(TABLE),
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
):

    @task
    def read(**context: Any) -> dict[str, Any]:
        """What the run was given: its partition key and its triggering events."""
        events = context["triggering_asset_events"][TABLE]
        return {
            "partition_key": context.get("partition_key"),
            # A triggering event has a partition_key from Airflow 3.3 on.
            "events": [
                {"extra": e.extra, "partition_key": getattr(e, "partition_key", None)} for e in events
            ],
        }

    read()

with DAG(
    dag_id="test_committed_assets_wide_writer",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
):
    CommittedSparkSubmitOperator(
        task_id="write",
        application="/jobs/app.py",
        destination=WIDE_DESTINATION,
        committer="partitioned",
        conflict_mode="replace",
    )

with DAG(
    dag_id="test_committed_assets_wide_reader",
    schedule=[WIDE_TABLE],
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
):

    @task(task_id="read")
    def read_wide(**context: Any) -> list[dict[str, Any]]:
        """The triggering events, as the run was given them."""
        events = context["triggering_asset_events"][WIDE_TABLE]
        return [{"extra": e.extra, "partition_key": getattr(e, "partition_key", None)} for e in events]

    read_wide()
