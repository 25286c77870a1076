"""Options shared by all committers, and the small result a task returns to the driver."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Literal

ConflictMode = Literal["fail", "append", "replace"]
CONFLICT_MODES = ("fail", "append", "replace")
MIN_PART_SIZE = 5 * 1024 * 1024


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
    local_staging_dir: str | None = None
    """Where staging committers buffer task output before upload; default the system temp dir."""
    skip_cleanup: bool = False
    job_id_source: str = "airflow_commit.job_id"
    rows_by_task: bool = True

    def __post_init__(self) -> None:
        if self.conflict_mode not in CONFLICT_MODES:
            raise ValueError(
                f"conflict_mode {self.conflict_mode!r} is not one of {', '.join(CONFLICT_MODES)}"
            )
        if self.threads < 1:
            raise ValueError(f"threads must be at least 1, got {self.threads}")
        if self.part_size < MIN_PART_SIZE:
            raise ValueError(
                f"part_size must be at least {MIN_PART_SIZE} bytes (S3's minimum), got {self.part_size}"
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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | str) -> TaskCommitResult:
        raw = json.loads(data) if isinstance(data, str) else data
        return cls(**{key: raw.get(key) for key in cls.__dataclass_fields__})
