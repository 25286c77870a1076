"""The DataFrame a committed write's tasks consume, and the config they receive.

Partition values are computed by Spark itself and each Spark partition is sorted by them, so a task
sees every partition directory's rows together; csv/json rows are encoded by Spark's own writers'
functions. Types a format cannot hold as Spark's writer would are refused here, before any work
(``type_support``). What the tasks then do with the rows is in ``tasks``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark.formats import file_format
from airflow_commit_provider.spark.orc_layout import TimestampRebase, process_time_zone, timestamp_rebase
from airflow_commit_provider.spark.task_config import TaskConfig
from airflow_commit_provider.spark.type_support import contains_type, refuse_unfaithful_types
from airflow_commit_provider.spark.write_plan import SparkWritePlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("airflow_commit_provider.spark")

#: Prefix of the hidden columns the prepared DataFrame adds; user columns may not start with it.
HIDDEN_PREFIX = "__airflow_commit_"
#: The longest partition value (UTF-8 bytes) a write accepts: one S3 key holds at most 1,024 bytes
#: and a local directory name 255, so no store could hold a longer one in a path. Refused while the
#: rows are read, it also bounds the partition keys' share of an Arrow batch (`arrow_batches`).
PARTITION_VALUE_BYTES = 1024


def partition_value_too_long(column: str) -> str:
    """The error for a value of `column` longer than `PARTITION_VALUE_BYTES`."""
    return (
        f"partition column {column!r} has a value of more than {PARTITION_VALUE_BYTES} bytes, "
        "longer than any store's path can hold"
    )


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def resolve_partition_columns(names: Sequence[str], requested: Sequence[str]) -> list[str]:
    """Partition columns by their names in the schema (matched case-insensitively, as Spark does)."""
    resolved = []
    for column in requested:
        if column in names:
            resolved.append(column)
            continue
        matches = [name for name in names if name.lower() == column.lower()]
        if len(matches) != 1:
            raise ValueError(
                f"partition column {column!r} is not (uniquely) in the DataFrame's columns {names}"
            )
        resolved.append(matches[0])
    if len(set(resolved)) != len(resolved):
        raise ValueError(f"partition columns repeat: {resolved}")
    if len(resolved) == len(names) and names:
        raise ValueError("cannot use all columns as partition columns: no data would be written")
    return resolved


def prepare_frame(df: DataFrame, plan: SparkWritePlan, conf: cfg.SparkConf) -> tuple[DataFrame, TaskConfig]:
    """The DataFrame the tasks consume, and the config every task receives.

    Partition values are cast to strings by Spark itself (so timestamps, dates, doubles look
    exactly as in Spark's directory names) with '' turned into null as Spark does (both go to
    ``__HIVE_DEFAULT_PARTITION__``), a value longer than `PARTITION_VALUE_BYTES` refused, and each
    Spark partition is sorted by them.
    csv/json rows are encoded by Spark's own ``to_csv``/``to_json`` with the write's options.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark, fmt, writer = df.sparkSession, plan.format, plan.writer
    fmt_spec = file_format(fmt)
    clash = [name for name in df.columns if name.startswith(HIDDEN_PREFIX)]
    if clash:
        raise ValueError(f"column names starting with {HIDDEN_PREFIX!r} are reserved: {clash}")
    partition_columns = resolve_partition_columns(df.columns, plan.commit.partition_columns)
    data_columns = [name for name in df.columns if name not in partition_columns]
    fields = {f.name: f for f in df.schema.fields}
    for column in partition_columns:
        unpartitionable = (T.ArrayType, T.MapType, T.StructType, T.BinaryType, T.VariantType)
        if isinstance(fields[column].dataType, unpartitionable):
            raise ValueError(
                f"partition column {column!r} has type {fields[column].dataType.simpleString()}, "
                "which Spark cannot partition by"
            )
    data_schema = T.StructType([fields[name] for name in data_columns])
    refuse_unfaithful_types(data_schema, fmt)
    key_columns = [f"{HIDDEN_PREFIX}p{index}" for index in range(len(partition_columns))]
    keys = []
    for column, key in zip(partition_columns, key_columns, strict=True):
        as_string = F.col(_quoted(column)).cast("string")
        too_long = F.raise_error(F.lit(partition_value_too_long(column)))
        keys.append(
            F.when(as_string == F.lit(""), F.lit(None).cast("string"))
            .when(F.octet_length(as_string) > PARTITION_VALUE_BYTES, too_long)
            .otherwise(as_string)
            .alias(key)
        )

    codec, suffix = fmt_spec.resolve_codec(
        writer.compression,
        {"parquet": conf.get(cfg.SPARK_PARQUET_CODEC), "orc": conf.get(cfg.SPARK_ORC_CODEC)}.get(fmt),
    )
    line_column = None
    header = None
    data_struct = F.struct(*[F.col(_quoted(name)) for name in data_columns])
    format_options = dict(writer.format_options)
    if fmt == "csv":
        line_column = f"{HIDDEN_PREFIX}line"
        projection = [F.to_csv(data_struct, format_options).alias(line_column)]
        if writer.csv_header:
            names = F.struct(*[F.lit(name).alias(name) for name in data_columns])
            header = spark.range(1).select(F.to_csv(names, format_options)).take(1)[0][0]
    elif fmt == "json":
        line_column = f"{HIDDEN_PREFIX}line"
        projection = [F.to_json(data_struct, format_options).alias(line_column)]
    else:
        projection = [F.col(_quoted(name)) for name in data_columns]
    prepared = df.select(*projection, *keys)
    if key_columns:
        prepared = prepared.sortWithinPartitions(*key_columns)

    return prepared, TaskConfig(
        committer=plan.commit.committer,
        destination=plan.commit.destination.uri,
        job_id=plan.job_id,
        commit_options=plan.commit_options,
        s3=plan.s3,
        hdfs=plan.hdfs,
        format=fmt,
        codec=codec,
        file_suffix=suffix,
        data_columns=tuple(data_columns),
        partition_columns=tuple(partition_columns),
        key_columns=tuple(key_columns),
        line_column=line_column,
        header=header,
        writer=writer,
        spark_schema_json=data_schema.json() if fmt in ("parquet", "orc") else None,
        spark_version=spark.version if fmt == "parquet" else None,
        timestamp_rebase=_timestamp_rebase(spark, data_schema) if fmt == "orc" else None,
        empty_schema=empty_file_schema(data_schema, line_column, conf.get("spark.sql.session.timeZone")),
    )


def _timestamp_rebase(spark: Any, data_schema: Any) -> TimestampRebase | None:
    """Spark's ORC writer rebases timestamps in the JVM default time zone (not the session's):
    ask a JVM of the session which zone that is (``user.timezone``), and take Spark's table for it."""
    from pyspark.sql import types as T

    if not contains_type(data_schema, T.TimestampType):
        return None
    try:
        zone = spark.sql("SELECT reflect('java.lang.System', 'getProperty', 'user.timezone')").first()[0]
    except Exception:  # reflection disabled: the zone a JVM started from this environment gets
        log.debug("cannot ask the JVM for its time zone", exc_info=True)
        zone = None
    return timestamp_rebase(zone or process_time_zone())


def empty_file_schema(data_schema: Any, line_column: str | None, timezone: str | None) -> Any:
    """The Arrow schema for the one empty file of an empty unpartitioned write."""
    import pyarrow as pa

    if line_column is not None:
        return pa.schema([(line_column, pa.string())])
    try:
        return arrow_schema(data_schema, timezone or "UTC")
    except Exception:  # an exotic type pyspark cannot map: no empty file, as for a partitioned write
        log.debug("no Arrow schema for %s", data_schema, exc_info=True)
        return None


def arrow_schema(spark_schema: Any, timezone: str) -> Any:
    """pyspark's Arrow form of a Spark schema, timestamps in `timezone`; raises for a type it
    cannot map."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" not in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(spark_schema)  # PySpark 4.0: timestamps are always UTC-adjusted
    return to_arrow_schema(spark_schema, timezone=timezone)
