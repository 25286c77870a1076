"""The job outcome file: the one decision of a job, commit or abort, made once.

A commit outcome carries the committed task list, so whoever finds it (a resumed driver, an
abort, an Airflow retry) can roll the commit forward with exactly the attempts the driver chose,
and the references to the job's file list and partition list, written before the commit point, so
the roll-forward writes the same references into `_SUCCESS` and the record without writing the
lists again. An outcome from before the lists has none; its roll-forward writes them then.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import ListRef
from airflow_commit_provider.core.formats.jsonio import (
    now_millis,
    optional_field,
    optional_millis,
    parse_object,
    require_field,
)
from airflow_commit_provider.core.options import CONFLICT_MODES, TaskCommitResult
from airflow_commit_provider.core.task_key import TaskKey, TryOrigin

OUTCOME_NAME = "airflow_commit.JobOutcome/1"
Decision = Literal["commit", "abort"]
DECISIONS: tuple[Decision, ...] = ("commit", "abort")


@dataclass(frozen=True)
class JobOutcome:
    """`_airflow_commit/<jobId>.outcome.json`, created once (create-if-absent); JSON field names are
    these fields' in camelCase."""

    job_id: str
    """The job decided."""
    decision: Decision
    """`commit` or `abort`: whichever was created first holds."""
    committer: str
    """The committer's name."""
    committed: tuple[TaskCommitResult, ...] = ()
    """The task attempts the commit takes, one per task (each with its manifest's SHA-256); empty in
    an abort."""
    conflict_mode: str = "append"
    """How a commit treats existing output; whoever rolls the commit forward must apply the same."""
    reason: str = ""
    """Why an abort was decided."""
    origin: TryOrigin | None = None
    """The try that decided, for the commit report; it decides nothing."""
    table: str | None = None
    """The catalog table whose partitions are registered once the commit is rolled forward."""
    timestamp: int = field(default_factory=now_millis)
    """When it was decided, in epoch milliseconds."""
    hostname: str = field(default_factory=socket.gethostname)
    """The host that decided."""
    file_list: ListRef | None = None
    """The job's file list, written before the commit point (None in an abort, or an older outcome)."""
    partition_list: ListRef | None = None
    """The job's partition list, when it wrote more partitions than `_SUCCESS` lists inline."""

    @property
    def committing(self) -> bool:
        return self.decision == "commit"

    def to_bytes(self) -> bytes:
        payload = {
            "name": OUTCOME_NAME,
            "jobId": self.job_id,
            "decision": self.decision,
            "committer": self.committer,
            "conflictMode": self.conflict_mode,
            "reason": self.reason,
            "timestamp": self.timestamp,
            "hostname": self.hostname,
            "committed": [result.to_json() for result in self.committed],
        }
        if self.origin is not None:
            payload["origin"] = origin_json(self.origin)
        if self.table is not None:
            payload["table"] = self.table
        if self.file_list is not None:
            payload["fileList"] = self.file_list.to_json()
        if self.partition_list is not None:
            payload["partitionList"] = self.partition_list.to_json()
        return json.dumps(payload).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, source: str, job_id: str) -> JobOutcome:
        """Parse and check an outcome; anything foreign or damaged is refused, naming `source`."""
        obj = parse_object(data, source)
        if obj.get("name") != OUTCOME_NAME:
            raise InvalidCommitDataError(f"{source}: name is {obj.get('name')!r}, expected {OUTCOME_NAME!r}")
        found_job = optional_field(obj, "jobId", str, source, "")
        if found_job != job_id:
            raise InvalidCommitDataError(f"{source}: outcome of job {found_job!r}, not of job {job_id!r}")
        decision = optional_field(obj, "decision", str, source, "")
        if decision not in DECISIONS:
            raise InvalidCommitDataError(
                f"{source}: decision {decision!r} is not one of {', '.join(DECISIONS)}"
            )
        conflict_mode = optional_field(obj, "conflictMode", str, source, "append")
        if conflict_mode not in CONFLICT_MODES:
            raise InvalidCommitDataError(
                f"{source}: conflictMode {conflict_mode!r} is not one of {', '.join(CONFLICT_MODES)}"
            )
        try:
            committed = tuple(
                TaskCommitResult.from_json(item)
                for item in optional_field(obj, "committed", list, source, [])
            )
        except (TypeError, ValueError, AttributeError) as error:
            raise InvalidCommitDataError(f"{source}: malformed 'committed' entry: {error}") from error
        if any(not isinstance(r.task_id, str) or not isinstance(r.task_attempt_id, str) for r in committed):
            raise InvalidCommitDataError(f"{source}: a 'committed' entry lacks its task or attempt ID")
        return cls(
            job_id=found_job,
            decision=decision,
            committer=optional_field(obj, "committer", str, source, ""),
            committed=committed,
            conflict_mode=conflict_mode,
            reason=optional_field(obj, "reason", str, source, ""),
            origin=None if obj.get("origin") is None else read_origin(obj["origin"], source),
            table=optional_field(obj, "table", str, source, None),
            timestamp=optional_millis(obj, "timestamp", source, 0),
            hostname=optional_field(obj, "hostname", str, source, ""),
            file_list=ListRef.read_field(obj, "fileList", source),
            partition_list=ListRef.read_field(obj, "partitionList", source),
        )


def origin_json(origin: TryOrigin) -> dict[str, Any]:
    """The try that ran a job as the outcome file and the operator's conf (`CONF_ORIGIN`) carry it."""
    key = origin.key
    return {
        "dagId": key.dag_id,
        "taskId": key.task_id,
        "runId": key.run_id,
        "mapIndex": key.map_index,
        "tryNumber": origin.try_number,
    }


def read_origin(value: object, source: str) -> TryOrigin:
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
    return TryOrigin(key, require_field(value, "tryNumber", int, where))
