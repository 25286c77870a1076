"""The small picklable config a write's tasks receive: executors rebuild store and committer from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_commit_provider.core.options import CommitOptions
from airflow_commit_provider.core.store.settings import HdfsSettings, S3Settings
from airflow_commit_provider.spark.write_options import WriterOptions


@dataclass(frozen=True)
class TaskConfig:
    """Everything a task needs, small and picklable; executors rebuild store and committer from it."""

    committer: str
    destination: str
    """The destination as `str(StorePath)`, which `StorePath.parse` takes back literally."""
    job_id: str
    commit_options: CommitOptions
    s3: S3Settings
    hdfs: HdfsSettings | None
    """An ``hdfs://`` destination's WebHDFS address and user as the driver resolved them (executors
    do not resolve them from their own environment); None for other stores."""
    format: str
    codec: str | None
    """The pyarrow codec name (None: uncompressed)."""
    file_suffix: str
    """What follows `c%03d` in a file name, e.g. `.snappy.parquet` or `.csv.gz`."""
    data_columns: tuple[str, ...]
    """Columns written into files (parquet/orc), in order."""
    partition_columns: tuple[str, ...]
    """Partition column names as they appear in directory names."""
    key_columns: tuple[str, ...]
    """The hidden string columns carrying each row's partition values (Spark-cast, '' as null)."""
    line_column: str | None
    """csv/json: the hidden column holding each row already encoded by Spark."""
    header: str | None
    """csv: the header line, or None."""
    writer: WriterOptions
    spark_schema_json: str | None = None
    """parquet: the data schema as Spark writes it into the footer (org.apache.spark.sql.parquet.row.metadata);
    orc: the data schema whose Spark types the files' layout follows (``orc_layout``)."""
    spark_version: str | None = None
    timestamp_rebase: Any = None
    """orc: how Spark's ORC writer rebases timestamps in the JVM's time zone (``orc_layout.TimestampRebase``)."""
    empty_schema: Any = None
    """The Arrow schema of the written columns, for the empty file of an empty write (pyarrow.Schema)."""

    @property
    def partitioned(self) -> bool:
        return bool(self.partition_columns)
