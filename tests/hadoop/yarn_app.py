"""The PySpark application tests/hadoop submits to YARN: ``write_committed`` with a committer.

    spark-submit --master yarn ... yarn_app.py DESTINATION COMMITTER RESULT_JSON

It writes rows ``id`` 0..99 with ``p = id % 2`` (two partitions) as parquet to DESTINATION, and
records in RESULT_JSON (a local file) the write summary, the Spark application ID and where a task
ran (its YARN container) and imported this package from (the ``--py-files`` zip, not the driver's
install).
S3 access comes from the driver's ``AWS_*`` environment, which tasks receive from the driver.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

ROWS = 100


def _executor_origin(_rows: object) -> list[dict[str, str | None]]:
    """Where a task runs (YARN's container ID and working directory) and imported this package from."""
    import os

    import airflow_commit_provider

    return [
        {
            "container_id": os.environ.get("CONTAINER_ID"),
            "cwd": os.getcwd(),
            "package": os.path.abspath(airflow_commit_provider.__file__ or ""),
        }
    ]


def main(destination: str, committer: str, result: Path) -> None:
    from airflow_commit_provider.spark import write_committed

    spark = SparkSession.builder.appName("tests-hadoop-yarn-app").getOrCreate()
    try:
        df = spark.range(ROWS).selectExpr("id", "id % 2 AS p", "concat('row-', id) AS payload")
        summary = write_committed(df, destination, format="parquet", partition_by="p", committer=committer)
        [executor] = spark.sparkContext.parallelize([0], 1).mapPartitions(_executor_origin).collect()
        result.write_text(
            json.dumps(
                {
                    "application_id": spark.sparkContext.applicationId,
                    "summary": summary.to_dict(),
                    "executor": executor,
                }
            )
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
