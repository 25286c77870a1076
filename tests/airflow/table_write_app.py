"""The user's application of test_committed_spark_submit_tables.py, run by a real spark-submit.

    table_write_app.py write DAY [--die-before-registering]
    table_write_app.py read TABLE OUT.json

- **write**: creates the partitioned table the operator names (``spark.airflow_commit.table``, at
  ``spark.airflow_commit.destination``) if it is missing, then writes six rows of DAY into it with
  ``write_committed``. With ``--die-before-registering`` the driver process dies (``os._exit``, as
  ``support.faults``' ``exit`` mode) at the point where it would register the partitions: after
  the commit point, with the job record saying registration is pending.
- **read**: what any reader of the table sees: its partitions, its rows, and a pruned count of DAY.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

#: The exit code of the dying driver (support.faults.EXIT_CODE).
EXIT_CODE = 86


class DyingCatalog:
    """The session's catalog, whose driver dies where it would register partitions."""

    def __init__(self, spark: Any) -> None:
        from airflow_commit_provider.spark.catalog import SparkCatalog

        self._catalog = SparkCatalog(spark)

    def table_info(self, name: str) -> Any:
        return self._catalog.table_info(name)

    def register_partitions(self, name: str, partitions: Any) -> None:
        sys.stdout.flush()
        os._exit(EXIT_CODE)


def write(spark: Any, day: str, die: bool) -> None:
    from airflow_commit_provider.spark import write_committed
    from airflow_commit_provider.spark.tables import plan_committed_write
    from airflow_commit_provider.spark.writer import run_write

    table = spark.conf.get("spark.airflow_commit.table")
    location = spark.conf.get("spark.airflow_commit.destination")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {table} (id BIGINT, name STRING, dt STRING) USING parquet "
        f"PARTITIONED BY (dt) LOCATION '{location}'"
    )
    frame = spark.range(6, numPartitions=2).selectExpr("id", "concat('row-', id) AS name", f"'{day}' AS dt")
    if die:  # the table and destination come from the operator's confs, as write_committed takes them
        run_write(frame, plan_committed_write(frame), catalog=DyingCatalog(spark))
    else:
        write_committed(frame)


def read(spark: Any, table: str, out: Path) -> None:
    partitions = sorted(row[0] for row in spark.sql(f"SHOW PARTITIONS {table}").collect())
    rows = sorted((row["id"], row["dt"]) for row in spark.table(table).collect())
    days = sorted({day for _, day in rows})
    pruned = {day: spark.sql(f"SELECT id FROM {table} WHERE dt = '{day}'").count() for day in days}
    out.write_text(json.dumps({"partitions": partitions, "rows": rows, "pruned": pruned}))


def main(argv: list[str]) -> None:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.enableHiveSupport().getOrCreate()
    if argv[1] == "write":
        write(spark, argv[2], "--die-before-registering" in argv)
    else:
        read(spark, argv[2], Path(argv[3]))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv)
