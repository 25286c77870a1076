"""Local disk for a cleanup of any size: a spool of items and a set of keys, neither held in memory.

A scope can hold a million pending uploads or temporary files. What a cleanup must remember of
them between its steps (the listing it shows before acting, the uploads it aborted and must find
gone, the upload IDs a job recorded) goes to local temporary files instead, so its memory stays
the same whatever the count. Both are unlinked as soon as they exist: a killed worker leaves
nothing behind in the temp directory, and a second run starts from the store, never from them.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
import struct
import tempfile
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Generic, TypeVar

T = TypeVar("T")

_LENGTH = struct.Struct("<I")
#: Items pickled together: one pickle names each class once, where an item alone would repeat it.
_BLOCK_ITEMS = 1024


class Spool(Generic[T]):
    """Items appended to an unlinked local file and read back in order, as often as needed.

    Items are pickled `_BLOCK_ITEMS` at a time, each block behind its length, so memory holds one
    block. Reading goes by offset (`os.pread`), so an iteration is not disturbed by another one or
    by appends made meanwhile (it ends with the items there were when it began). Only this
    process reads what it wrote, so pickle is safe here.
    """

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._file = tempfile.TemporaryFile(prefix="airflow-commit-cleanup-", suffix=".spool")  # noqa: SIM115 - closed by close()
        self._size = 0
        self._count = 0
        self._block: list[T] = []
        self.extend(items)

    def append(self, item: T) -> None:
        self._block.append(item)
        self._count += 1
        if len(self._block) >= _BLOCK_ITEMS:
            self._write_block()

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.append(item)

    def _write_block(self) -> None:
        data = pickle.dumps(self._block, protocol=pickle.HIGHEST_PROTOCOL)
        self._file.write(_LENGTH.pack(len(data)) + data)
        self._size += _LENGTH.size + len(data)
        self._block = []

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[T]:
        if self._block:
            self._write_block()
        self._file.flush()
        descriptor, end, offset = self._file.fileno(), self._size, 0
        while offset < end:
            (length,) = _LENGTH.unpack(os.pread(descriptor, _LENGTH.size, offset))
            data = os.pread(descriptor, length, offset + _LENGTH.size)
            if len(data) != length:
                raise EOFError(f"spool truncated at byte {offset} of {end}")
            offset += _LENGTH.size + length
            yield from pickle.loads(data)

    def head(self, count: int) -> list[T]:
        """The first `count` items (what a table shows before "... and N more")."""
        return list(islice(self, count))

    def close(self) -> None:
        self._block = []
        self._file.close()


class KeySet:
    """A set of strings in a private SQLite database on local disk, in the spool's temp directory.

    For the membership tests a cleanup makes against sets as large as the scope: did this run
    abort that upload, did this job record that upload ID. SQLite keeps a small page cache
    (2 MiB by default) and pages the rest to its file, which is unlinked once open (with no
    journal, nothing else of it has a name) and so goes when the set is closed or the process ends.
    """

    def __init__(self, keys: Iterable[str] = ()) -> None:
        descriptor, path = tempfile.mkstemp(prefix="airflow-commit-cleanup-", suffix=".keys")
        os.close(descriptor)
        try:
            # Calls come from one thread at a time (the cleanup's own), never at once.
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=OFF")
            self._db.execute("PRAGMA synchronous=OFF")
            self._db.execute("CREATE TABLE keys (key TEXT PRIMARY KEY) WITHOUT ROWID")  # the file is open now
        finally:
            os.unlink(path)
        self.update(keys)

    def add(self, key: str) -> None:
        self._db.execute("INSERT OR IGNORE INTO keys VALUES (?)", (key,))

    def update(self, keys: Iterable[str]) -> None:
        self._db.execute("BEGIN")
        try:
            self._db.executemany("INSERT OR IGNORE INTO keys VALUES (?)", ((key,) for key in keys))
        finally:
            self._db.execute("COMMIT")

    def __contains__(self, key: object) -> bool:
        return self._db.execute("SELECT 1 FROM keys WHERE key = ?", (key,)).fetchone() is not None

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM keys").fetchone()[0])

    def __iter__(self) -> Iterator[str]:
        """The keys in sorted order, read a page at a time."""
        last: str | None = None
        while True:
            if last is None:
                rows = self._db.execute("SELECT key FROM keys ORDER BY key LIMIT 1000").fetchall()
            else:
                query = "SELECT key FROM keys WHERE key > ? ORDER BY key LIMIT 1000"
                rows = self._db.execute(query, (last,)).fetchall()
            if not rows:
                return
            for (key,) in rows:
                yield key
            last = rows[-1][0]

    def close(self) -> None:
        self._db.close()


def batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """`items` in lists of at most `size`: how a stream meets calls that take a batch."""
    source = iter(items)
    while batch := list(islice(source, size)):
        yield batch
