"""Making committed entries visible: complete uploads or rename files, in parallel, resumably.

Each action is idempotent: if a previous, interrupted job commit already made an entry visible
(the upload is gone or the source was moved, and the destination has the expected size), it
counts as recovered rather than failing, so committing the same job again finishes it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from airflow_commit_provider.core.parallel import run_parallel, run_pipelined
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool
from airflow_commit_provider.core.stages.errors import CommitError
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, NoSuchUploadError


class EntryAction(Protocol):
    """Makes one committed entry visible (a Protocol, not a Callable alias, for the reason given at
    `manifests.ManifestDecoder`: committers hold one as a class attribute)."""

    def __call__(self, ctx: JobContext, entry: CommitEntry, /) -> None: ...


@dataclass(frozen=True)
class PipelinedAction:
    """An entry action in two halves, so a store that overlaps requests needs no thread per entry:
    `start` sends the request, `finish` reads its outcome (and recovers, as the action would)."""

    start: Callable[[JobContext, CommitEntry], Future[object]]
    finish: Callable[[JobContext, CommitEntry, Future[object]], None]

    def __call__(self, ctx: JobContext, entry: CommitEntry) -> None:
        self.finish(ctx, entry, self.start(ctx, entry))


def _start_completion(ctx: JobContext, entry: CommitEntry) -> Future[object]:
    assert entry.upload_id is not None
    request = ctx.store.start_complete_multipart_upload(
        StorePath.from_uri(entry.dest), entry.upload_id, list(entry.etags)
    )
    return ctx.statistics.timed_future("committer_materialize_file", request)


def _finish_completion(ctx: JobContext, entry: CommitEntry, completion: Future[object]) -> None:
    try:
        completion.result()
    except NoSuchUploadError:
        _recover(ctx, entry, StorePath.from_uri(entry.dest), f"upload {entry.upload_id}")


complete_upload = PipelinedAction(_start_completion, _finish_completion)


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

    if isinstance(action, PipelinedAction) and ctx.store.pipelines_requests:

        def finish(entry: CommitEntry, request: Future[object]) -> None:
            action.finish(ctx, entry, request)
            ctx.statistics.increment("committer_files_committed")
            ctx.statistics.increment("committer_bytes_committed", entry.size)

        start = functools.partial(action.start, ctx)
        return run_pipelined(spool, start, finish, ctx.options.threads, total=spool.count, progress=report)
    return run_parallel(spool, commit, ctx.options.threads, total=spool.count, progress=report)
