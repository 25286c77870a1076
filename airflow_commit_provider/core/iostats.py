"""Hadoop's IOStatistics: counters, gauges, minimums, maximums, meanstatistics.

One type serves every source, as in Hadoop: a store counts its requests in it, a committer its
stages, and task manifests and `_SUCCESS` carry it as IOStatisticsSnapshot JSON. At core's root,
below both the store and the formats: reading that JSON back (refusing what is malformed) is the
formats' (`formats.jsonio.read_iostatistics`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TimedOperation:
    """One operation's durations, read back from the names `IOStatistics.record_duration` (and
    Hadoop's DurationTracker) give them: the count in `op`, failures in `op.failures`, and
    milliseconds in `op.min`, `op.max` and `op.mean`."""

    name: str
    count: int
    failures: int
    min_ms: int | None
    mean_ms: float | None
    max_ms: int | None


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

    def timed_operations(self) -> list[TimedOperation]:
        """The operations that were timed at least once, by name: Hadoop writes every duration
        it knows, with -1 and 0 samples for those that never ran, and these are left out."""
        with self._lock:
            timed = []
            for key, mean in sorted(self.meanstatistics.items()):
                name = key.removesuffix(".mean")
                if key == name or name.endswith(".failures") or mean.get("samples", 0) <= 0:
                    continue
                timed.append(
                    TimedOperation(
                        name,
                        self.counters.get(name, mean["samples"]),
                        self.counters.get(f"{name}.failures", 0),
                        _measured(self.minimums.get(f"{name}.min")),
                        mean["sum"] / mean["samples"],
                        _measured(self.maximums.get(f"{name}.max")),
                    )
                )
            return timed

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "counters": dict(self.counters),
                "gauges": dict(self.gauges),
                "minimums": dict(self.minimums),
                "maximums": dict(self.maximums),
                "meanstatistics": {k: dict(v) for k, v in self.meanstatistics.items()},
            }


def _measured(millis: int | None) -> int | None:
    """A minimum or maximum as Hadoop writes it: -1 for one never measured."""
    return millis if millis is not None and millis >= 0 else None
