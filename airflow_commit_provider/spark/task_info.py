"""Which Spark task attempt is running: what the task side and the instrumentation hooks are told.

Its own module because both `tasks` (which runs the attempt) and `instrumentation` (whose hooks
receive it) need it, and `tasks` imports `instrumentation`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskInfo:
    partition: int
    """Spark partition ID: the commit task number and the ``%05d`` in file names."""
    attempt_id: int
    """TaskContext.taskAttemptId(): unique per SparkContext, the commit attempt number."""
    attempt_number: int
    """TaskContext.attemptNumber(): 0 for the first attempt of this partition."""
    stage_id: int = 0


def current_task_info() -> TaskInfo:
    """The running Spark task's partition and attempt, from its ``TaskContext``."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("a committed write's task side must run inside a Spark task")
    return TaskInfo(
        partition=context.partitionId(),
        attempt_id=context.taskAttemptId(),
        attempt_number=context.attemptNumber(),
        stage_id=context.stageId(),
    )
