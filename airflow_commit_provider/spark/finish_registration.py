"""A registration-only Spark application: register the partitions of a table write that committed
while its registration did not happen (its driver was killed between the commit point and the
registration, or the metastore failed then).

    spark-submit finish_registration.py DESTINATION TABLE JOB_ID

``CommittedSparkSubmitOperator`` submits it, with the write's conf, connection and S3 settings,
when a try finds its job (or the earlier try's job it adopts) in that state: registering needs a
catalog client, which only a Spark driver has. It runs no user code. The session has Hive support,
since the only catalog that outlives the writing application is a metastore (Hive's, or Glue
through Hive's client). The table must still be at `DESTINATION`; the store's S3 settings come
from the ``spark.airflow_commit.s3.*`` confs and the ``AWS_*`` environment, as ``write_committed``'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.paths import StorePath, same_path
from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark.catalog import SparkCatalog
from airflow_commit_provider.spark.tables import finish_table_write
from airflow_commit_provider.spark.write_options import resolve_s3_settings

__all__ = ["finish_registration", "main"]


def finish_registration(spark: Any, destination: str, table: str, job_id: str) -> SuccessData:
    """Register the partitions job `job_id` committed to `destination`, the location of `table`;
    its record, which then lists them. Registering again changes nothing."""
    catalog = SparkCatalog(spark)
    location = catalog.table_info(table).location
    if not same_path(location, StorePath.parse(destination)):
        raise ValueError(f"table {table} is at {location}, not at {destination}, where job {job_id} wrote")
    s3 = resolve_s3_settings({}, cfg.SparkConf(spark)).store_kwargs()
    record = finish_table_write(spark, table, job_id, catalog=catalog, **s3)
    if record is None:
        raise ValueError(f"job {job_id} never reached its commit point in {destination}: nothing to register")
    return record


def main(argv: Sequence[str] | None = None) -> None:
    """Run as spark-submit's application; a failure exits non-zero with one line naming it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("destination")
    parser.add_argument("table")
    parser.add_argument("job_id")
    arguments = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    try:
        spark = SparkSession.builder.enableHiveSupport().getOrCreate()  # named by spark-submit --name
        try:
            record = finish_registration(spark, arguments.destination, arguments.table, arguments.job_id)
        finally:
            spark.stop()
    except Exception as error:  # Py4J's errors hold the JVM stack trace: one line is enough here
        first_line = next(iter(str(error).strip().splitlines()), type(error).__name__)
        raise SystemExit(
            f"registering the partitions of job {arguments.job_id} in table {arguments.table} failed: "
            f"{type(error).__name__}: {first_line}"
        ) from error
    print(
        f"job {record.job_id}: partitions {', '.join(record.registered_partitions or []) or '(none)'} "
        f"registered in table {arguments.table}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
