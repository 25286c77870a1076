"""``replace`` on a rename store (local files, HDFS): each partition the job writes is swapped whole.

Spark's own commit protocol with ``dynamicPartitionOverwrite`` stages a job's files under
``.spark-staging-<job>``, then at job commit deletes each written partition and renames the staged
one into place: a crash in between loses the old partition and leaves the new one unpublished.
Here the same swap starts from the commit point and is rolled forward by whoever finds the job
there (the driver, an abort, a later try: `Committer.commit_job`), each step recognising what a
previous run already did:

1. Job commit renames each committed file into the job's incoming tree
   (`JobLayout.incoming_partition`) instead of the destination: nothing is visible yet, and the
   commit point (the outcome) has named the job's files and so its partitions (`stages.lists`).
2. Each written partition is swapped (`swap_partition`): what the old folder holds besides its
   visible files (hidden ``_``/``.`` files, such as another job's ``_SUCCESS`` or work, and
   sub-folders) is moved into the incoming folder; then the incoming folder takes the partition's
   place, and the old one goes. A partition that did not exist is simply renamed in.

What a reader of the partition sees while it is swapped:

- where the store exchanges two folders in one call (`Store.exchange_directories`: Linux's
  ``renameat2`` with ``RENAME_EXCHANGE`` on a local filesystem that takes it), the old partition
  whole, then the new one whole: no moment without it;
- elsewhere (HDFS, whose rename refuses a non-empty destination folder), two renames: the old
  folder is put aside (`JobLayout.replaced_partition`), then the incoming one is renamed in. Between
  the two calls, one store request wide, the partition is absent: a listing finds no folder, a
  reader that listed before finds its files gone. It never sees old and new files mixed.

A file read that is under way when its folder is moved or deleted follows the store's own rules (on
Linux an open file stays readable; on HDFS a reader may fail on a block of a deleted file).

Nothing outside the written partitions is touched. What a store keeps for a write in flight in the
old folder itself (the local store's ``.__uploads__``, HDFS's ``.__publishing__``) is not moved: a
write into a partition while it is replaced fails, and its job with it.
"""

from __future__ import annotations

from collections.abc import Iterator

from airflow_commit_provider.core.parallel import run_parallel
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages import commit_files
from airflow_commit_provider.core.stages.context import JobContext, log
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool
from airflow_commit_provider.core.stages.errors import CommitError
from airflow_commit_provider.core.stages.partitions import partition_name, walk_partitions
from airflow_commit_provider.core.store.base import FileAlreadyExistsError, FileNotFoundInStoreError, Store

#: The store capability a swap needs (`StoreCapabilities.atomic_directory_rename`).
CAPABILITY = "atomic_directory_rename"
#: The first characters of the names Spark's readers skip, and so a swap keeps.
HIDDEN = ("_", ".")


def incoming_path(ctx: JobContext, dest: StorePath) -> StorePath:
    """Where a file committed for `dest` waits in the incoming tree until its partition is swapped."""
    partition, _slash, name = dest.relative_to(ctx.layout.destination).rpartition("/")
    return ctx.layout.incoming_partition(partition).join(name)


def stage_entry(ctx: JobContext, entry: CommitEntry) -> None:
    """Rename one committed file into the incoming tree: the entry action of ``replace``. A source
    already gone counts as recovered when the file is in the incoming tree, or in the destination
    once its partition was swapped in."""
    dest = StorePath.from_uri(entry.dest)
    staged = incoming_path(ctx, dest)
    assert entry.source is not None
    try:
        with ctx.statistics.timed("commit_file_rename"):
            ctx.store.rename_file(StorePath.from_uri(entry.source), staged)
    except FileNotFoundInStoreError:
        status = ctx.store.get_status(staged)
        found = staged if status is not None and status.size == entry.size else dest
        commit_files.recover_entry(ctx, entry, found, f"source {entry.source}")


class _Partition:
    """A partition directory as the walk closes it: its name, nothing per file."""

    def __init__(self, prefix: bytes) -> None:
        self.name = partition_name(prefix)

    def add(self, key: bytes, entry: CommitEntry) -> tuple[()]:
        return ()

    def close(self) -> tuple[str]:
        return (self.name,)


def written_partitions(spool: EntrySpool) -> Iterator[str]:
    """The partition directories the job writes into, as the walk leaves them (a partition after
    those inside it); ``""`` for files directly in the destination."""
    return walk_partitions(spool.keyed(), lambda prefix, _key: _Partition(prefix))


def check_swappable(ctx: JobContext, spool: EntrySpool) -> None:
    """Refuse, before the commit point, a job whose partitions cannot be swapped as folders: one
    with files directly in the destination (the job's own folders are there), or one that writes
    into a partition and into another inside it. One pass, holding the previous partition only."""
    previous = None
    for name in written_partitions(spool):
        if not name:
            raise CommitError(
                f"job {ctx.job_id}: conflict_mode='replace' with the {ctx.committer} committer swaps "
                f"partition folders, but it writes files directly into {ctx.layout.destination}: "
                "write partitioned output (partition_by)"
            )
        if previous is not None and previous.startswith(f"{name}/"):
            raise CommitError(
                f"job {ctx.job_id}: conflict_mode='replace' with the {ctx.committer} committer swaps "
                f"partition folders, but it writes into both {name} and {previous} inside it"
            )
        previous = name


def swap_partitions(ctx: JobContext, spool: EntrySpool) -> int:
    """Swap every partition the job writes (`swap_partition`) on the job's threads; idempotent."""
    swapped = run_parallel(
        written_partitions(spool), lambda name: swap_partition(ctx, name), ctx.options.threads
    )
    ctx.statistics.increment("committer_partitions_swapped", swapped)
    log.info("job %s: swapped %d partitions into %s", ctx.job_id, swapped, ctx.layout.destination)
    return swapped


def swap_marker(ctx: JobContext) -> str:
    """A hidden, empty file the incoming folder carries when it may be exchanged: found in the
    destination's partition, it says the folders were exchanged, so the incoming path now holds the
    replaced partition (a roll-forward cannot tell them apart otherwise)."""
    return f".swapped-in-{ctx.job_id}"


def swap_partition(ctx: JobContext, partition: str) -> None:
    """Swap the incoming folder of `partition` into the destination; safe to repeat at any step."""
    store, layout = ctx.store, ctx.layout
    incoming = layout.incoming_partition(partition)
    dest = layout.destination.join(partition)
    marker = swap_marker(ctx)
    exchanging = store.capabilities.atomic_directory_exchange
    if not store.directory_exists(incoming):  # swapped in by an earlier run
        replaced = layout.replaced_partition(partition)
    elif exchanging and store.get_status(dest.join(marker)) is not None:
        replaced = incoming  # exchanged by an earlier run: the incoming path holds the old partition
    else:
        replaced = _swap_in(ctx, incoming, dest, layout.replaced_partition(partition), marker)
    if store.directory_exists(replaced):
        _move_kept(store, replaced, dest, kept=HIDDEN)
        store.delete_tree(replaced)
    if exchanging:
        store.delete(dest.join(marker))


def _swap_in(
    ctx: JobContext, incoming: StorePath, dest: StorePath, aside: StorePath, marker: str
) -> StorePath:
    """Put the incoming folder at `dest`; returns where the replaced partition now is."""
    store = ctx.store
    if store.directory_exists(aside):  # an earlier run put the partition aside, then stopped
        _move_kept(store, aside, incoming, kept=HIDDEN)
        store.delete_tree(aside)
    if store.directory_exists(dest):
        _move_kept(store, dest, incoming, kept=HIDDEN)
        if store.capabilities.atomic_directory_exchange:
            store.write_bytes(incoming.join(marker), b"")
            if store.exchange_directories(incoming, dest):
                return incoming
        store.rename_directory(dest, aside)  # the partition is absent from here...
    store.rename_directory(incoming, dest)  # ...to here
    return aside


def _move_kept(store: Store, source: StorePath, target: StorePath, *, kept: tuple[str, ...]) -> None:
    """Move from the folder `source` into `target` its sub-folders and its files whose names start
    with one of `kept` (every file when `kept` is ``("",)``); a sub-folder both hold is merged."""
    for name in store.list_child_dirs(source):
        try:
            store.rename_directory(source.join(name), target.join(name))
        except FileAlreadyExistsError:
            _move_kept(store, source.join(name), target.join(name), kept=("",))
    for status in store.list_files(source):
        if status.path.parent == source and status.path.name.startswith(kept):
            store.rename_file(status.path, target.join(status.path.name))
