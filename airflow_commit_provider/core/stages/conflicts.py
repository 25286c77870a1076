"""Conflict modes of the staging committers: fail, append, replace.

`directory` resolves conflicts over the whole destination; `partitioned` only within the
partitions the job writes, so `replace` overwrites a daily job's own `dt=...` and nothing else.
Only visible output counts: hidden `_`/`.` paths (other jobs' work, `_SUCCESS`) are never touched.

A scope's listing is merged with the job's sorted entries (`core.sorted_spool`), so finding the
files the job does not itself commit holds nothing per file, and neither does deleting them.

Per partition, a job of few partitions lists each one (one LIST each); from
`PARENT_LISTING_PARTITIONS` on, it lists their common parent once and keeps the files directly in
a partition it writes, as those LISTs would have found them: at 10,000 partitions one LIST each
took 112 s, one listing of their day (20 pages) 10 s (bench/partitions.py, embedded S3). A parent
holding much more than the partitions (a wide table the job writes a few days of) is given up on
once its listing has cost what the LISTs would have (`PARENT_LISTING_KEYS_PER_PARTITION`), and the
partitions are listed after all.
"""

from __future__ import annotations

from collections.abc import Iterator

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import (
    SortedSpool,
    join_sorted,
    key_order,
    record_size,
    spooled,
)
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool
from airflow_commit_provider.core.stages.errors import OutputConflictError
from airflow_commit_provider.core.stages.partitions import partition_name, walk_partitions
from airflow_commit_provider.core.store.base import FileStatus

#: From how many partitions written a job lists their common parent once instead of each
#: partition: below it the LISTs cost little (3-11 ms each on the embedded S3, bench/partitions.py),
#: and a parent that may hold a whole table is not worth the risk.
PARENT_LISTING_PARTITIONS = 100
#: Keys the parent listing may list per partition written (besides the job's own files) before it
#: is given up for one LIST per partition: a LIST of one partition costs about as much as 20 keys
#: of a long listing (pages of 1,000) on the embedded S3 (bench/partitions.py measures the ratio:
#: 21 and 22 keys at 1,000 and 10,000 partitions). So the parent listing costs at most about what
#: the LISTs would, before they are made.
PARENT_LISTING_KEYS_PER_PARTITION = 20


def visible_files(ctx: JobContext, destination: StorePath) -> Iterator[FileStatus]:
    """Output files under `destination`, skipping hidden paths the way Spark's readers do."""
    for status in ctx.store.list_files(destination):
        relative = status.path.relative_to(destination)
        if not any(part.startswith(("_", ".")) for part in relative.split("/")):
            yield status


def existing_output(ctx: JobContext, spool: EntrySpool, per_partition: bool) -> Iterator[FileStatus]:
    """Visible files in the job's conflict scope that this job is not itself committing.

    Per partition, a scope is a leaf directory the job writes into, and only its direct files count.
    """
    if not per_partition:
        with _sorted_listing(ctx, ctx.layout.destination, direct_only=False) as listed:
            for record in _not_written(spool, listed):
                yield _status(ctx, record)
        return
    with _WrittenPartitions(spool) as written:
        parent = _parent_listing(ctx, spool, written) if written.count >= PARENT_LISTING_PARTITIONS else None
        if parent is not None:
            with parent:
                for record in written.holding(_not_written(spool, parent)):
                    yield _status(ctx, record)
            return
    yield from walk_partitions(spool.keyed(), lambda prefix, _key: _ScopeMerge(ctx, prefix))


Listed = tuple[bytes, str, int, float]
"""A listed file: (its key order relative to the destination, key, size, modified)."""


def _not_written(spool: EntrySpool, listed: SortedSpool) -> Iterator[Listed]:
    """The listed files that no entry of the job names."""
    for entry, found in join_sorted(spool.keyed(), listed):
        if entry is None and found is not None:
            yield found


def _directory(key: bytes) -> bytes:
    """The key prefix of the directory holding `key` (``b""`` at the top, else ``dt=1/``)."""
    return key[: key.rfind(b"/") + 1]


class _WrittenPartitions:
    """The partition directories a job writes into, as sorted key prefixes on local disk, and the
    prefix of their common parent."""

    def __init__(self, spool: EntrySpool) -> None:
        self._prefixes = SortedSpool(prefix="commit-conflict-partitions-")
        first = last = b""
        previous: bytes | None = None
        for key in spool.key_orders():
            prefix = _directory(key)
            if prefix != previous:  # a partition's files are mostly adjacent; the sort drops the rest
                self._prefixes.add((prefix,), record_size((prefix,)))
                previous = prefix
            first = first or key
            last = key
        self._prefixes.sort(lambda kept, _same: kept)
        # Every key between the first and the last in key order shares their common prefix.
        common = 0
        while common < min(len(first), len(last)) and first[common] == last[common]:
            common += 1
        self.parent = _directory(first[:common])

    @property
    def count(self) -> int:
        return self._prefixes.count

    def holding(self, files: Iterator[Listed]) -> Iterator[Listed]:
        """Those of `files` that lie directly in a partition written: sorted by their directory
        through a spool, then merged with the partitions."""
        with spooled(
            (((_directory(file[0]), file[0]), *file[1:]) for file in files),
            prefix="commit-conflicts-by-directory-",
        ) as by_directory:
            partitions = iter(self._prefixes)
            partition = next(partitions, None)
            for (directory, key), *rest in by_directory:
                while partition is not None and partition[0] < directory:
                    partition = next(partitions, None)
                if partition is None:
                    return
                if partition[0] == directory:
                    yield (key, *rest)

    def close(self) -> None:
        self._prefixes.close()

    def __enter__(self) -> _WrittenPartitions:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class _OverBudget(Exception):
    """The parent listing went past what one LIST per partition would cost."""


def _parent_listing(ctx: JobContext, spool: EntrySpool, written: _WrittenPartitions) -> SortedSpool | None:
    """The visible files of the written partitions' common parent (hidden by their name, as a
    partition's LIST sees them), sorted; None once it lists more than the job's own files and
    `PARENT_LISTING_KEYS_PER_PARTITION` keys per partition."""
    root = ctx.layout.destination
    parent = root.join(partition_name(written.parent)) if written.parent else root
    budget = spool.count + PARENT_LISTING_KEYS_PER_PARTITION * written.count
    listed = 0

    def files() -> Iterator[Listed]:
        nonlocal listed
        for status in ctx.store.list_files(parent):
            listed += 1
            if listed > budget:
                raise _OverBudget
            if not status.path.name.startswith(("_", ".")):
                yield (
                    key_order(status.path.relative_to(root)),
                    status.path.key,
                    status.size,
                    status.modified,
                )

    try:
        return spooled(files(), prefix="commit-conflicts-")
    except _OverBudget:
        log.info(
            "job %s: %s holds more than %d files: listing the %d partitions written one by one",
            ctx.job_id,
            parent,
            budget,
            written.count,
        )
        return None


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


def _status(ctx: JobContext, record: Listed) -> FileStatus:
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
