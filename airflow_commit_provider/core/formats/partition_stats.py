"""What each partition directory received from a job, kept in the job's record.

The per-file list lives in `_SUCCESS` (and per-partition ones), which the next job rewrites; the
record keeps these totals so that a commit report can say what every partition received long
after, in a size bounded by the partitions, not the files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError


@dataclass(frozen=True)
class PartitionStats:
    files: int
    bytes: int
    rows: int | None = None
    """Unknown (None) when the tasks did not count rows per partition."""

    def to_json(self) -> dict[str, int]:
        counts = {"files": self.files, "bytes": self.bytes}
        if self.rows is not None:
            counts["rows"] = self.rows
        return counts


def read_partition_stats(value: object, source: str) -> dict[str, PartitionStats] | None:
    """The record's `partitionStats`; anything but objects of counts is refused naming `source`."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidCommitDataError(f"{source}: field 'partitionStats' is not an object")
    return {str(name): _stats(counts, f"{source} partitionStats {name!r}") for name, counts in value.items()}


def _stats(counts: Any, where: str) -> PartitionStats:
    if (
        not isinstance(counts, dict)
        or not all(_is_count(counts.get(name)) for name in ("files", "bytes"))
        or not (counts.get("rows") is None or _is_count(counts["rows"]))
    ):
        raise InvalidCommitDataError(f"{where}: expected counts of files, bytes (and rows)")
    return PartitionStats(counts["files"], counts["bytes"], counts.get("rows"))


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
