"""Conflict modes of the staging committers: fail, append, replace.

`directory` resolves conflicts over the whole destination; `partitioned` only within the
partitions the job writes, so `replace` overwrites a daily job's own `dt=...` and nothing else.
Only visible output counts: hidden `_`/`.` paths (other jobs' work, `_SUCCESS`) are never touched.
"""

from __future__ import annotations

from collections.abc import Iterator

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.entries import EntrySpool
from airflow_commit_provider.core.stages.errors import OutputConflictError
from airflow_commit_provider.core.store.base import FileStatus


def visible_files(ctx: JobContext, directory: StorePath) -> Iterator[FileStatus]:
    """Output files under `directory`, skipping hidden paths the way Spark's readers do."""
    for status in ctx.store.list_files(directory):
        relative = status.path.relative_to(directory)
        if not any(part.startswith(("_", ".")) for part in relative.split("/")):
            yield status


def existing_output(ctx: JobContext, spool: EntrySpool, per_partition: bool) -> Iterator[FileStatus]:
    """Visible files in the job's conflict scope that this job is not itself committing.

    Per partition, a scope is a leaf directory the job writes into, and only its direct files count.
    """
    root = ctx.layout.destination
    if per_partition:
        scopes = [(root.join(partition) if partition else root) for partition in sorted(spool.partitions)]
    else:
        scopes = [root]
    for scope in scopes:
        for status in visible_files(ctx, scope):
            if per_partition and status.path.parent != scope:
                continue
            if not spool.has_destination(status.path.uri()):
                yield status


def fail_on_existing_output(ctx: JobContext, spool: EntrySpool, per_partition: bool) -> None:
    for status in existing_output(ctx, spool, per_partition):
        scope = "a partition it writes" if per_partition else "the destination"
        raise OutputConflictError(
            f"job {ctx.job_id}: conflict_mode='fail' but {scope} already holds {status.path}"
        )


def delete_replaced_output(ctx: JobContext, spool: EntrySpool, per_partition: bool) -> int:
    """Delete existing output in scope that this job did not just write; safe to repeat on resume."""
    stale = [status.path for status in existing_output(ctx, spool, per_partition)]
    ctx.store.delete_files(stale)
    ctx.statistics.increment("committer_files_replaced", len(stale))
    if stale:
        log.info("job %s: replaced %d existing files", ctx.job_id, len(stale))
    return len(stale)
