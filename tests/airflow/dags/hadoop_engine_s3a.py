"""Test DAG: Spark's own writer committed by Hadoop's S3A magic committer (engine="hadoop").

The operator adds the committer's conf and where S3A finds the store (the AWS connection's endpoint
and region); the credentials reach the job as ``AWS_*`` environment variables, which S3A's default
credential chain reads. hadoop-aws, the AWS SDK bundle and spark-hadoop-cloud go on the classpath
through the operator's ``conf``, as a user would pass them. The operator verifies S3A's JSON
`_SUCCESS` (its job ID is the try's); the sensor then checks the day's partition is listed.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_commit_provider.devtools.hadoop_jars import PEER_ARTIFACTS, peer_spark_conf, repository
from airflow_commit_provider.operators import CommittedSparkSubmitOperator
from airflow_commit_provider.sensors import SuccessManifestSensor

JOB = Path(__file__).resolve().parents[3] / "dags_examples" / "jobs" / "daily_ingest_job.py"

with DAG(
    dag_id="test_hadoop_engine_s3a",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    params={"destination": Param("", type="string"), "source": Param("", type="string")},
) as dag:
    write = CommittedSparkSubmitOperator(
        task_id="write",
        application=str(JOB),
        destination="{{ params.destination }}",
        committer="magic",
        engine="hadoop",
        application_args=["--source", "{{ params.source }}", "--ds", "{{ ds }}"],
        conf={
            **peer_spark_conf(
                [artifact.path(repository()) for artifact in PEER_ARTIFACTS],
                Path(os.environ["AIRFLOW_HOME"]) / "hadoop-local",  # the tests' throwaway home
            ),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        },
    )
    verify = SuccessManifestSensor(
        task_id="verify",
        destination="{{ params.destination }}",
        job_id="{{ ti.xcom_pull(task_ids='write')['job_id'] }}",
        committers="magic",
        required_partitions=["dt={{ ds }}"],
        poke_interval=1,
        timeout=60,
    )
    write >> verify
