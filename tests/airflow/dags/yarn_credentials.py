"""Test DAG: the same committed write submitted to YARN in client and in cluster deploy mode,
with the ``aws_default`` connection's credentials (tests/airflow/test_yarn_credentials.py).

The ``spark_yarn`` connection (host ``yarn``) and ``HADOOP_CONF_DIR`` come from the test, as a
deployment's would. The package reaches the containers as the ``--py-files`` zip the operator
builds, the containers' Python is ``spark_python`` (every container of the test cluster is on this
machine: this venv's interpreter), and each application writes Spark's event log to
``params.event_log_dir`` and what it found to ``params.result_dir/<mode>.json``. Hadoop's S3A is on
the classpath, pointed at the store (``params.s3a_endpoint``), for the application to read back.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_commit_provider.devtools.hadoop_jars import PEER_ARTIFACTS, peer_spark_conf, repository
from airflow_commit_provider.devtools.yarn_apps import LOOPBACK, yarn_conf
from airflow_commit_provider.operators import CommittedSparkSubmitOperator

APP = Path(__file__).resolve().parents[1] / "yarn_credentials_app.py"
DEPLOY_MODES = ("client", "cluster")

with DAG(
    dag_id="test_yarn_credentials",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    params={
        "destination": Param("", type="string"),
        "result_dir": Param("", type="string"),
        "event_log_dir": Param("", type="string"),
        "s3a_endpoint": Param("", type="string"),
        "s3a_region": Param("us-east-1", type="string"),
    },
) as dag:
    for mode in DEPLOY_MODES:
        CommittedSparkSubmitOperator(
            task_id=f"write_{mode}",
            conn_id="spark_yarn",
            deploy_mode=mode,
            # spark-submit waits for the application in both modes, so the application sees every
            # process of the job, spark-submit's included (durable submission needs RM tracking:
            # tests/airflow/test_durable_yarn.py).
            durable=False,
            application=str(APP),
            destination="{{ params.destination }}/" + mode,
            committer="magic",
            spark_python=sys.executable,
            application_args=["{{ params.result_dir }}/" + mode + ".json"],
            env_vars={"SPARK_LOCAL_IP": LOOPBACK},  # spark-submit's own JVM and the AM's
            conf={
                **yarn_conf(),
                # Every container then takes 2 GB (1g and Spark's 384m overhead, in 1 GB steps),
                # which only the first NodeManager has: the application's containers are siblings
                # on one node, where the application finds all their launch scripts.
                "spark.executor.memory": "1g",
                "spark.yarn.am.memory": "1g",
                # S3A, to read the rows back: Hadoop's jars read in place (every container is on
                # this machine), and where the store is; the hook adds S3A's chain for the file.
                **peer_spark_conf(
                    [artifact.path(repository()) for artifact in PEER_ARTIFACTS],
                    Path(os.environ["AIRFLOW_HOME"]) / "hadoop-local",  # the tests' throwaway home
                ),
                "spark.hadoop.fs.s3a.endpoint": "{{ params.s3a_endpoint }}",
                "spark.hadoop.fs.s3a.endpoint.region": "{{ params.s3a_region }}",
                "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.eventLog.enabled": "true",
                # One plain file per application (Spark 4 rolls and compresses by default): grep-able.
                "spark.eventLog.rolling.enabled": "false",
                "spark.eventLog.compress": "false",
                "spark.eventLog.dir": "file://{{ params.event_log_dir }}",
            },
        )
