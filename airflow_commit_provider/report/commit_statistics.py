"""What a job's committer counted, timed and noted, as a commit report shows it.

Hadoop's committers leave no records of ours, so their `_SUCCESS` is all a report has of them:
its `iostatistics` time each stage of the job commit (``job_stage_rename_files``...) and each
store request (``op_rename``, ``object_list_request``...), and its `diagnostics` name the
committer's settings, or the exception a failed job met. Ours carry the same in the job record.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_commit_provider.core.formats.success import SuccessData
from airflow_commit_provider.core.iostats import TimedOperation

__all__ = ["CommitStatistics", "commit_statistics"]


@dataclass(frozen=True)
class CommitStatistics:
    """What the job's committer counted and timed (its `iostatistics`) and noted (`diagnostics`)."""

    timed: tuple[TimedOperation, ...]
    """Durations of the commit's stages and requests (e.g. ``job_stage_rename_files``, ``op_rename``)."""
    counters: tuple[tuple[str, int], ...]
    """The counters of what was not timed, those that counted anything."""
    gauges: tuple[tuple[str, int], ...]
    diagnostics: tuple[tuple[str, str], ...]


def commit_statistics(data: SuccessData) -> CommitStatistics | None:
    """The statistics section of a report, or None when the committer recorded none."""
    stats = data.iostatistics
    timed = stats.timed_operations()
    untimed = {op.name for op in timed} | {f"{op.name}.failures" for op in timed}
    counters = tuple((name, n) for name, n in sorted(stats.counters.items()) if n and name not in untimed)
    gauges = tuple(sorted(stats.gauges.items()))
    diagnostics = tuple((str(key), str(value)) for key, value in sorted(data.diagnostics.items()))
    if not (timed or counters or gauges or diagnostics):
        return None
    return CommitStatistics(tuple(timed), counters, gauges, diagnostics)
