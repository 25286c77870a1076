"""The partitions a job writes, from one pass over its sorted entries, holding only the current path.

Sorted by key, the entries are a depth-first walk of the destination's directories: a directory's
files are all the keys that start with its prefix, so once the walk passes a key outside a
partition it never comes back to it, and the partition is done. The walk keeps a stack of the
partitions along the current path (bounded by the path's depth, not by the partitions written),
opens one at its first file and closes it as the walk leaves its prefix. A visitor per partition
sees its files in key order: tallies for the partition markers and stats, a merge with the
partition's listing for conflicts.

Rows per partition come from the tasks' manifests, summed by a spool sorted in directory order and
read alongside the walk (`RowsCursor`), so no per-partition table lives for the whole commit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from airflow_commit_provider.core.formats.partition_stats import PartitionStats
from airflow_commit_provider.core.parallel import run_parallel
from airflow_commit_provider.core.sorted_spool import SortedSpool, key_order, record_size
from airflow_commit_provider.core.stages.entries import CommitEntry, EntrySpool

T = TypeVar("T", covariant=True)


class PartitionVisitor(Protocol[T]):
    """What the walk tells one partition: each of its files in key order, then that it is done.
    Both return what the walk yields meanwhile (nothing, often)."""

    def add(self, key: bytes, entry: CommitEntry) -> Iterable[T]: ...

    def close(self) -> Iterable[T]: ...


def walk_partitions(
    keyed: Iterable[tuple[bytes, CommitEntry]], visit: Callable[[bytes, bytes], PartitionVisitor[T]]
) -> Iterator[T]:
    """Walk entries in key order (`EntrySpool.keyed`), with `visit(prefix, key)` opening a visitor
    for each partition directory that directly holds some of them, at its first file's `key`.
    `prefix` is the key prefix of its files: ``b""`` at the top, else the partition's `key_order`
    and a slash (`partition_name` turns it back). Yields what the visitors yield."""
    stack: list[tuple[bytes, PartitionVisitor[T]]] = []
    for key, entry in keyed:
        while stack and not key.startswith(stack[-1][0]):
            yield from stack.pop()[1].close()
        directory, slash, _name = key.rpartition(b"/")
        prefix = directory + slash
        if not stack or stack[-1][0] != prefix:
            stack.append((prefix, visit(prefix, key)))
        yield from stack[-1][1].add(key, entry)
    while stack:
        yield from stack.pop()[1].close()


def partition_name(prefix: bytes) -> str:
    """The partition directory a key prefix stands for (``dt=1/`` is ``dt=1``, ``b""`` the top)."""
    return prefix[:-1].decode("utf-8", "surrogateescape")


class PartitionRows:
    """The rows each partition directory received, summed over the tasks, in bounded memory.

    Unknown (`counted` False) once a task did not count its rows per partition. The counts are
    spooled by their directory's key prefix, the order the walk opens partitions in.
    """

    def __init__(self) -> None:
        self.counted = True
        self._spool = SortedSpool(prefix="commit-partition-rows-")

    def add_task(self, counts: Mapping[str, int] | None) -> None:
        """Add one task's counts; None (it did not count them) makes every partition's unknown."""
        if counts is None:
            self.counted = False
            self._spool.close()
        if counts is None or not self.counted:
            return
        for partition, rows in counts.items():
            record = (key_order(f"{partition}/") if partition else b"", rows)
            self._spool.add(record, record_size(record))

    def sort(self) -> None:
        self._spool.sort(lambda first, second: (first[0], first[1] + second[1]))

    def cursor(self) -> RowsCursor | None:
        """A reader for one walk; None when the rows are unknown."""
        return RowsCursor(iter(self._spool)) if self.counted else None

    def close(self) -> None:
        self._spool.close()


class RowsCursor:
    """Rows per partition read alongside one walk: asked for a partition as the walk opens it,
    holding only the counts of directories along the current path."""

    def __init__(self, counts: Iterator[tuple[bytes, int]]) -> None:
        self._counts = counts
        self._next = next(counts, None)
        self._held: dict[bytes, int] = {}

    def rows(self, prefix: bytes, key: bytes) -> int:
        """The rows of the partition with `prefix`, opened at its first file `key`."""
        while self._next is not None and self._next[0] <= key:
            self._held[self._next[0]] = self._next[1]
            self._next = next(self._counts, None)
        # Keys only grow, so a directory whose prefix `key` does not start with is behind the walk.
        for held in [held for held in self._held if not key.startswith(held)]:
            del self._held[held]
        return self._held.pop(prefix, 0)


@dataclass
class PartitionTally:
    """What one partition directory received, with its first files (for its marker's `filenames`)."""

    name: str
    rows: int | None
    keep_filenames: int
    files: int = 0
    size: int = 0
    """Bytes."""
    filenames: list[str] = field(default_factory=list)

    def add(self, key: bytes, entry: CommitEntry) -> tuple[()]:
        self.files += 1
        self.size += entry.size
        if len(self.filenames) < self.keep_filenames:
            self.filenames.append(entry.dest)
        return ()

    def close(self) -> tuple[PartitionTally]:
        return (self,)

    @property
    def stats(self) -> PartitionStats:
        return PartitionStats(self.files, self.size, self.rows)


def tally_partitions(
    spool: EntrySpool, rows: PartitionRows | None, keep_filenames: int = 0
) -> Iterator[PartitionTally]:
    """Each partition directory the job writes into (not the top), as the walk leaves it, with
    its first `keep_filenames` files."""
    cursor = rows.cursor() if rows is not None else None

    def visit(prefix: bytes, key: bytes) -> PartitionTally:
        counted = None if cursor is None else cursor.rows(prefix, key)
        return PartitionTally(partition_name(prefix), counted, keep_filenames)

    for tally in walk_partitions(spool.keyed(), visit):
        if tally.name:
            yield tally


def partition_stats(
    spool: EntrySpool,
    rows: PartitionRows | None,
    *,
    keep_filenames: int = 0,
    each: Callable[[PartitionTally], object] | None = None,
    threads: int = 1,
) -> Iterator[tuple[str, PartitionStats]]:
    """What each partition directory received, in the order the walk leaves them, which is the
    partition list's (`file_list.partition_order_key`: as their files' keys list, a partition after
    those inside it).

    `each` is called with each partition as the walk leaves it (with its first `keep_filenames`
    files), on `threads` workers: the partition markers are written that way, while the walk goes
    on. Then the stats are yielded once all are done (a failed `each` raises first).
    """
    if each is None:
        for tally in tally_partitions(spool, rows, keep_filenames):
            yield tally.name, tally.stats
        return
    # The stats wait in a spool while the markers are written, in the walk's order.
    stats = SortedSpool(prefix="commit-partitions-")
    with stats:

        def closed() -> Iterator[PartitionTally]:
            for number, tally in enumerate(tally_partitions(spool, rows, keep_filenames)):
                record = (number, tally.name, tally.files, tally.size, tally.rows)
                stats.add(record, record_size(record))
                yield tally

        run_parallel(closed(), each, threads)
        stats.sort()
        for _number, name, files, size, counted in stats:
            yield name, PartitionStats(files, size, counted)
