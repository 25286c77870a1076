"""What a committed write reports: the job's ``_SUCCESS`` figures and the Spark tasks' own counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.layout import SUCCESS_FILENAME
from airflow_commit_provider.core.options import TaskCommitResult
from airflow_commit_provider.spark.write_plan import SparkWritePlan


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
    """The partitions written: all of them, or past `PARTITIONS_LIMIT` the first ones, as the
    `_SUCCESS` lists them inline (`partition_count` counts them all; the partition list names them)."""
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
    partition_count: int = 0
    """How many partitions the job wrote."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class WriteRun:
    """What running a planned write produced, and when its stages ended."""

    success: SuccessData
    tasks: Sequence[Mapping[str, Any]]
    """One row per Spark task Spark accepted (``tasks.RESULT_SCHEMA``)."""
    results: Sequence[TaskCommitResult]
    """The committed task results job commit was given."""
    started: float
    tasks_done: float
    finished: float
    """``time.monotonic()`` at the start, when every task had committed, and after job commit."""


def summarise(plan: SparkWritePlan, run: WriteRun) -> WriteSummary:
    """The summary, from ``_SUCCESS`` where it has the figure and from the tasks' rows where not."""
    success, tasks = run.success, run.tasks
    return WriteSummary(
        job_id=plan.job_id,
        committer=plan.commit.committer,
        destination=plan.commit.destination.uri,
        format=plan.format,
        files=success.committed_file_count()[0],
        bytes=success.total_bytes if success.total_bytes is not None else sum(t["bytes"] for t in tasks),
        rows=success.rows if success.rows is not None else sum(t["rows"] for t in tasks),
        partitions=list(success.partitions),
        tasks=len(tasks),
        retried_tasks=sum(1 for task in tasks if task["attempt_number"] > 0),
        adopted_tasks=sum(1 for result in run.results if result.adopted_from),
        write_seconds=round(run.tasks_done - run.started, 3),
        job_commit_seconds=round(run.finished - run.tasks_done, 3),
        total_seconds=round(run.finished - run.started, 3),
        success_file=str(plan.destination.join(SUCCESS_FILENAME)),
        partition_count=success.total_partitions,
    )
