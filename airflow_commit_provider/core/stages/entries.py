"""Commit entries and the local spool that keeps job commit's memory bounded (HADOOP-16570)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO


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
    def from_line(cls, line: str | bytes) -> CommitEntry:
        dest, size, task_id, source, upload_id, etags = json.loads(line)
        return cls(dest, size, task_id, source, upload_id, tuple(etags))


#: Entries job commit keeps in memory before spilling the rest to a local file (about 4 MB).
MEMORY_ENTRIES = 10_000


@dataclass
class EntrySpool:
    """Validated entries of all committed tasks, with job commit's memory bounded (HADOOP-16570).

    The first `memory_entries` stay in memory, which covers most jobs without encoding each
    entry twice; the rest go through a local file as JSON lines. That file is unlinked as soon
    as it exists, so a driver killed mid-commit leaves nothing in the temp directory. Memory
    also holds one 8-byte digest per destination, for the duplicate check.
    """

    memory_entries: int = MEMORY_ENTRIES
    count: int = 0
    total_bytes: int = 0
    partitions: set[str] = field(default_factory=set)
    _digests: set[int] = field(default_factory=set)
    _memory: list[CommitEntry] = field(default_factory=list)
    _spill: BinaryIO | None = None

    def add_destination(self, dest: str) -> bool:
        """Record a destination URI; False if some entry already has it."""
        digest = text_digest(dest)
        if digest in self._digests:
            return False
        self._digests.add(digest)
        return True

    def has_destination(self, dest: str) -> bool:
        return text_digest(dest) in self._digests

    def append(self, entry: CommitEntry, partition: str) -> None:
        if len(self._memory) < self.memory_entries:
            self._memory.append(entry)
        else:
            if self._spill is None:
                self._spill = tempfile.TemporaryFile(prefix="commit-entries-", suffix=".jsonl")  # noqa: SIM115 - closed by close()
            self._spill.write(entry.to_line().encode("utf-8") + b"\n")
        self.count += 1
        self.total_bytes += entry.size
        if partition:
            self.partitions.add(partition)

    def __iter__(self) -> Iterator[CommitEntry]:
        yield from self._memory
        if self._spill is not None:
            self._spill.flush()
            for line in _lines(self._spill.fileno()):
                yield CommitEntry.from_line(line)

    def close(self) -> None:
        self._memory = []
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def __enter__(self) -> EntrySpool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _lines(fd: int, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The file's lines, each read at its own offset: passes over the spool never share a position."""
    offset, rest = 0, b""
    while data := os.pread(fd, chunk, offset):
        offset += len(data)
        *lines, rest = (rest + data).split(b"\n")
        yield from lines


def text_digest(text: str) -> int:
    """8 bytes that stand for `text` in a set: what job commit keeps per file to stay bounded."""
    return int.from_bytes(
        hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big"
    )
