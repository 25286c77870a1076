"""``write_committed``: write a DataFrame through one of our committers, Spark tasks as commit tasks.

A write is planned, run, then summarised. The plan (``write_plan``) decides everything that can be
refused before any work: committer, conflict handling, job ID, options. Running it on the driver:
set up the job; run one ``mapInArrow`` task per Spark partition (each writes its files through a
task attempt and commits it); ``collect()`` the one result row per partition that Spark accepted;
commit the job with exactly those results. Any failure between job setup and the end of job commit
aborts the job (``abort_job``: every upload and temp file of the job goes) and re-raises, unless
the job had already passed its commit point: then the abort completes the commit and the write
returns its summary (see ``core.stages.job_state``).

A write to a catalog table (``table=``, ``spark.tables``) names the table in the job's commit
decision; once ``run_write`` has the committed record, it registers the partitions written.

Committer choice (``committer=`` or ``spark.airflow_commit.committer``), when not given:

- ``conflict_mode`` ``fail`` or ``replace``: the staging committers, which implement those modes
  at job commit - ``partitioned`` (per partition written) if ``partition_by`` is given, else
  ``directory`` (whole destination);
- otherwise (``append``, the default): ``magic`` on S3 (output streams straight to the final keys
  as pending multipart uploads: no rename, no local disk) and ``manifest`` on local/file:// paths
  (atomic renames, as Hadoop's manifest committer).

With ``magic``, ``manifest`` and ``file-v1``/``file-v2``, ``conflict_mode='fail'`` is checked on the
driver before the job starts (like Spark's SaveMode.ErrorIfExists) and ``replace`` is refused: only
the staging committers replace output at job commit (``WritePlan.check_conflicts_before_setup``).

Job ID: ``spark.airflow_commit.job_id`` (the thread's local property, then the session conf) or a
new uuid4; it is set as the local property ``spark.sql.sources.writeJobUUID`` for the write's Spark
jobs (visible to tasks through ``TaskContext.getLocalProperty``) and appears in every file name.
A job ID names one job at one destination: once it is committed or aborted it cannot be set up
again (``JobFencedError``). ``CommittedSparkSubmitOperator`` gives every Airflow try its own.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core.catalog import Catalog, CatalogError, register_table_partitions
from airflow_commit_provider.core.committers import Committer, TaskCommitResult, create_committer
from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages import conflicts
from airflow_commit_provider.core.stages.errors import CommitError, OutputConflictError
from airflow_commit_provider.core.store import open_store
from airflow_commit_provider.spark import config as cfg
from airflow_commit_provider.spark.arrow_batches import write_job_batches
from airflow_commit_provider.spark.catalog import SparkCatalog
from airflow_commit_provider.spark.frames import PARTITION_VALUE_BYTES, prepare_frame
from airflow_commit_provider.spark.instrumentation import TaskInstrumentation, WriteInstrumentation
from airflow_commit_provider.spark.summary import WriteRun, WriteSummary, summarise
from airflow_commit_provider.spark.tables import plan_committed_write
from airflow_commit_provider.spark.task_config import TaskConfig
from airflow_commit_provider.spark.write_plan import SparkWritePlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "WriteSummary",
    "abort_after_failure",
    "finish_job",
    "open_committer",
    "register_after_commit",
    "run_write",
    "set_up_job",
    "write_committed",
]

log = logging.getLogger("airflow_commit_provider.spark")


def write_committed(
    df: DataFrame,
    destination: str | os.PathLike[str] | StorePath | None = None,
    *,
    table: str | None = None,
    create_table: bool = False,
    format: str | None = None,
    partition_by: str | Sequence[str] = (),
    committer: str | None = None,
    conflict_mode: str | None = None,
    options: Mapping[str, Any] | None = None,
    max_job_duration: timedelta | float | None = None,
) -> WriteSummary:
    """Write ``df`` to ``destination`` (``s3://``/``s3a://``/``file://`` URL or local path), or to the
    catalog table ``table``, and commit it.

    ``destination`` defaults to the conf ``spark.airflow_commit.table``, then
    ``spark.airflow_commit.destination`` (which ``CommittedSparkSubmitOperator`` sets). Locations
    are taken literally after the scheme and bucket, as Spark and the AWS CLI take them.

    ``table`` (``db.events``): location, format (default parquet for a path) and partition columns
    come from the session's catalog, and the DataFrame must have the table's columns and types; a
    ``format`` or ``partition_by`` given must agree. After the commit point the partitions written
    are registered in the catalog (``spark.tables``). ``create_table=True`` creates a missing table
    as ``saveAsTable`` would, under the warehouse or at ``destination``.

    ``options``: writer options (``maxRecordsPerFile``, ``maxBytesPerFile``, ``compression``,
    csv ``header`` (default true), ``sep``, ``quote``, ``escape``..., json ``timestampFormat``...),
    committer options (``threads``, ``part_size``, ``parts_in_flight``, ``allow_unsafe_v2``,
    ``local_staging_dir``) and S3 options (``s3.endpoint_url``, ``s3.access_key_id``,
    ``s3.secret_access_key``, ``s3.session_token``, ``s3.region``, ``s3.verify`` (false or a CA bundle),
    ``s3.request_path`` (auto, crt or boto3); else ``spark.airflow_commit.s3.*`` confs, else the driver's
    environment: ``AWS_*``, ``AIRFLOW_COMMIT_S3_VERIFY`` or ``AWS_CA_BUNDLE`` for ``s3.verify``, and
    ``AIRFLOW_COMMIT_S3_REQUEST_PATH``).

    ``max_job_duration`` (a timedelta or seconds; else the option of that name, else the conf
    ``spark.airflow_commit.max_job_duration``, which ``CommittedSparkSubmitOperator`` sets from the
    task's ``execution_timeout``): the longest the write may take. The upload committers (magic,
    directory, partitioned) refuse, before any upload, a bucket whose lifecycle rules could abort
    the job's pending uploads sooner (docs/lifecycle-rules.md).
    """
    if max_job_duration is not None:
        if any(str(key).lower() == "max_job_duration" for key in options or {}):
            raise ValueError("give max_job_duration as the argument or as an option, not both")
        options = {**(options or {}), "max_job_duration": max_job_duration}
    plan = plan_committed_write(
        df,
        destination,
        table=table,
        create_table=create_table,
        format=format,
        partition_by=partition_by,
        committer=committer,
        conflict_mode=conflict_mode,
        options=options,
    )
    return run_write(df, plan)


def run_write(
    df: DataFrame,
    plan: SparkWritePlan,
    *,
    instrumentation: WriteInstrumentation | None = None,
    catalog: Catalog | None = None,
) -> WriteSummary:
    """Run a planned write and summarise it; tests and benchmarks pass their `instrumentation`,
    and a table write's `catalog` (default: the session's)."""
    started = time.monotonic()
    conf = cfg.SparkConf(df.sparkSession)
    prepared, task_config = prepare_frame(df, plan, conf)
    _warn_if_last_attempt_wins(plan, conf)
    run = _run(prepared, plan, task_config, instrumentation or WriteInstrumentation(), started)
    if plan.table is not None:
        run = dataclasses.replace(
            run, success=register_after_commit(catalog or SparkCatalog(df.sparkSession), plan, run.success)
        )
    summary = summarise(plan, run)
    log.info(
        "job %s: committed %d files, %d bytes, %s rows to %s in %.1fs (job commit %.1fs)",
        plan.job_id,
        summary.files,
        summary.bytes,
        summary.rows,
        plan.destination,
        summary.total_seconds,
        summary.job_commit_seconds,
    )
    return summary


def _run(
    prepared: DataFrame,
    plan: SparkWritePlan,
    task_config: TaskConfig,
    instrumentation: WriteInstrumentation,
    started: float,
) -> WriteRun:
    """Set up the job, run the tasks, commit exactly what Spark accepted; abort on any failure."""
    destination, job_id = plan.destination, plan.job_id
    job = open_committer(plan)
    try:
        set_up_job(job, plan, description="write_committed")
        try:
            tasks, results = _run_tasks(prepared, plan, task_config, instrumentation.task)
            tasks_done = time.monotonic()
            if instrumentation.before_job_commit:
                instrumentation.before_job_commit(job, results, task_config)
            success = job.commit_job(results)
        except BaseException as error:
            log.error("job %s: write to %s failed; aborting the job", job_id, destination)
            committed = abort_after_failure(job, f"{type(error).__name__}: {error}")
            if committed is None or not isinstance(error, Exception):
                raise
            log.warning(
                "job %s had passed its commit point when it failed (%s); abort completed the commit",
                job_id,
                error,
            )
            success = committed
    finally:
        finish_job(job)
    return WriteRun(success, tasks, results, started, tasks_done, time.monotonic())


def register_after_commit(catalog: Catalog, plan: SparkWritePlan, record: SuccessData) -> SuccessData:
    """Register the committed partitions; on failure the data stays committed and the job record
    says registration is pending, for ``finish_table_write`` (a resume or a retry) to finish."""
    store = open_store(plan.destination, hdfs=plan.hdfs, **plan.s3.store_kwargs())
    try:
        return register_table_partitions(catalog, store, plan.destination, record)
    except CatalogError as error:
        raise type(error)(
            f"job {plan.job_id} committed to {plan.destination}, but registering its partitions in "
            f"{plan.table} failed ({error}); its record says registration is pending: "
            "finish_table_write finishes it"
        ) from error
    finally:
        store.close()


def _run_tasks(
    prepared: DataFrame,
    plan: SparkWritePlan,
    task_config: TaskConfig,
    instrumentation: TaskInstrumentation | None,
) -> tuple[list[dict[str, Any]], list[TaskCommitResult]]:
    """One Spark job, one commit task per partition: each task's row, and the results to commit."""
    job_id, name = plan.job_id, plan.commit.committer
    with (
        _local_properties(
            prepared.sparkSession,
            {
                cfg.SPARK_WRITE_JOB_UUID: job_id,
                "spark.job.description": (
                    f"write_committed {plan.format} to {plan.destination} ({name} committer, job {job_id})"
                ),
            },
        ),
        write_job_batches(prepared, dict.fromkeys(task_config.key_columns, PARTITION_VALUE_BYTES)),
    ):
        collected = prepared.mapInArrow(
            functools.partial(_write_partition, task_config, instrumentation), _result_schema()
        ).collect()
    tasks = [row.asDict() for row in collected]
    if not tasks and not plan.commit.partition_columns:
        # A DataFrame with no partitions runs no task; like Spark (which then runs one empty
        # task) write partition 0's empty file so the schema survives - here, on the driver.
        return tasks, _empty_write(task_config)
    return tasks, _accepted_results(tasks, job_id)


def open_committer(plan: SparkWritePlan) -> Committer:
    """The plan's committer, on a store of its own for the destination (`finish_job` closes it)."""
    store = open_store(
        plan.destination, threads=plan.commit_options.threads, hdfs=plan.hdfs, **plan.s3.store_kwargs()
    )
    try:
        return create_committer(
            plan.commit.committer,
            store,
            plan.destination,
            plan.job_id,
            plan.commit_options,
            progress=_progress_logger(plan.job_id, plan.destination),
        )
    except BaseException:
        store.close()
        raise


def set_up_job(job: Committer, plan: SparkWritePlan, *, description: str) -> None:
    """Set up the job; first, for ``fail`` with a committer that resolves no conflicts, refuse a
    destination that already holds output."""
    if plan.commit.check_conflicts_before_setup:
        _refuse_existing_output(job, plan.destination)
    log.info(
        "job %s: %s writing %s to %s with the %s committer (conflict_mode=%s)",
        plan.job_id,
        description,
        plan.format,
        plan.destination,
        plan.commit.committer,
        plan.commit.conflict_mode,
    )
    job.setup_job()


def finish_job(job: Committer) -> None:
    """After commit or abort: remove the job's local staging directory (the staging committers
    buffer task output there) and close the job's store."""
    try:
        local_dir = job.local_job_dir()
        if local_dir is not None:
            shutil.rmtree(local_dir, ignore_errors=True)
    finally:
        job.store.close()


def _refuse_existing_output(job: Committer, destination: StorePath) -> None:
    """``conflict_mode='fail'`` for a committer that resolves no conflicts, before the job starts."""
    for status in conflicts.visible_files(job.context, destination):
        raise OutputConflictError(f"conflict_mode='fail' but {destination} already holds {status.path}")


def _warn_if_last_attempt_wins(plan: SparkWritePlan, conf: cfg.SparkConf) -> None:
    speculation = (conf.spark_conf(cfg.SPARK_SPECULATION) or "").lower() == "true"
    if speculation and not plan.commit.traits.exclusive_task_commit:
        log.warning(
            "committer %s lets the last task attempt win; with spark.speculation a killed duplicate can "
            "replace an accepted attempt's output at task commit: prefer 'manifest' or 'magic'",
            plan.commit.committer,
        )


def _write_partition(config: TaskConfig, instrumentation: TaskInstrumentation | None, batches: Any) -> Any:
    from airflow_commit_provider.spark.tasks import write_partition

    return write_partition(config, instrumentation, batches)


def _empty_write(config: TaskConfig) -> list[TaskCommitResult]:
    from airflow_commit_provider.spark.task_info import TaskInfo
    from airflow_commit_provider.spark.tasks import run_task_attempt

    outcome = run_task_attempt(config, TaskInfo(partition=0, attempt_id=0, attempt_number=0), ())
    return [outcome.result] if outcome.result is not None else []


def _result_schema() -> str:
    from airflow_commit_provider.spark.tasks import RESULT_SCHEMA

    return RESULT_SCHEMA


def _accepted_results(rows: Sequence[Mapping[str, Any]], job_id: str) -> list[TaskCommitResult]:
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


def abort_after_failure(job: Committer, reason: str) -> SuccessData | None:
    """Abort after a failure; a job past its commit point is committed instead (its SuccessData)."""
    try:
        return job.abort_job(reason)
    except Exception:
        log.exception("job %s: abort failed; `airflow-commit` cleanup can finish it", job.job_id)
        return None
