"""Commit entries and the local spool that keeps job commit's memory bounded (HADOOP-16570)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CommitEntry:
    """One file to make visible at job commit: by rename (`source`) or by completing an upload."""

    dest: str
    size: int
    task_id: str
    source: str | None = None
    upload_id: str | None = None
    etags: tuple[str, ...] = ()

    def to_line(self) -> str:
        return json.dumps([self.dest, self.size, self.task_id, self.source, self.upload_id, list(self.etags)])

    @classmethod
    def from_line(cls, line: str) -> CommitEntry:
        dest, size, task_id, source, upload_id, etags = json.loads(line)
        return cls(dest, size, task_id, source, upload_id, tuple(etags))


@dataclass
class EntrySpool:
    """Validated entries of all committed tasks, streamed through a local file.

    Memory holds one 8-byte digest per destination, for the duplicate check.
    """

    count: int = 0
    total_bytes: int = 0
    partitions: set[str] = field(default_factory=set)
    _path: str = ""
    _digests: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        fd, self._path = tempfile.mkstemp(prefix="commit-entries-", suffix=".jsonl")
        self._file = os.fdopen(fd, "w", encoding="utf-8")

    def add_destination(self, dest: str) -> bool:
        """Record a destination URI; False if some entry already has it."""
        digest = _digest(dest)
        if digest in self._digests:
            return False
        self._digests.add(digest)
        return True

    def has_destination(self, dest: str) -> bool:
        return _digest(dest) in self._digests

    def append(self, entry: CommitEntry, partition: str) -> None:
        self._file.write(entry.to_line() + "\n")
        self.count += 1
        self.total_bytes += entry.size
        if partition:
            self.partitions.add(partition)

    def __iter__(self) -> Iterator[CommitEntry]:
        self._file.flush()
        with open(self._path, encoding="utf-8") as handle:
            for line in handle:
                yield CommitEntry.from_line(line)

    def close(self) -> None:
        self._file.close()
        if os.path.exists(self._path):
            os.unlink(self._path)

    def __enter__(self) -> EntrySpool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _digest(dest: str) -> int:
    return int.from_bytes(hashlib.blake2b(dest.encode("utf-8"), digest_size=8).digest(), "big")
