"""The PySpark application of the ``daily_partitioned_ingest`` DAG: one day into ``dt=<day>``.

Submitted by ``CommittedSparkSubmitOperator``, which passes the destination, committer, conflict
mode, engine and this try's job ID as ``spark.airflow_commit.*`` confs, the S3 settings as
``AWS_*`` environment variables, and this package's ``core`` and ``spark`` modules as
``--py-files``. The application itself only says *what* to write:

    spark-submit daily_ingest_job.py --source s3://lake/landing/events/dt=2024-01-01/events.csv \\
        --ds 2024-01-01 [--fail-on-try N]

It reads the landed CSV (in the driver through the store layer, since PyPI's PySpark has no
``s3a://`` filesystem; with hadoop-aws on the cluster ``spark.read.csv`` would do), adds the ``dt``
partition column and writes it (parquet unless ``--format``) partitioned by ``dt``:

- engine ``python``: :func:`airflow_commit_provider.spark.write_committed`, which takes destination,
  committer, conflict mode and job ID from the confs (``partitioned`` + ``replace``: only ``dt=<day>`` is
  replaced, atomically, at job commit; every other day stays untouched);
- engine ``hadoop``: Spark's own writer with Hadoop's committer as configured by the operator.

**Table mode** (the operator's ``table=``, i.e. ``spark.airflow_commit.table``, set): the day goes
into that catalog table with ``write_committed(df, destination, table=..., create_table=True,
conflict_mode="replace")``, which creates the table at the destination on the first run (its
database too, if missing) and registers ``dt=<day>`` in the catalog as part of the commit. The
catalog is the session's: the operator gives it a Hive metastore (``hive.metastore.uris``).

``--fail-on-try N`` makes one Spark task fail on Airflow try N (after the other task wrote its
files), to show that a failed try leaves nothing behind and the retry writes exactly one copy.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Iterator
from typing import Any

from airflow_commit_provider.spark.config import CONF_DESTINATION, CONF_ENGINE, CONF_TABLE, CONF_TRY_NUMBER


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="the landed CSV of the day")
    parser.add_argument("--ds", required=True, help="the day, YYYY-MM-DD: the dt partition written")
    parser.add_argument("--partitions", type=int, default=2, help="Spark tasks (files per day)")
    parser.add_argument("--format", default="parquet", choices=("parquet", "orc", "csv", "json"))
    parser.add_argument("--fail-on-try", type=int, default=0, help="fail a Spark task on this Airflow try")
    return parser.parse_args(argv)


def read_landed(source: str) -> Any:
    """The landed CSV as an Arrow table, read through the store layer (AWS_* from the environment)."""
    import pyarrow.csv as pv

    from airflow_commit_provider.core.paths import StorePath
    from airflow_commit_provider.core.store import open_store

    store = open_store(source, threads=1)
    try:
        data = store.read_bytes(StorePath.parse(source))
    finally:
        store.close()
    return pv.read_csv(io.BytesIO(data))


def fail_one_task(partition: int, message: str) -> Any:
    """A mapInArrow function that fails in one Spark partition (the others write normally)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        context = TaskContext.get()
        doomed = context is not None and context.partitionId() == partition
        for batch in batches:
            if doomed:
                raise RuntimeError(message)
            yield batch

    return run


def write_table(spark: Any, df: Any, table: str, destination: str, format: str) -> Any:
    """Replace the day in the catalog table `table` at `destination`, creating both the table and its
    database on the first run (``IF NOT EXISTS``: parallel first days may race to create them)."""
    from airflow_commit_provider.spark import write_committed

    database, _, _ = table.rpartition(".")
    if database:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
    return write_committed(
        df,
        destination,
        table=table,
        create_table=True,
        conflict_mode="replace",
        format=format,
        partition_by=["dt"],
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.appName(f"daily-ingest-{args.ds}").getOrCreate()
    destination = spark.conf.get(CONF_DESTINATION, None)
    if not destination:
        raise SystemExit(f"{CONF_DESTINATION} is not set: submit this job with CommittedSparkSubmitOperator")
    engine = spark.conf.get(CONF_ENGINE, "python")
    try_number = int(spark.conf.get(CONF_TRY_NUMBER, "0") or 0)

    landed = read_landed(args.source)
    df = spark.createDataFrame(landed).repartition(args.partitions).withColumn("dt", F.lit(args.ds))
    if args.fail_on_try and try_number == args.fail_on_try:
        message = f"deliberate failure of a Spark task on try {try_number} (--fail-on-try)"
        df = df.mapInArrow(fail_one_task(args.partitions - 1, message), df.schema)

    table = spark.conf.get(CONF_TABLE, None)
    if engine == "python":
        from airflow_commit_provider.spark import write_committed

        if table:
            summary = write_table(spark, df, table, destination, args.format)
        else:
            summary = write_committed(df, format=args.format, partition_by=["dt"])  # to CONF_DESTINATION
        print(json.dumps({"write_committed": summary.to_dict()}, default=str))
    else:
        df.write.format(args.format).partitionBy("dt").mode("append").save(destination)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
