"""Spark-side pieces of the write scenarios: the test DataFrame and the raw (uncommitted) pyarrow
writer used as the S3 limit.

Executors import `airflow_commit_provider` (installed) but not `bench`; this module is shipped to
them by value (`cloudpickle.register_pickle_by_value`), so it must only import installed packages
at module level and keep no state in its own globals that a task relies on (each unpickled
function may get its own copy of them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

#: Bytes per row on disk for `make_frame` (snappy parquet; the doubles are random, so incompressible).
BYTES_PER_ROW = 66
#: Row-group size of the raw writes: our tasks' default (`open_format_writer`).
ROW_GROUP_BYTES = 64 * 1024 * 1024


def make_frame(spark: Any, target_bytes: int, partitions: int, seed: int = 7) -> Any:
    """A deterministic DataFrame of about `target_bytes` on disk: an id, seven random doubles, a small int."""
    from pyspark.sql import functions as F

    rows = max(target_bytes // BYTES_PER_ROW, partitions)
    columns = [F.col("id")]
    columns += [F.rand(seed + i).alias(f"d{i}") for i in range(7)]
    columns.append((F.col("id") % 997).cast("int").alias("k"))
    return spark.range(0, rows, numPartitions=partitions).select(*columns)


# Raw pyarrow write to S3 (the limit) ----------------------------------------------------------------
RAW_RESULT_SCHEMA = "task long, files long, bytes long"


def raw_parquet_task(
    bucket: str,
    prefix: str,
    s3: dict[str, str],
    codec: str | None,
    row_group_bytes: int,
    batches: Iterator[Any],
) -> Iterator[Any]:
    """mapInArrow body: write this partition as ONE parquet file straight to its final key with
    pyarrow's own S3 filesystem (native multipart upload, background part uploads). No commit
    protocol, no manifest, no `_SUCCESS`: the fastest a task can put these bytes on S3.

    It encodes with the same writer our tasks use (same codec, same row-group buffering), so the
    difference to a committed write is the commit protocol and the upload path only.
    """
    from pyarrow import fs

    from airflow_commit_provider.spark.task_info import current_task_info

    partition = current_task_info().partition
    filesystem = fs.S3FileSystem(
        access_key=s3["access_key"],
        secret_key=s3["secret_key"],
        endpoint_override=s3["endpoint"],
        region=s3["region"],
        allow_bucket_creation=False,
    )
    stream = filesystem.open_output_stream(f"{bucket}/{prefix}/part-{partition:05d}-raw.snappy.parquet")
    yield _write_one_parquet(stream, partition, codec, row_group_bytes, batches)


def raw_local_parquet_task(
    directory: str, codec: str | None, row_group_bytes: int, batches: Iterator[Any]
) -> Iterator[Any]:
    """mapInArrow body: the same uncommitted single-file write, to a local directory."""
    from airflow_commit_provider.spark.task_info import current_task_info

    partition = current_task_info().partition
    stream = open(os.path.join(directory, f"part-{partition:05d}-raw.snappy.parquet"), "wb")  # noqa: SIM115
    yield _write_one_parquet(stream, partition, codec, row_group_bytes, batches)


#: Bytes per row on disk for `make_mixed_frame` (snappy parquet).
MIXED_BYTES_PER_ROW = 100


def make_mixed_frame(spark: Any, target_bytes: int, partitions: int, seed: int = 7) -> Any:
    """A deterministic DataFrame of about `target_bytes` on disk with strings among the numbers, as
    a typical table has: an id, a timestamp, three random doubles, a small int, a user name, an
    HTTP method and a 64-character hex digest (whose size, unlike the others', no schema bounds)."""
    from pyspark.sql import functions as F

    rows = max(target_bytes // MIXED_BYTES_PER_ROW, partitions)
    columns = [F.col("id"), F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("ts")]
    columns += [F.rand(seed + i).alias(f"d{i}") for i in range(3)]
    columns.append((F.col("id") % 997).cast("int").alias("k"))
    columns.append(F.concat(F.lit("user-"), (F.col("id") % 100_003).cast("string")).alias("user"))
    columns.append(
        F.element_at(F.array(*map(F.lit, ("GET", "POST", "PUT"))), (F.col("id") % 3 + 1).cast("int")).alias(
            "method"
        )
    )
    columns.append(F.sha2(F.col("id").cast("string"), 256).alias("digest"))
    return spark.range(0, rows, numPartitions=partitions).select(*columns)


def transfer_only_task(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow body that only counts the rows: the cost of moving them from the JVM to Python."""
    import pyarrow as pa

    from airflow_commit_provider.spark.task_info import current_task_info

    rows = sum(batch.num_rows for batch in batches)
    yield pa.RecordBatch.from_pylist(
        [{"task": current_task_info().partition, "files": 0, "bytes": rows}], schema=_raw_result_schema()
    )


def _write_one_parquet(
    stream: Any, partition: int, codec: str | None, row_group_bytes: int, batches: Iterator[Any]
) -> Any:
    """Encode every batch into one parquet file on `stream` (closed here) with our tasks' writer."""
    import pyarrow as pa

    from airflow_commit_provider.spark.formats import CountingSink, open_format_writer

    writer = None
    sink = CountingSink(stream)
    try:
        for batch in batches:
            if writer is None:
                writer = open_format_writer(
                    "parquet", sink, batch.schema, codec, row_group_bytes=row_group_bytes
                )
            if batch.num_rows:
                writer.write(batch)
        if writer is not None:
            writer.close()
    finally:
        sink.close()
        stream.close()
    return pa.RecordBatch.from_pylist(
        [{"task": partition, "files": 1, "bytes": sink.count}], schema=_raw_result_schema()
    )


def _raw_result_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("task", pa.int64()), ("files", pa.int64()), ("bytes", pa.int64())])
