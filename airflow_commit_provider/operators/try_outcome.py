"""What a committed try reads of Airflow's context, and how it proves and reports what earlier and
this try's jobs became. The decisions are the core's (:mod:`~airflow_commit_provider.tries.plan`,
:mod:`~airflow_commit_provider.success.check`); this module turns them into task errors and log lines.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Protocol

from airflow.sdk.exceptions import AirflowException

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.task_key import TaskKey
from airflow_commit_provider.success.check import SuccessExpectations, partitions_summary

if TYPE_CHECKING:
    from airflow_commit_provider.core.committers.registry import WritePlan
    from airflow_commit_provider.core.formats.success import SuccessData
    from airflow_commit_provider.core.store import Store

__all__ = [
    "RegistrationPendingError",
    "TaskLog",
    "task_key",
    "try_expectations",
    "try_number",
    "try_summary",
    "verify_success",
]


class RegistrationPendingError(AirflowException):
    """The job committed, and its partitions are not yet registered in its table: the operator
    finishes that with a registration-only Spark application (operators.registration)."""

    def __init__(self, destination: str, table: str, job_id: str) -> None:
        super().__init__(
            f"job {job_id} committed to {destination}, but its partitions are not yet registered in "
            f"table {table}: the operator submits a registration-only Spark application for them (a "
            f"driver's finish_table_write(spark, {table!r}, {job_id!r}) does the same)"
        )
        self.destination, self.table, self.job_id = destination, table, job_id


class TaskLog(Protocol):
    """The operator's own logger (``self.log``): what it says must be in the task's log."""

    def info(self, message: str, /, *args: Any) -> Any: ...
    def warning(self, message: str, /, *args: Any) -> Any: ...
    def exception(self, message: str, /, *args: Any) -> Any: ...


def try_number(context: Any) -> int | None:
    """The running try's number, or None when the context has no task instance."""
    ti = context.get("ti") if hasattr(context, "get") else None
    number = getattr(ti, "try_number", None)
    return number if isinstance(number, int) else None


def task_key(context: Any) -> TaskKey | None:
    """The task instance key of the running try, or None when the context has no task instance."""
    ti = context.get("ti") if hasattr(context, "get") else None
    found = [getattr(ti, name, None) for name in ("dag_id", "task_id", "run_id")]
    names = [name for name in found if isinstance(name, str) and name]
    if len(names) != len(found):
        return None
    dag_id, task_id, run_id = names
    map_index = getattr(ti, "map_index", None)
    return TaskKey(dag_id, task_id, run_id, map_index if isinstance(map_index, int) else -1)


def try_expectations(plan: WritePlan, job_id: str, submitted_ms: int) -> SuccessExpectations:
    """What proves this try's job committed.

    Our committers and Hadoop's S3A committers record the job ID the operator passed. Hadoop's
    manifest and FileOutputCommitter cannot be given one (Spark sets a random
    ``spark.sql.sources.writeJobUUID`` per write; the classic committer writes a 0-byte marker),
    so for those the ``_SUCCESS`` must have been written after this try's spark-submit started.
    """
    if plan.records_job_id:
        return SuccessExpectations(job_id=job_id)
    # `newer_than` is strict, and both times are whole milliseconds: written at the start passes.
    started = datetime.fromtimestamp((submitted_ms - 1) / 1000, tz=timezone.utc)
    return SuccessExpectations(newer_than=started, allow_legacy=not plan.traits.jvm.json_success)


def verify_success(
    store: Store, plan: WritePlan, job_id: str, submitted_ms: int, log: TaskLog
) -> SuccessData:
    """This job's ``_SUCCESS`` (or its record), or an error naming why what was found is not."""
    expectations = try_expectations(plan, job_id, submitted_ms)
    destination = plan.destination
    try:
        found = expectations.check(store, destination.root)
    except InvalidCommitDataError as error:
        raise AirflowException(
            f"job {job_id}: {error}; the {plan.committer} committer writes a JSON _SUCCESS, so Spark "
            "did not write through it (for engine='hadoop', check the committer factory and commit "
            "protocol classes are on the classpath)"
        ) from error
    data = found.data
    if found.state == "missing" or data is None:
        raise AirflowException(
            f"spark-submit succeeded but {destination} has no _SUCCESS proving job {job_id}: it did "
            f"not commit ({found.describe()}; does the application write through the committer?)"
        )
    if found.state == "rejected" and data.job_id == job_id and data.registration_pending:
        raise RegistrationPendingError(destination.uri, str(data.table), job_id)
    if found.state == "rejected":
        raise AirflowException(
            f"the _SUCCESS in {destination} is not this try's: it names job {data.job_id!r} "
            f"(committer {data.committer!r}, written {data.date}), this try's job is {job_id!r}; a "
            "_SUCCESS of another job, or written before this try started, means this try's output was "
            f"not committed ({found.describe()})"
        )
    if found.from_record:
        log.info(
            "The _SUCCESS in %s belongs to a later job; job %s is verified by its record %s",
            destination,
            job_id,
            found.path,
        )
    if expectations.job_id is None:
        log.warning(
            "Hadoop's %s committer records Spark's own job ID (%r), not this try's (%s): the _SUCCESS "
            "was accepted because it was written after this try started",
            plan.committer,
            data.job_id,
            job_id,
        )
    return data


def try_summary(
    data: SuccessData,
    plan: WritePlan,
    job_id: str,
    *,
    try_number: int | None,
    duration: float,
    log: TaskLog,
    adopted_from_try: int | None = None,
) -> dict[str, Any]:
    """The task's XCom: what the commit made visible, and which job of which try made it."""
    summary = data.summary()
    result = {
        "job_id": data.job_id or job_id,
        "try_job_id": job_id,
        "committer": data.committer,
        "engine": plan.engine,
        "destination": plan.destination.uri,
        "files": summary.get("files"),
        "bytes": summary.get("bytes"),
        "rows": summary.get("rows"),
        **partitions_summary(summary.get("partitions"), summary.get("partition_count")),
        "duration_seconds": round(duration, 3),
        "try_number": try_number,
        "adopted_from_try": adopted_from_try,
    }
    log.info("Job %s committed: %s", data.job_id, result)
    return result
