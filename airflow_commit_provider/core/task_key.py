"""Who ran a job, as the orchestrator names it: the task instance and its try.

Its own module because two sides need it and neither may import the other: the try logic
(`tries.plan`) derives job IDs from a :class:`TaskKey`, and a job's decision (`formats.outcome`)
records the :class:`TryOrigin` so that a commit report can name the DAG run and try of each job.
It imports nothing: how an origin is written down is the outcome file's (`formats.outcome`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TaskKey", "TryOrigin"]


@dataclass(frozen=True)
class TaskKey:
    """One task instance, as the orchestrator names it (Airflow: its task instance key)."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1


@dataclass(frozen=True)
class TryOrigin:
    """The try that ran a job. Recorded for people (the commit report), never trusted: which job
    a try runs or adopts is decided by its job IDs alone (`tries.plan`)."""

    key: TaskKey
    try_number: int
