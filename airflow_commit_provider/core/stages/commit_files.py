"""Making committed entries visible: complete uploads or rename files, in parallel, resumably.

Each action is idempotent: if a previous, interrupted job commit already made an entry visible
(the upload is gone or the source was moved, and the destination has the expected size), it
counts as recovered rather than failing, so committing the same job again finishes it.
"""

from __future__ import annotations

from typing import Protocol

from airflow_commit_provider.core.commit_operations import UploadGoneError, UploadToComplete
from airflow_commit_provider.core.parallel import ProgressCallback, run_parallel
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool
from airflow_commit_provider.core.stages.errors import CommitError
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError


class EntryAction(Protocol):
    """Makes one committed entry visible (a Protocol, not a Callable alias, for the reason given at
    `manifests.ManifestDecoder`: committers hold one as a class attribute)."""

    def __call__(self, ctx: JobContext, entry: CommitEntry, /) -> None: ...


class CompleteUploads:
    """Makes every entry visible by completing its pending upload: one batch through the store's
    commit operations (`ctx.operations`), which overlap the requests as the store allows and
    count an upload an earlier commit already completed as recovered."""

    def commit_all(self, ctx: JobContext, spool: EntrySpool, report: ProgressCallback) -> int:
        outcome = ctx.operations.complete_uploads(
            (_to_complete(entry) for entry in spool), total=spool.count, progress=report
        )
        ctx.statistics.increment("committer_files_committed", outcome.completed + outcome.recovered)
        ctx.statistics.increment("committer_bytes_committed", outcome.completed_bytes)
        try:
            outcome.checked()
        except UploadGoneError as error:
            raise CommitError(f"job {ctx.job_id}: {error}") from error
        return outcome.completed + outcome.recovered


complete_uploads = CompleteUploads()


def _to_complete(entry: CommitEntry) -> UploadToComplete:
    assert entry.upload_id is not None
    return UploadToComplete(StorePath.from_uri(entry.dest), entry.upload_id, entry.etags, entry.size)


def rename_entry(ctx: JobContext, entry: CommitEntry) -> None:
    dest = StorePath.from_uri(entry.dest)
    assert entry.source is not None
    try:
        with ctx.statistics.timed("commit_file_rename"):
            ctx.store.rename_file(StorePath.from_uri(entry.source), dest)
    except FileNotFoundInStoreError:
        recover_entry(ctx, entry, dest, f"source {entry.source}")


def recover_entry(ctx: JobContext, entry: CommitEntry, dest: StorePath, what: str) -> None:
    """Count `entry` as made visible by an earlier commit if `dest` holds its bytes; else a
    CommitError saying `what` is gone."""
    status = ctx.store.get_status(dest)
    if status is None or status.size != entry.size:
        raise CommitError(
            f"job {ctx.job_id}: cannot commit {dest}: {what} is gone and the destination "
            f"{'is missing' if status is None else f'has {status.size} bytes, not {entry.size}'}"
        )
    ctx.statistics.increment("commit_file_recovered")


def commit_entries(ctx: JobContext, spool: EntrySpool, action: EntryAction | CompleteUploads) -> int:
    def report(done: int, total: int) -> None:
        log.info("job %s: committed %d/%d files", ctx.job_id, done, total)
        if ctx.progress:
            ctx.progress(done, total)

    if isinstance(action, CompleteUploads):
        return action.commit_all(ctx, spool, report)

    def commit(entry: CommitEntry) -> None:
        action(ctx, entry)
        ctx.statistics.increment("committer_files_committed")
        ctx.statistics.increment("committer_bytes_committed", entry.size)

    return run_parallel(spool, commit, ctx.options.threads, total=spool.count, progress=report)
