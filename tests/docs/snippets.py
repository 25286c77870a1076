"""The Python the documentation shows (docs/*.md include these functions' bodies), run by
tests/docs/test_snippets.py on the suite's Spark session: `write_to_a_path` against the embedded
S3's bucket `lake` (the driver's environment points at it), the data source ones at a path the test
gives (the data source's driver side runs in a process of Spark's, outside the test's environment).

Each function's body is what a page shows: the first line of the body is the page's first line
(``:lines: 2-`` leaves out the ``def``), so keep it readable as a page on its own.
"""

from __future__ import annotations

from typing import Any


def write_to_a_path(df: Any) -> None:
    from airflow_commit_provider.spark import write_committed

    summary = write_committed(
        df,
        "s3://lake/warehouse/events",
        format="parquet",
        partition_by=["dt"],
        committer="partitioned",
        conflict_mode="replace",  # replace only the dt= partitions written
    )
    print(summary.job_id, summary.files, summary.bytes, summary.rows)


def write_through_the_data_source(spark: Any, df: Any, path: str) -> None:
    from airflow_commit_provider.spark import register_data_source

    register_data_source(spark)  # once per session; calling it again changes nothing
    (
        df.write.format("committed")
        .mode("overwrite")  # "overwrite" = conflict_mode "replace"; "append" = "append"
        .option("committer", "partitioned")
        .option("partition_by", "dt")  # Spark refuses partitionBy() for Python data sources
        .save(path)  # s3://lake/warehouse/events, s3a://..., file:///... or a local path
    )
