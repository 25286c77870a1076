"""A committed write in YARN cluster mode on the session's test cluster, durable: the deployment
test SIGKILLs the worker of try 1 while its application waits at a gate, and the retry reconnects.

Triggered with ``conf``: ``case`` (the destination ``hdfs:///deployment/<case>``) and ``markers``
(where the application and the test meet: tests/hadoop/gated_yarn_app.py). The worker's
environment names the cluster (``HADOOP_CONF_DIR``) and the ``spark_yarn`` connection (cluster
mode, the ResourceManager's address). One retry, at once.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_commit_provider.devtools.yarn_apps import yarn_conf
from airflow_commit_provider.operators import CommittedSparkSubmitOperator

TESTS = Path(__file__).resolve().parents[2]
HADOOP_CONF_DIR = os.environ.get("HADOOP_CONF_DIR", "")
#: The test cluster's conf for a cluster-mode application (as tests/airflow/test_durable_yarn.py).
CONTAINERS = {
    **yarn_conf(),
    "spark.driver.memory": "512m",
    # JVMs tuned for starting fast rather than running long (the jobs are small).
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.executor.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.pyspark.python": sys.executable,
    "spark.yarn.appMasterEnv.HADOOP_CONF_DIR": HADOOP_CONF_DIR,
    "spark.executorEnv.HADOOP_CONF_DIR": HADOOP_CONF_DIR,
    "spark.yarn.appMasterEnv.GATED_APP_TESTS_DIR": str(TESTS),
}

with DAG(
    dag_id="durable_yarn_write",
    schedule=None,
    start_date=datetime(2024, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    params={"case": Param("durable"), "markers": Param("")},
    default_args={"retries": 1, "retry_delay": timedelta(0)},
):
    CommittedSparkSubmitOperator(
        task_id="write",
        application=str(TESTS / "hadoop" / "gated_yarn_app.py"),
        destination="hdfs:///deployment/{{ params.case }}",
        committer="manifest",
        conn_id="spark_yarn",
        yarn_track_via_rm_api=True,
        aws_conn_id=None,
        application_args=["--markers", "{{ params.markers }}", "--gate-on-try", "1"],
        conf=CONTAINERS,
        status_poll_interval=1,
        name="durable-yarn-{{ params.case }}",
    )
