"""Test DAG: CommittedSparkSubmitOperator with a retry, run with dag.test() on a fake spark-submit."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, Param

from airflow_commit_provider.operators import CommittedSparkSubmitOperator

with DAG(
    dag_id="test_committed_spark_retries",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    params={"destination": Param("", type="string")},
) as dag:
    CommittedSparkSubmitOperator(
        task_id="write",
        application="/jobs/app.py",
        destination="{{ params.destination }}",
        committer="directory",
        conflict_mode="replace",
        retries=1,
        retry_delay=timedelta(0),  # dag.test() would wait a real delay out
    )
