"""An external merge sort in bounded memory: what keeps job commit and listings flat at any size.

Records (tuples of plain values, the sort key first) are collected in runs of a bounded size, each
sorted in memory and spilled to a temp file, then merged once into one file. Job commit sorts its
entries this way (`stages.entries`), and anything it merges with them: a listing a server does not
sort as S3 does, a local directory of a million files.
"""

from __future__ import annotations

import heapq
import itertools
import marshal
import os
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Any, BinaryIO, TypeVar

#: Bytes of records a spool holds in memory before it sorts them and spills them as one run.
RUN_BYTES = 16 << 20
#: Bytes of records per marshalled batch in a spool's files: what each reader of a run holds.
BATCH_BYTES = 64 << 10
_LENGTH = struct.Struct("<I")
_first = itemgetter(0)

Record = tuple[Any, ...]
"""A spooled record: a tuple of str, bytes, int, float, None and tuples of them, its sort key first."""

A = TypeVar("A", bound=tuple[Any, ...])
B = TypeVar("B", bound=tuple[Any, ...])


def key_order(key: str) -> bytes:
    """A key as listings order it: S3 by its UTF-8 bytes, a local store by its name's bytes (an
    undecodable byte arrives as a surrogate escape and goes back to itself)."""
    return key.encode("utf-8", "surrogateescape")


class SortedSpool:
    """Records sorted by their first field, in bounded memory: an external merge sort.

    `add` collects records; every `run_bytes` (estimated) they are sorted and spilled to a temp
    file as one run. `sort` merges the runs once into one file, which every later pass reads,
    each at its own offset (passes never share a position). Every file is unlinked as soon as it
    is created, so a driver killed mid-commit leaves nothing in the temp directory. A spool that
    never filled a run stays in memory.

    Records are marshalled in batches: marshal is the fastest encoding of tuples of plain values
    (several times JSON's), and the files live only as long as this process.
    """

    def __init__(self, *, run_bytes: int = RUN_BYTES, prefix: str = "commit-spool-") -> None:
        self.run_bytes = run_bytes
        self.prefix = prefix
        self.count = 0
        self._run: list[Record] = []
        self._run_size = 0
        self._runs: list[tuple[BinaryIO, int]] = []
        self._merged: tuple[BinaryIO, int] | None = None
        self._sorted = False

    def add(self, record: Record, size: int) -> None:
        """Add `record`, whose memory is about `size` bytes (what decides when a run is spilled)."""
        if self._sorted:
            raise RuntimeError("a sorted spool takes no more records")
        self._run.append(record)
        self._run_size += size
        self.count += 1
        if self._run_size >= self.run_bytes:
            self._spill_run()

    def sort(self, combine: Callable[[Record, Record], Record] | None = None) -> None:
        """Sort every record added; `combine(first, second)` is called for each two adjacent
        records with the same key and returns the one record that stands for both (it may raise,
        to refuse them). Records with the same key keep the order they were added in."""
        if self._sorted:
            return
        self._sorted = True
        self._run.sort(key=_first)
        if not self._runs:
            self._run = list(_combined(self._run, combine)) if combine else self._run
            self.count = len(self._run)
            return
        self._spill_run()
        self.count = 0
        with _BatchWriter(self.prefix) as writer:
            for record in _combined(heapq.merge(*map(self._read, self._runs), key=_first), combine):
                writer.add(record)
                self.count += 1
            self._merged = writer.detach()
        for handle, _ in self._runs:
            handle.close()
        self._runs = []

    def __iter__(self) -> Iterator[Record]:
        """The records in key order (after `sort`); any number of passes, even at once."""
        if not self._sorted:
            raise RuntimeError("sort the spool before reading it")
        if self._merged is None:
            return iter(self._run)
        return self._read(self._merged)

    def close(self) -> None:
        self._run = []
        for handle, _ in [*self._runs, *([self._merged] if self._merged else [])]:
            handle.close()
        self._runs, self._merged = [], None

    def __enter__(self) -> SortedSpool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _spill_run(self) -> None:
        if not self._run:
            return
        self._run.sort(key=_first)
        with _BatchWriter(self.prefix) as writer:
            for record in self._run:
                writer.add(record)
            self._runs.append(writer.detach())
        self._run, self._run_size = [], 0

    @staticmethod
    def _read(spilled: tuple[BinaryIO, int]) -> Iterator[Record]:
        handle, end = spilled
        fd, offset = handle.fileno(), 0
        while offset < end:
            (length,) = _LENGTH.unpack(os.pread(fd, _LENGTH.size, offset))
            batch = marshal.loads(os.pread(fd, length, offset + _LENGTH.size))
            offset += _LENGTH.size + length
            yield from batch


class RecordLog:
    """Records in the order they were added, in bounded memory: batches of about `BATCH_BYTES`
    marshalled to one unlinked temp file as they fill (made at the first record). Read back in
    that order, any number of times, even between adds.

    What a task attempt keeps of each file it writes until its commit (S3A's magic committer keeps
    them all in memory: HADOOP-19047). Not thread-safe: its owner serialises adds.
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.count = 0
        self._writer: _BatchWriter | None = None

    def add(self, record: Record) -> None:
        if self._writer is None:
            self._writer = _BatchWriter(self.prefix)
        self._writer.add(record)
        self.count += 1

    def __iter__(self) -> Iterator[Record]:
        if self._writer is None:
            return iter(())
        return SortedSpool._read(self._writer.written())

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        self.count = 0

    def __enter__(self) -> RecordLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class _BatchWriter:
    """Writes records to a new unlinked temp file in marshalled batches of about `BATCH_BYTES`."""

    def __init__(self, prefix: str) -> None:
        self._file: BinaryIO | None = tempfile.TemporaryFile(prefix=prefix)  # noqa: SIM115 - closed by its spool
        self._batch: list[Record] = []
        self._size = 0
        self._end = 0

    def add(self, record: Record) -> None:
        self._batch.append(record)
        self._size += record_size(record)
        if self._size >= BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._batch and self._file is not None:
            blob = marshal.dumps(self._batch)
            self._file.write(_LENGTH.pack(len(blob)))
            self._file.write(blob)
            self._end += _LENGTH.size + len(blob)
        self._batch, self._size = [], 0

    def written(self) -> tuple[BinaryIO, int]:
        """The file and the length written so far, flushed (more may be added after)."""
        assert self._file is not None
        self._flush()
        self._file.flush()
        return self._file, self._end

    def detach(self) -> tuple[BinaryIO, int]:
        """The written file and its length, flushed; closing it is the caller's from now on."""
        spilled = self.written()
        self._file = None
        return spilled

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> _BatchWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()  # not detached: an error while writing


def record_size(record: Record) -> int:
    """About the bytes a record holds in memory (what bounds a spool's runs and batches)."""
    size = 56 + 8 * len(record)
    for value in record:
        if isinstance(value, (str, bytes)):
            size += 49 + len(value)
        elif isinstance(value, tuple):
            size += record_size(value)
        elif value is not None:
            size += 28
    return size


def _combined(
    records: Iterable[Record], combine: Callable[[Record, Record], Record] | None
) -> Iterator[Record]:
    if combine is None:
        yield from records
        return
    held: Record | None = None
    for record in records:
        if held is not None and held[0] == record[0]:
            held = combine(held, record)
            continue
        if held is not None:
            yield held
        held = record
    if held is not None:
        yield held


def spooled(records: Iterable[Record], prefix: str) -> SortedSpool:
    """`records` sorted by their first field in a new spool (the caller closes it).

    What job commit merges with its entries goes through one: S3 lists keys in UTF-8 byte order,
    but not every server does (SeaweedFS lists a directory's files before its siblings whose names
    extend the directory's with a character below ``/``, and pending uploads by upload ID), and a
    merge with a listing out of order would pair the wrong files without a word.
    """
    spool = SortedSpool(prefix=prefix)
    try:
        for record in records:
            spool.add(record, record_size(record))
        spool.sort()
    except BaseException:
        spool.close()
        raise
    return spool


def join_sorted(left: Iterable[A], right: Iterable[B]) -> Iterator[tuple[A | None, B | None]]:
    """Merge two streams of records sorted by their first field (unique on each side): each record
    once, paired with the other side's record of the same key when there is one."""
    lefts, rights = iter(left), iter(right)
    a, b = next(lefts, None), next(rights, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a[0] < b[0]):
            yield a, None
            a = next(lefts, None)
        elif a is None or b[0] < a[0]:
            yield None, b
            b = next(rights, None)
        else:
            yield a, b
            a, b = next(lefts, None), next(rights, None)


def grouped(records: Iterable[Record]) -> Iterator[tuple[Any, list[Record]]]:
    """Sorted records as `(key, the records with that key)`, for `join_sorted` where keys repeat
    (several uploads of one key, say); a group holds what one key has."""
    for key, group in itertools.groupby(records, key=_first):
        yield key, list(group)
