"""``write_committed``: write a DataFrame through one of our committers, Spark tasks as commit tasks.

Driver: set up the job; run one ``mapInArrow`` task per Spark partition (each writes its files
through a task attempt and commits it); ``collect()`` the one result row per partition that Spark
accepted; commit the job with exactly those results. Any failure between job setup and the end of
job commit aborts the job (``abort_job``: every upload and temp file of the job goes) and re-raises,
unless the job had already passed its commit point: then the abort completes the commit and the
write returns its summary (see ``core.stages.job_state``).

Committer choice (``committer=`` or ``spark.airflow_commit.committer``), when not given:

- ``conflict_mode`` ``fail`` or ``replace``: the staging committers, which implement those modes
  at job commit - ``partitioned`` (per partition written) if ``partition_by`` is given, else
  ``directory`` (whole destination);
- otherwise (``append``, the default): ``magic`` on S3 (output streams straight to the final keys
  as pending multipart uploads: no rename, no local disk) and ``manifest`` on local/file:// paths
  (atomic renames, as Hadoop's manifest committer).

With ``magic``, ``manifest`` and ``file-v1``/``file-v2``, ``conflict_mode='fail'`` is checked on the
driver before the job starts (like Spark's SaveMode.ErrorIfExists) and ``replace`` is refused: only
the staging committers replace output at job commit.

Job ID: ``spark.airflow_commit.job_id`` (the thread's local property, then the session conf) or a
new uuid4; it is set as the local property ``spark.sql.sources.writeJobUUID`` for the write's Spark
jobs (visible to tasks through ``TaskContext.getLocalProperty``) and appears in every file name.
A job ID names one job at one destination: once it is committed or aborted it cannot be set up
again (``JobFencedError``). ``CommittedSparkSubmitOperator`` gives every Airflow try its own.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core.committers import COMMITTERS, Committer, TaskCommitResult, create_committer
from airflow_commit_provider.core.committers.staging import StagingCommitter
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import validate_job_id
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages import conflicts
from airflow_commit_provider.core.stages.errors import CommitError, OutputConflictError
from airflow_commit_provider.core.store import open_store
from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark.formats import file_format

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("airflow_commit_provider.spark")

_HIDDEN = "__airflow_commit_"
_STAGING = ("directory", "partitioned")
_LAST_WRITER_WINS = ("file-v1", "file-v2")


@dataclass(frozen=True)
class WriteSummary:
    """What ``write_committed`` returns: small, JSON-friendly (``to_dict``)."""

    job_id: str
    committer: str
    destination: str
    format: str
    files: int
    bytes: int
    rows: int | None
    partitions: list[str]
    tasks: int
    retried_tasks: int
    """Tasks whose accepted attempt was not their first (TaskContext.attemptNumber() > 0)."""
    adopted_tasks: int
    """Tasks whose accepted attempt found an earlier attempt already committed and adopted it."""
    write_seconds: float
    """From job setup until every task had committed (the Spark job)."""
    job_commit_seconds: float
    total_seconds: float
    success_file: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WriteHooks:
    """Test hooks (private): task-side hooks and a driver hook between task commits and job commit."""

    task: Any = None
    """tasks.TaskHooks, pickled into every task."""
    before_job_commit: Callable[[Committer, list[TaskCommitResult], cfg.TaskConfig], None] | None = None


def default_committer(destination: StorePath, partitioned: bool, conflict_mode: str) -> str:
    """The committer used when none is named (see the module docstring)."""
    if conflict_mode in ("fail", "replace"):
        return "partitioned" if partitioned else "directory"
    return "manifest" if destination.is_local else "magic"


def write_committed(
    df: DataFrame,
    path: str | os.PathLike[str] | StorePath,
    *,
    format: str = "parquet",
    partition_by: str | Sequence[str] = (),
    committer: str | None = None,
    conflict_mode: str | None = None,
    options: Mapping[str, Any] | None = None,
    _hooks: WriteHooks | None = None,
) -> WriteSummary:
    """Write ``df`` to ``path`` (``s3://``/``s3a://``/``file://`` URL or local path) and commit it.

    ``options``: writer options (``maxRecordsPerFile``, ``maxBytesPerFile``, ``compression``,
    csv ``header`` (default true), ``sep``, ``quote``, ``escape``..., json ``timestampFormat``...),
    committer options (``threads``, ``part_size``, ``allow_unsafe_v2``, ``local_staging_dir``) and S3
    options (``s3.endpoint_url``, ``s3.access_key_id``, ``s3.secret_access_key``, ``s3.session_token``,
    ``s3.region``, ``s3.verify`` (false or a CA bundle); else ``spark.airflow_commit.s3.*`` confs, else the
    driver's environment: ``AWS_*``, and ``AIRFLOW_COMMIT_S3_VERIFY`` or ``AWS_CA_BUNDLE`` for ``s3.verify``).
    URLs are percent-decoded; plain local paths are taken literally.
    """
    started = time.monotonic()
    spark = df.sparkSession
    conf = cfg.SparkConf(spark)
    fmt = file_format(format)
    destination = StorePath.parse(path)
    columns = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by)
    parsed = cfg.parse_options(options, fmt.name, conf)

    mode = (conflict_mode or conf.get(cfg.CONF_CONFLICT_MODE) or "append").lower()
    name = (
        committer or conf.get(cfg.CONF_COMMITTER) or default_committer(destination, bool(columns), mode)
    ).lower()
    if name not in COMMITTERS:
        raise ValueError(f"unknown committer {name!r}: choose one of {', '.join(sorted(COMMITTERS))}")
    commit_options = cfg.commit_options(parsed.committer, conf, mode if name in _STAGING else "append")
    if name not in _STAGING and mode == "replace":
        raise ValueError(
            f"conflict_mode='replace' needs a staging committer ('partitioned' or 'directory'), "
            f"which replace output at job commit; {name!r} cannot"
        )
    job_id = validate_job_id(conf.get(cfg.CONF_JOB_ID) or str(uuid.uuid4()))
    s3 = cfg.S3Settings() if destination.is_local else cfg.S3Settings.resolve(parsed.s3, conf)

    prepared, task_config = _plan(df, fmt.name, columns, parsed.writer, spark, conf)
    task_config = cfg.TaskConfig(
        committer=name,
        destination=str(destination),
        job_id=job_id,
        commit_options=commit_options,
        s3=s3,
        hooks=_hooks.task if _hooks else None,
        **task_config,
    )
    if name in _LAST_WRITER_WINS and (conf.spark_conf(cfg.SPARK_SPECULATION) or "").lower() == "true":
        log.warning(
            "committer %s lets the last task attempt win; with spark.speculation a killed duplicate can "
            "replace an accepted attempt's output at task commit: prefer 'manifest' or 'magic'",
            name,
        )

    store = open_store(destination, threads=commit_options.threads, **s3.store_kwargs())
    try:
        job = create_committer(
            name, store, destination, job_id, commit_options, progress=_progress_logger(job_id, destination)
        )
        if mode == "fail" and name not in _STAGING:
            for status in conflicts.visible_files(job.context, destination):
                raise OutputConflictError(
                    f"conflict_mode='fail' but {destination} already holds {status.path}"
                )
        log.info(
            "job %s: writing %s to %s with the %s committer (conflict_mode=%s)",
            job_id,
            fmt.name,
            destination,
            name,
            mode,
        )
        job.setup_job()
        try:
            with _local_properties(
                spark,
                {
                    cfg.SPARK_WRITE_JOB_UUID: job_id,
                    "spark.job.description": (
                        f"write_committed {fmt.name} to {destination} ({name} committer, job {job_id})"
                    ),
                },
            ):
                rows = prepared.mapInArrow(
                    functools.partial(_write_partition, task_config), _result_schema()
                ).collect()
            results = _accepted_results(rows, job_id)
            if not rows and not columns:
                # A DataFrame with no partitions runs no task; like Spark (which then runs one empty
                # task) write partition 0's empty file so the schema survives - here, on the driver.
                results = _empty_write(task_config)
            tasks_done = time.monotonic()
            if _hooks and _hooks.before_job_commit:
                _hooks.before_job_commit(job, results, task_config)
            success = job.commit_job(results)
        except BaseException as error:
            log.error("job %s: write to %s failed; aborting the job", job_id, destination)
            committed = _abort(job, f"{type(error).__name__}: {error}")
            if committed is None or not isinstance(error, Exception):
                raise
            log.warning(
                "job %s had passed its commit point when it failed (%s); abort completed the commit",
                job_id,
                error,
            )
            success = committed
        finally:
            if isinstance(job, StagingCommitter):
                shutil.rmtree(os.path.dirname(job.local_attempt_dir("-")), ignore_errors=True)
    finally:
        store.close()
    finished = time.monotonic()
    summary = WriteSummary(
        job_id=job_id,
        committer=name,
        destination=str(destination),
        format=fmt.name,
        files=success.file_count if success.file_count is not None else len(success.filenames),
        bytes=success.total_bytes if success.total_bytes is not None else sum(r.bytes for r in rows),
        rows=success.rows if success.rows is not None else sum(r.rows for r in rows),
        partitions=list(success.partitions),
        tasks=len(rows),
        retried_tasks=sum(1 for row in rows if row["attempt_number"] > 0),
        adopted_tasks=sum(1 for result in results if result.adopted_from),
        write_seconds=round(tasks_done - started, 3),
        job_commit_seconds=round(finished - tasks_done, 3),
        total_seconds=round(finished - started, 3),
        success_file=str(destination.join("_SUCCESS")),
    )
    log.info(
        "job %s: committed %d files, %d bytes, %s rows to %s in %.1fs (job commit %.1fs)",
        job_id,
        summary.files,
        summary.bytes,
        summary.rows,
        destination,
        summary.total_seconds,
        summary.job_commit_seconds,
    )
    return summary


def _write_partition(config: cfg.TaskConfig, batches: Any) -> Any:
    from airflow_commit_provider.spark.tasks import write_partition

    return write_partition(config, batches)


def _empty_write(config: cfg.TaskConfig) -> list[TaskCommitResult]:
    from airflow_commit_provider.spark.tasks import TaskInfo, run_task_attempt

    outcome = run_task_attempt(config, TaskInfo(partition=0, attempt_id=0, attempt_number=0), ())
    return [outcome.result] if outcome.result is not None else []


def _result_schema() -> str:
    from airflow_commit_provider.spark.tasks import RESULT_SCHEMA

    return RESULT_SCHEMA


def _accepted_results(rows: Sequence[Any], job_id: str) -> list[TaskCommitResult]:
    """The committed results Spark accepted: one row per partition; tasks without output have none."""
    seen: set[int] = set()
    results = []
    for row in rows:
        if row["task"] in seen:
            raise CommitError(f"job {job_id}: Spark returned two results for partition {row['task']}")
        seen.add(row["task"])
        if row["result"] is not None:
            results.append(TaskCommitResult.from_json(row["result"]))
    return results


def _progress_logger(job_id: str, destination: StorePath) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        if total >= 0:
            log.info("job %s: committed %d/%d files to %s", job_id, done, total, destination)
        else:
            log.info("job %s: committed %d files to %s", job_id, done, destination)

    return report


class _local_properties:
    """Set SparkContext local properties for this thread's jobs; restore the previous values."""

    def __init__(self, spark: Any, values: Mapping[str, str]):
        self._context = cfg.spark_context(spark)
        self._values = values
        self._previous: dict[str, str | None] = {}

    def __enter__(self) -> None:
        if self._context is None:
            return
        for key, value in self._values.items():
            self._previous[key] = self._context.getLocalProperty(key)
            self._context.setLocalProperty(key, value)

    def __exit__(self, *_: object) -> None:
        if self._context is None:
            return
        for key, value in self._previous.items():
            self._context.setLocalProperty(key, value)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _resolve_columns(df: DataFrame, requested: Sequence[str]) -> list[str]:
    """Partition columns by their names in the schema (matched case-insensitively, as Spark does)."""
    names = list(df.columns)
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


def _plan(
    df: DataFrame,
    fmt: str,
    partition_by: Sequence[str],
    writer: cfg.WriterOptions,
    spark: Any,
    conf: cfg.SparkConf,
) -> tuple[DataFrame, dict[str, Any]]:
    """The DataFrame the tasks consume, and the format/partition parts of the task config.

    Partition values are cast to strings by Spark itself (so timestamps, dates, doubles look
    exactly as in Spark's directory names) with '' turned into null as Spark does (both go to
    ``__HIVE_DEFAULT_PARTITION__``), and each Spark partition is sorted by them.
    csv/json rows are encoded by Spark's own ``to_csv``/``to_json`` with the write's options.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fmt_spec = file_format(fmt)
    clash = [name for name in df.columns if name.startswith(_HIDDEN)]
    if clash:
        raise ValueError(f"column names starting with {_HIDDEN!r} are reserved: {clash}")
    partition_columns = _resolve_columns(df, partition_by)
    data_columns = [name for name in df.columns if name not in partition_columns]
    fields = {f.name: f for f in df.schema.fields}
    for column in partition_columns:
        if isinstance(fields[column].dataType, (T.ArrayType, T.MapType, T.StructType, T.BinaryType)):
            raise ValueError(
                f"partition column {column!r} has type {fields[column].dataType.simpleString()}, "
                "which Spark cannot partition by"
            )
    key_columns = [f"{_HIDDEN}p{index}" for index in range(len(partition_columns))]
    keys = []
    for column, key in zip(partition_columns, key_columns, strict=True):
        as_string = F.col(_quoted(column)).cast("string")
        keys.append(
            F.when(as_string == F.lit(""), F.lit(None).cast("string")).otherwise(as_string).alias(key)
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
        line_column = f"{_HIDDEN}line"
        projection = [F.to_csv(data_struct, format_options).alias(line_column)]
        if writer.csv_header:
            names = F.struct(*[F.lit(name).alias(name) for name in data_columns])
            header = spark.range(1).select(F.to_csv(names, format_options)).first()[0]
    elif fmt == "json":
        line_column = f"{_HIDDEN}line"
        projection = [F.to_json(data_struct, format_options).alias(line_column)]
    else:
        projection = [F.col(_quoted(name)) for name in data_columns]
    prepared = df.select(*projection, *keys)
    if key_columns:
        prepared = prepared.sortWithinPartitions(*key_columns)

    data_schema = T.StructType([fields[name] for name in data_columns])
    return prepared, {
        "format": fmt,
        "codec": codec,
        "file_suffix": suffix,
        "data_columns": tuple(data_columns),
        "partition_columns": tuple(partition_columns),
        "key_columns": tuple(key_columns),
        "line_column": line_column,
        "header": header,
        "writer": writer,
        "spark_schema_json": data_schema.json() if fmt == "parquet" else None,
        "spark_version": spark.version if fmt == "parquet" else None,
        "empty_schema": _empty_schema(data_schema, line_column, conf.get("spark.sql.session.timeZone")),
    }


def _empty_schema(data_schema: Any, line_column: str | None, timezone: str | None) -> Any:
    """The Arrow schema for the one empty file of an empty unpartitioned write."""
    import pyarrow as pa

    if line_column is not None:
        return pa.schema([(line_column, pa.string())])
    try:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(data_schema, timezone=timezone or "UTC")
    except Exception:  # an exotic type pyspark cannot map: no empty file, as for a partitioned write
        log.debug("no Arrow schema for %s", data_schema, exc_info=True)
        return None


def _abort(job: Committer, reason: str) -> SuccessData | None:
    """Abort after a failure; a job past its commit point is committed instead (its SuccessData)."""
    try:
        return job.abort_job(reason)
    except Exception:
        log.exception("job %s: abort failed; `airflow-commit` cleanup can finish it", job.job_id)
        return None
