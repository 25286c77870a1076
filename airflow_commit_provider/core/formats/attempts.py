"""Task attempts that ended without being their task's commit, for the commit report.

The job outcome names only the attempt each task committed. The others leave no trace once job
commit's cleanup deletes the job directory, yet they are what explains a slow or odd commit: a
speculative copy that lost, a failed attempt that was retried, one that found its task already
committed. So an attempt that loses leaves a note (`JobLayout.attempt_note`, written by the
attempt itself), and job commit folds the notes, with what it infers for attempts that left files
but no note (killed), into the job record before its cleanup.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import (
    dumps,
    optional_field,
    optional_millis,
    parse_object,
    require_field,
)

NOTE_NAME = "airflow_commit.LostAttempt/1"

#: How an attempt lost, as it notes itself: its commit was refused because another attempt of its
#: task had committed first (it adopted that commit instead); it was aborted while another attempt
#: held its task's commit (a speculative race lost); it was aborted with none committed (it failed,
#: and its task was retried). One that left work but no note was killed (its process died); job
#: commit infers that.
REFUSED, SPECULATIVE_LOST, FAILED, KILLED = "refused", "speculative lost", "failed", "killed"
OUTCOMES = (REFUSED, SPECULATIVE_LOST, FAILED, KILLED)


@dataclass(frozen=True)
class LostAttempt:
    """One attempt that is not its task's commit; times in epoch milliseconds, None if unknown (a
    killed attempt says nothing of its times)."""

    task_id: str
    task_attempt_id: str
    outcome: str
    started_at: int | None = None
    ended_at: int | None = None
    winner: str | None = None
    """The attempt that held the task's commit when this one was refused or aborted."""

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "taskId": self.task_id,
            "taskAttemptId": self.task_attempt_id,
            "outcome": self.outcome,
        }
        for key, value in (("start", self.started_at), ("end", self.ended_at), ("winner", self.winner)):
            if value is not None:
                entry[key] = value
        return entry

    def to_note(self) -> bytes:
        return dumps({"name": NOTE_NAME, **self.to_json()})

    @classmethod
    def from_note(cls, data: bytes, source: str) -> LostAttempt:
        """An attempt's note; anything foreign or damaged is refused naming `source`."""
        obj = parse_object(data, source)
        if obj.get("name") != NOTE_NAME:
            raise InvalidCommitDataError(f"{source}: name is {obj.get('name')!r}, expected {NOTE_NAME!r}")
        return cls.from_json(obj, source)

    @classmethod
    def from_json(cls, value: object, source: str) -> LostAttempt:
        if not isinstance(value, dict):
            raise InvalidCommitDataError(f"{source}: a 'lostAttempts' entry is not an object")
        attempt = require_field(value, "taskAttemptId", str, source)
        where = f"{source} attempt {attempt!r}"
        outcome = require_field(value, "outcome", str, where)
        if outcome not in OUTCOMES:
            raise InvalidCommitDataError(f"{where}: outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
        started, ended = _optional_time(value, "start", where), _optional_time(value, "end", where)
        if started is not None and ended is not None and ended < started:
            raise InvalidCommitDataError(f"{where}: ends ({ended}) before it starts ({started})")
        return cls(
            task_id=require_field(value, "taskId", str, where),
            task_attempt_id=attempt,
            outcome=outcome,
            started_at=started,
            ended_at=ended,
            winner=optional_field(value, "winner", str, where, None),
        )


def read_lost_attempts(value: object, source: str) -> list[LostAttempt] | None:
    """The job record's `lostAttempts` (None in a record written before they were kept)."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidCommitDataError(f"{source}: field 'lostAttempts' is not a list")
    return [LostAttempt.from_json(entry, source) for entry in value]


def read_left_out(value: object, source: str) -> dict[str, int] | None:
    """The job record's `lostAttemptsLeftOut`: per task, how many lost attempts it does not list."""
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(count, int) and not isinstance(count, bool) and count > 0 for count in value.values()
    ):
        raise InvalidCommitDataError(f"{source}: field 'lostAttemptsLeftOut' is not an object of counts")
    return {str(task): count for task, count in value.items()}


def _optional_time(value: dict[str, Any], name: str, source: str) -> int | None:
    return None if value.get(name) is None else optional_millis(value, name, source, 0)
