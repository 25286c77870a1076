"""Options shared by all committers, and the small result a task returns to the driver."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from airflow_commit_provider.core.task_key import TryOrigin

ConflictMode = Literal["fail", "append", "replace"]
CONFLICT_MODES: tuple[ConflictMode, ...] = ("fail", "append", "replace")
#: S3 rejects a multipart upload whose non-final parts are smaller than this.
S3_MIN_PART_SIZE = 5 * 1024 * 1024


def parse_bool(value: object, name: str) -> bool:
    """A flag that may arrive as text (a Spark conf, an operator argument rendered from a template):
    true/1/yes or false/0/no in any case; empty or "none" (a template that rendered nothing) is false."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", "", "none"):
        return False
    raise ValueError(f"{name} must be true or false, got {value!r}")


def parse_conflict_mode(value: str) -> ConflictMode:
    """A conflict mode as the user spelled it (an argument, a rendered template), checked."""
    if value not in CONFLICT_MODES:
        raise ValueError(f"conflict_mode {value!r} is not one of {', '.join(CONFLICT_MODES)}")
    return value


@dataclass(frozen=True)
class CommitOptions:
    threads: int = 16
    """Size of the thread pool that one job commit, abort or cleanup uses."""
    conflict_mode: ConflictMode = "append"
    """Staging committers only: what to do when the destination (directory) or a partition already has data."""
    allow_unsafe_v2: bool = False
    """file-v2 publishes task output at task commit; a failed task commit leaves mixed output."""
    part_size: int = 8 * 1024 * 1024
    """Multipart part size for magic and staging uploads (S3 needs at least 5 MiB for non-final parts)."""
    parts_in_flight: int = 4
    """Magic committer: parts of one file uploading while the task encodes the next, as S3A's
    `fs.s3a.fast.upload.active.blocks` (also 4). Each open file holds up to this many parts plus
    the one being filled in memory (40 MiB at the default part size); 1 uploads each part before
    writing on, holding one part."""
    local_staging_dir: str | None = None
    """Where staging committers buffer task output before upload; default the system temp dir."""
    skip_cleanup: bool = False
    job_id_source: str = "airflow_commit.job_id"
    rows_by_task: bool = True
    origin: TryOrigin | None = None
    """The orchestrator's try that runs the job, recorded with its decision for the commit report."""
    table: str | None = None
    """The catalog table being written: the commit decision records it, so whoever rolls the
    commit forward knows whose partitions to register."""
    max_job_duration: float | None = None
    """The longest the job may run, in seconds (the Airflow task's ``execution_timeout``): job setup
    refuses a bucket whose lifecycle rules could abort its pending uploads sooner, and the job
    marker records it, so upload cleanup knows how long the job can still be live. None: unknown."""

    def __post_init__(self) -> None:
        parse_conflict_mode(self.conflict_mode)
        if self.max_job_duration is not None and not 0 < self.max_job_duration < math.inf:
            raise ValueError(
                f"max_job_duration must be a positive number of seconds, got {self.max_job_duration!r}"
            )
        if self.threads < 1:
            raise ValueError(f"threads must be at least 1, got {self.threads}")
        if self.parts_in_flight < 1:
            raise ValueError(f"parts_in_flight must be at least 1, got {self.parts_in_flight}")
        if self.part_size < S3_MIN_PART_SIZE:
            raise ValueError(
                f"part_size must be at least {S3_MIN_PART_SIZE} bytes (S3's minimum), got {self.part_size}"
            )


@dataclass(frozen=True)
class TaskCommitResult:
    """What a committed task attempt hands to the driver; job commit uses exactly these."""

    task_id: str
    task_attempt_id: str
    manifest: str
    files: int
    bytes: int
    rows: int | None = None
    adopted_from: str | None = None
    """Set when this attempt found another attempt of its task already committed and adopted it."""
    digest: str | None = None
    """SHA-256 of the manifest bytes this attempt's commit made (or adopted): the driver holds it in
    memory, so job commit can tell the manifest it reads is the one committed, unchanged since."""
    started_at: int | None = None
    committed_at: int | None = None
    """When the attempt began and committed, in epoch milliseconds (for the commit report only;
    unknown for an adopted commit, which another attempt made)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> TaskCommitResult:
        raw = json.loads(data) if isinstance(data, str) else data
        # A missing field is None: the callers check what they need (e.g. outcome.py the task IDs).
        fields: dict[str, Any] = {key: raw.get(key) for key in cls.__dataclass_fields__}
        return cls(**fields)
