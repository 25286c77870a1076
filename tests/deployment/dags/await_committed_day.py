"""Waits, deferred in the triggerer, for a day of the example's events table to be committed.

Triggered with ``conf`` ``{"day": "2024-01-02"}`` before that day is written: the sensor's first
check finds no partition ``_SUCCESS``, so it defers; the triggerer's trigger sees the day's
commit and resumes the task, whose XCom is the ``_SUCCESS`` it accepted.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

from airflow.sdk import DAG, Param

from airflow_commit_provider.sensors import SuccessManifestSensor

TABLE = os.environ["DAILY_INGEST_ROOT"] + "/warehouse/events"

with DAG(
    dag_id="await_committed_day",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    params={"day": Param("2024-01-01")},
):
    SuccessManifestSensor(
        task_id="wait_for_day",
        destination=TABLE + "/dt={{ params.day }}",
        committers=["partitioned"],
        required_partitions=["dt={{ params.day }}"],
        deferrable=True,
        poke_interval=1,
        timeout=600,
    )
