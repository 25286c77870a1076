"""Points where tests and benchmarks observe or disturb a write, passed explicitly.

They are never part of a write's configuration (``TaskConfig``) or of ``write_committed``'s
signature: a test runs a planned write with ``writer.run_write(df, plan, instrumentation=...)``,
and the task side receives its part as a separate argument of ``tasks.write_partition``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from airflow_commit_provider.core.committers import Committer, TaskCommitResult
    from airflow_commit_provider.spark.task_config import TaskConfig
    from airflow_commit_provider.spark.task_info import TaskInfo


@dataclass(frozen=True)
class TaskInstrumentation:
    """Called inside every task (so picklable), in the task's own process."""

    received_batch: Callable[[TaskInfo, pa.RecordBatch], None] | None = None
    """Each Arrow batch Spark hands the task, before it is written (what the task holds at once)."""
    after_file: Callable[[TaskInfo, str], None] | None = None
    """After each file is closed (published into the attempt), with its relative path."""
    before_commit: Callable[[TaskInfo], None] | None = None
    after_commit: Callable[[TaskInfo, TaskCommitResult | None], None] | None = None


@dataclass(frozen=True)
class WriteInstrumentation:
    """The task side, and a driver call between the last task commit and job commit."""

    task: TaskInstrumentation | None = None
    before_job_commit: Callable[[Committer, list[TaskCommitResult], TaskConfig], None] | None = None
