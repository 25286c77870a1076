"""What a Spark application needs to run on the test YARN cluster (`devtools.hadoop_cluster`), as
a platform team would put it in ``spark-defaults.conf``; environment-notes.md says why each is set.

Shared by every YARN test (a direct spark-submit, or ``CommittedSparkSubmitOperator`` from a test
DAG), so that the cluster's needs are said once.
"""

from __future__ import annotations

from airflow_commit_provider.devtools.hadoop_jars import pyspark_jars_dir

__all__ = ["LOOPBACK", "yarn_conf"]

#: Every Spark process of the test cluster binds here.
LOOPBACK = "127.0.0.1"


def yarn_conf() -> dict[str, str]:
    """PySpark's jars read in place (every container runs on this machine), one small executor
    (512m and its overhead fit either NodeManager: the first holds 4 GB, the second 1 GB), every
    container bound to loopback, and no UI. Not the
    containers' Python: the caller chooses it (``spark.pyspark.python``, or the operator's
    ``spark_python``)."""
    return {
        "spark.yarn.jars": f"local:{pyspark_jars_dir()}/*",
        "spark.executor.instances": "1",
        "spark.executor.memory": "512m",
        "spark.executor.cores": "2",
        "spark.yarn.appMasterEnv.SPARK_LOCAL_IP": LOOPBACK,
        "spark.executorEnv.SPARK_LOCAL_IP": LOOPBACK,
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
    }
