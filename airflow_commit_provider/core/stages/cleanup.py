"""Job abort and cleanup: nothing of the job may remain, and nothing outside it is touched."""

from __future__ import annotations

from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.uploads import abort_uncommitted_uploads


def cleanup_job(ctx: JobContext, committed_attempts: set[str], *, job_committed: bool = False) -> None:
    """End the job (`end_job`), then remove what it left (`remove_job_files`)."""
    end_job(ctx)
    remove_job_files(ctx, committed_attempts, job_committed=job_committed)


def discard_job(ctx: JobContext) -> None:
    """Clean up a job that did not commit (never decided, or aborted): its work, then its lists
    (`stages.lists`), which only a commit would name. The outcome stays: an abort fences the job."""
    cleanup_job(ctx, committed_attempts=set())
    deleted = ctx.store.delete_tree(ctx.layout.lists_dir)
    if deleted:
        log.info("job %s: deleted its lists (%d files) in %s", ctx.job_id, deleted, ctx.layout.lists_dir)


def end_job(ctx: JobContext) -> None:
    """Delete the job marker: from then on a task attempt still committing sees the job is over and
    discards its own output (and takes back any note of its end), so what the job directory holds
    no longer grows."""
    ctx.store.delete(ctx.layout.job_marker)


def remove_job_files(ctx: JobContext, committed_attempts: set[str], *, job_committed: bool = False) -> None:
    """Abort the job's uncommitted uploads, then delete its directory; the job has ended (`end_job`).

    `job_committed`: the job's record is written, so every upload it committed is complete and any
    other upload of `committed_attempts` still pending was left out of its manifest.

    The marker went first: an attempt that got its commit in before that recorded its uploads
    before that too, so the listing of records that follows finds them; the other way round, an
    attempt committing between the listing and the marker's deletion would leave its uploads pending.
    """
    if ctx.store.capabilities.multipart_upload:
        abort_uncommitted_uploads(ctx, committed_attempts, job_committed=job_committed)
    deleted = ctx.store.delete_tree(ctx.layout.job_dir)
    log.info("job %s: cleaned up %s (%d files)", ctx.job_id, ctx.layout.job_dir, deleted)
