"""Hadoop's IOStatistics: counters, gauges, minimums, maximums, meanstatistics.

One type serves every source, as in Hadoop: a store counts its requests in it, a committer its
stages, and task manifests and `_SUCCESS` carry it as IOStatisticsSnapshot JSON.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class IOStatistics:
    counters: dict[str, int] = field(default_factory=dict)
    gauges: dict[str, int] = field(default_factory=dict)
    minimums: dict[str, int] = field(default_factory=dict)
    maximums: dict[str, int] = field(default_factory=dict)
    meanstatistics: dict[str, dict[str, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def increment(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + amount

    def add_counters(self, counters: Mapping[str, int]) -> None:
        for name, value in counters.items():
            self.increment(name, value)

    def snapshot(self) -> dict[str, int]:
        """The counters as they stand now: a mark to measure a stretch of work from."""
        with self._lock:
            return dict(self.counters)

    def counters_since(self, mark: Mapping[str, int]) -> IOStatistics:
        """What the counters gained since `mark` (a `snapshot()`), as statistics of their own.

        Lets one long-lived store's counts be attributed to the task attempt or job commit that
        made the requests, the way Hadoop attaches a stream's or stage's statistics to its manifest.
        """
        gained = {name: value - mark.get(name, 0) for name, value in self.snapshot().items()}
        return IOStatistics(counters={name: value for name, value in gained.items() if value})

    def record_duration(self, name: str, millis: int, *, failed: bool = False) -> None:
        """Record one timed operation the way Hadoop names durations (`op`, `op.min`, `op.mean`...)."""
        key = f"{name}.failures" if failed else name
        with self._lock:
            self.counters[key] = self.counters.get(key, 0) + 1
            self.minimums[f"{key}.min"] = min(self.minimums.get(f"{key}.min", millis), millis)
            self.maximums[f"{key}.max"] = max(self.maximums.get(f"{key}.max", millis), millis)
            mean = self.meanstatistics.setdefault(f"{key}.mean", {"samples": 0, "sum": 0})
            mean["samples"] += 1
            mean["sum"] += millis

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        except BaseException:
            self.record_duration(name, int((time.monotonic() - start) * 1000), failed=True)
            raise
        self.record_duration(name, int((time.monotonic() - start) * 1000))

    def timed_future(self, name: str, future: Future[Any]) -> Future[Any]:
        """`timed` for a request in flight: its duration is recorded when the future is done."""
        start = time.monotonic()

        def record(done: Future[Any]) -> None:
            millis = int((time.monotonic() - start) * 1000)
            self.record_duration(name, millis, failed=done.exception() is not None)

        future.add_done_callback(record)
        return future

    def merge(self, other: IOStatistics) -> None:
        """Aggregate as IOStatisticsSnapshot.aggregate does: sum, min, max, add means."""
        with self._lock:
            for name, value in other.counters.items():
                self.counters[name] = self.counters.get(name, 0) + value
            for name, value in other.gauges.items():
                self.gauges[name] = self.gauges.get(name, 0) + value
            for name, value in other.minimums.items():
                self.minimums[name] = min(self.minimums.get(name, value), value)
            for name, value in other.maximums.items():
                self.maximums[name] = max(self.maximums.get(name, value), value)
            for name, mean in other.meanstatistics.items():
                mine = self.meanstatistics.setdefault(name, {"samples": 0, "sum": 0})
                mine["samples"] += mean["samples"]
                mine["sum"] += mean["sum"]

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "counters": dict(self.counters),
                "gauges": dict(self.gauges),
                "minimums": dict(self.minimums),
                "maximums": dict(self.maximums),
                "meanstatistics": {k: dict(v) for k, v in self.meanstatistics.items()},
            }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> IOStatistics:
        data = data or {}

        def longs(name: str) -> dict[str, int]:
            return {str(k): int(v) for k, v in (data.get(name) or {}).items()}

        means = {
            str(k): {"samples": int(v.get("samples", 0)), "sum": int(v.get("sum", 0))}
            for k, v in (data.get("meanstatistics") or {}).items()
        }
        return cls(longs("counters"), longs("gauges"), longs("minimums"), longs("maximums"), means)
