"""Job abort and cleanup: nothing of the job may remain, and nothing outside it is touched."""

from __future__ import annotations

from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.uploads import abort_uncommitted_uploads


def cleanup_job(ctx: JobContext, committed_attempts: set[str]) -> None:
    """Abort the job's uncommitted uploads, then delete its directory, marker first.

    Deleting the marker first makes any task attempt still committing discard its output.
    """
    if ctx.store.capabilities.multipart_upload:
        abort_uncommitted_uploads(ctx, committed_attempts)
    ctx.store.delete(ctx.layout.job_marker)
    deleted = ctx.store.delete_tree(ctx.layout.job_dir)
    log.info("job %s: cleaned up %s (%d files)", ctx.job_id, ctx.layout.job_dir, deleted)
