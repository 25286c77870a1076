"""A committed write whose Spark job can stop at a gate: the deployment test SIGKILLs its task there.

Triggered with ``conf``: ``case`` (the destination ``<root>/killed/<case>``), ``markers`` (where the
application and the test meet) and ``gate`` (``before-commit`` or ``after-commit``, on try 1). One
retry, at once: the retry settles the killed try's job (adopts or fences it).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_commit_provider.operators import CommittedSparkSubmitOperator

ROOT = os.environ["DAILY_INGEST_ROOT"]
JOB = Path(__file__).resolve().parents[1] / "gated_write_job.py"

with DAG(
    dag_id="killed_write",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    params={"case": Param("adopt"), "markers": Param(""), "gate": Param("none")},
    default_args={"retries": 1, "retry_delay": timedelta(0)},
):
    CommittedSparkSubmitOperator(
        task_id="write",
        application=str(JOB),
        destination=ROOT + "/killed/{{ params.case }}",
        committer="directory",
        conflict_mode="replace",
        application_args=["--markers", "{{ params.markers }}", "--gate", "{{ params.gate }}"],
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        name="killed-write-{{ params.case }}",
    )
