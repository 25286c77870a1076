"""Making committed entries visible: complete uploads or rename files, in parallel, resumably.

Each action is idempotent: if a previous, interrupted job commit already made an entry visible
(the upload is gone or the source was moved, and the destination has the expected size), it
counts as recovered rather than failing, so committing the same job again finishes it.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_commit_provider.core.parallel import run_parallel
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool
from airflow_commit_provider.core.stages.errors import CommitError
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, NoSuchUploadError

EntryAction = Callable[[JobContext, CommitEntry], None]


def complete_upload(ctx: JobContext, entry: CommitEntry) -> None:
    dest = StorePath.from_uri(entry.dest)
    assert entry.upload_id is not None
    try:
        with ctx.statistics.timed("committer_materialize_file"):
            ctx.store.complete_multipart_upload(dest, entry.upload_id, list(entry.etags))
    except NoSuchUploadError:
        _recover(ctx, entry, dest, f"upload {entry.upload_id}")


def rename_entry(ctx: JobContext, entry: CommitEntry) -> None:
    dest = StorePath.from_uri(entry.dest)
    assert entry.source is not None
    try:
        with ctx.statistics.timed("commit_file_rename"):
            ctx.store.rename_file(StorePath.from_uri(entry.source), dest)
    except FileNotFoundInStoreError:
        _recover(ctx, entry, dest, f"source {entry.source}")


def _recover(ctx: JobContext, entry: CommitEntry, dest: StorePath, what: str) -> None:
    status = ctx.store.get_status(dest)
    if status is None or status.size != entry.size:
        raise CommitError(
            f"job {ctx.job_id}: cannot commit {dest}: {what} is gone and the destination "
            f"{'is missing' if status is None else f'has {status.size} bytes, not {entry.size}'}"
        )
    ctx.statistics.increment("commit_file_recovered")


def commit_entries(ctx: JobContext, spool: EntrySpool, action: EntryAction) -> int:
    def commit(entry: CommitEntry) -> None:
        action(ctx, entry)
        ctx.statistics.increment("committer_files_committed")
        ctx.statistics.increment("committer_bytes_committed", entry.size)

    def report(done: int, total: int) -> None:
        log.info("job %s: committed %d/%d files", ctx.job_id, done, total)
        if ctx.progress:
            ctx.progress(done, total)

    return run_parallel(spool, commit, ctx.options.threads, total=spool.count, progress=report)
