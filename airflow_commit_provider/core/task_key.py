"""Who ran a job, as the orchestrator names it: the task instance and its try.

Its own module because two sides need it and neither may import the other: the try logic
(`tries.plan`) derives job IDs from a :class:`TaskKey`, and a job's decision (`formats.outcome`)
records the :class:`TryOrigin` so that a commit report can name the DAG run and try of each job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import require_field

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

    def to_json(self) -> dict[str, Any]:
        key = self.key
        return {
            "dagId": key.dag_id,
            "taskId": key.task_id,
            "runId": key.run_id,
            "mapIndex": key.map_index,
            "tryNumber": self.try_number,
        }

    @classmethod
    def from_json(cls, value: object, source: str) -> TryOrigin:
        """The recorded origin; anything malformed is refused naming `source`, never guessed at."""
        if not isinstance(value, dict):
            raise InvalidCommitDataError(f"{source}: field 'origin' is not an object")
        where = f"{source} origin"
        key = TaskKey(
            require_field(value, "dagId", str, where),
            require_field(value, "taskId", str, where),
            require_field(value, "runId", str, where),
            require_field(value, "mapIndex", int, where),
        )
        return cls(key, require_field(value, "tryNumber", int, where))
