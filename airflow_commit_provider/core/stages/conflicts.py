"""Conflict modes of the staging committers: fail, append, replace.

`directory` resolves conflicts over the whole destination; `partitioned` only within the
partitions the job writes, so `replace` overwrites a daily job's own `dt=...` and nothing else.
Only visible output counts: hidden `_`/`.` paths (other jobs' work, `_SUCCESS`) are never touched.

A scope's listing is merged with the job's sorted entries (`core.sorted_spool`), so finding the
files the job does not itself commit holds nothing per file, and neither does deleting them.
"""

from __future__ import annotations

from collections.abc import Iterator

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import SortedSpool, join_sorted, key_order, spooled
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool
from airflow_commit_provider.core.stages.errors import OutputConflictError
from airflow_commit_provider.core.stages.partitions import partition_name, walk_partitions
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
    if not per_partition:
        with _sorted_listing(ctx, ctx.layout.destination, direct_only=False) as listed:
            for entry, found in join_sorted(spool.keyed(), listed):
                if entry is None and found is not None:
                    yield _status(ctx, found)
        return
    yield from walk_partitions(spool.keyed(), lambda prefix, _key: _ScopeMerge(ctx, prefix))


class _ScopeMerge:
    """One partition's direct files merged with the job's entries there, as the walk visits them:
    yields the listed files no entry names."""

    def __init__(self, ctx: JobContext, prefix: bytes) -> None:
        self._ctx = ctx
        partition = partition_name(prefix)
        root = ctx.layout.destination
        self._listed = _sorted_listing(ctx, root.join(partition) if partition else root, direct_only=True)
        self._records = iter(self._listed)
        self._next = next(self._records, None)

    def add(self, key: bytes, entry: CommitEntry) -> Iterator[FileStatus]:
        while self._next is not None and self._next[0] < key:
            yield _status(self._ctx, self._next)
            self._next = next(self._records, None)
        if self._next is not None and self._next[0] == key:
            self._next = next(self._records, None)

    def close(self) -> Iterator[FileStatus]:
        try:
            while self._next is not None:
                yield _status(self._ctx, self._next)
                self._next = next(self._records, None)
        finally:
            self._listed.close()


def _sorted_listing(ctx: JobContext, scope: StorePath, *, direct_only: bool) -> SortedSpool:
    """The visible files of `scope` (its direct ones only, if asked) as records
    `(key order relative to the destination, key, size, modified)`, sorted."""
    root = ctx.layout.destination
    return spooled(
        (
            (key_order(status.path.relative_to(root)), status.path.key, status.size, status.modified)
            for status in visible_files(ctx, scope)
            if not direct_only or status.path.parent == scope
        ),
        prefix="commit-conflicts-",
    )


def _status(ctx: JobContext, record: tuple[bytes, str, int, float]) -> FileStatus:
    root = ctx.layout.destination
    return FileStatus(StorePath(root.scheme, root.bucket, record[1]), record[2], record[3])


def fail_on_existing_output(ctx: JobContext, spool: EntrySpool, per_partition: bool) -> None:
    for status in existing_output(ctx, spool, per_partition):
        scope = "a partition it writes" if per_partition else "the destination"
        raise OutputConflictError(
            f"job {ctx.job_id}: conflict_mode='fail' but {scope} already holds {status.path}"
        )


def delete_replaced_output(ctx: JobContext, spool: EntrySpool, per_partition: bool) -> int:
    """Delete existing output in scope that this job did not just write (streamed to the store's
    batched delete); safe to repeat on resume."""
    stale = 0

    def found() -> Iterator[StorePath]:
        nonlocal stale
        for status in existing_output(ctx, spool, per_partition):
            stale += 1
            yield status.path

    ctx.store.delete_files(found())
    ctx.statistics.increment("committer_files_replaced", stale)
    if stale:
        log.info("job %s: replaced %d existing files", ctx.job_id, stale)
    return stale
