"""A store wrapper that counts the calls a reader makes and the bytes it reads: what a test of
"one ranged GET of at most 64 KiB" or "one listing" measures, on any store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store
from support.stores import DelegatingStore

R = TypeVar("R")


class CountingStore(DelegatingStore):
    """Every call by name (`calls`); for reads, how often each path was read (`paths_read`) and how
    many of its bytes (`bytes_by_path`), the largest single read and all bytes read."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.calls: Counter[str] = Counter()
        self.paths_read: Counter[StorePath] = Counter()
        self.bytes_by_path: Counter[StorePath] = Counter()
        self.bytes_read = 0
        self.largest_read = 0

    def _delegate(self, op: str, where: object, mutating: bool, action: Callable[[], R]) -> R:
        self.calls[op] += 1
        return action()

    def read_range(self, path: StorePath, start: int, length: int) -> bytes:
        return self._read(path, super().read_range(path, start, length))

    def read_bytes(self, path: StorePath) -> bytes:
        return self._read(path, super().read_bytes(path))

    def _read(self, path: StorePath, data: bytes) -> bytes:
        self.paths_read[path] += 1
        self.bytes_by_path[path] += len(data)
        self.bytes_read += len(data)
        self.largest_read = max(self.largest_read, len(data))
        return data

    def reset(self) -> None:
        self.calls.clear()
        self.paths_read.clear()
        self.bytes_by_path.clear()
        self.bytes_read = self.largest_read = 0
