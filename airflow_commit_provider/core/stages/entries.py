"""Commit entries, and the sorted spool that keeps job commit's memory bounded (HADOOP-16570).

Job commit holds nothing per file: the entries of all committed tasks go to a local spool sorted by
destination key (`core.sorted_spool`), in the order S3 lists keys (UTF-8 bytes). Two entries with
one destination are then adjacent, and the checks that would otherwise keep a set per file (sources
present, conflicts) merge the spool with a store listing instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.sorted_spool import RUN_BYTES, Record, SortedSpool, key_order, record_size


@dataclass(frozen=True)
class CommitEntry:
    """One file to make visible at job commit: by rename (`source`) or by completing an upload."""

    dest: str
    size: int
    task_id: str
    source: str | None = None
    upload_id: str | None = None
    etags: tuple[str, ...] = ()


class EntrySpool:
    """The entries of all committed tasks, sorted by destination key (see the module docstring).

    Each record is `(relative key order, dest, size, task_id, source, upload_id, etags)`: the
    destination's key relative to the job's destination, as `key_order` bytes, first.
    """

    def __init__(self, destination: StorePath, *, run_bytes: int = RUN_BYTES) -> None:
        self.destination = destination
        self.total_bytes = 0
        self.uploads = 0
        """How many entries complete an upload (the others rename a file)."""
        self._spool = SortedSpool(run_bytes=run_bytes, prefix="commit-entries-")

    @property
    def count(self) -> int:
        return self._spool.count

    def append(self, entry: CommitEntry, dest: StorePath) -> None:
        """Add `entry`, whose destination `dest` (its `dest` parsed) lies under the destination."""
        record = (
            key_order(dest.relative_to(self.destination)),
            entry.dest,
            entry.size,
            entry.task_id,
            entry.source,
            entry.upload_id,
            entry.etags,
        )
        self._spool.add(record, record_size(record))
        self.total_bytes += entry.size
        self.uploads += entry.upload_id is not None

    def sort(self, duplicate: Callable[[CommitEntry, CommitEntry], Exception]) -> None:
        """Sort the entries; two with one destination are adjacent then, and `duplicate(first,
        second)` is raised for them."""

        def refuse(first: Record, second: Record) -> Record:
            raise duplicate(CommitEntry(*first[1:]), CommitEntry(*second[1:]))

        self._spool.sort(refuse)

    def __iter__(self) -> Iterator[CommitEntry]:
        for record in self._spool:
            yield CommitEntry(*record[1:])

    def keyed(self) -> Iterator[tuple[bytes, CommitEntry]]:
        """(relative key order, entry) in destination key order."""
        for record in self._spool:
            yield record[0], CommitEntry(*record[1:])

    def close(self) -> None:
        self._spool.close()

    def __enter__(self) -> EntrySpool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
