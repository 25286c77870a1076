"""Helpers shared by upload and temp-tree cleanup: clocks, progress, retries, errors, sizes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timezone
from typing import Any, Protocol, TypeVar

from airflow_commit_provider.core.store.base import NoSuchUploadError, StoreError

R = TypeVar("R")
T = TypeVar("T")

#: Keys listed in reports (XCom, JSON); the full list can be a million long.
SAMPLE_SIZE = 20
#: Items failing in a row after which a run takes no more: a store that fails every request
#: (down, credentials revoked) is not asked about each of a million items, with retries.
STOP_AFTER_FAILURES = 50
#: Seconds between two progress lines in a task log.
PROGRESS_LOG_INTERVAL = 30.0


class Progress(Protocol):
    """What a long operation tells its caller; the CLI draws bars from it."""

    def start(self, description: str, total: int | None) -> None: ...

    def advance(self, amount: int = 1) -> None: ...


class NoProgress:
    def start(self, description: str, total: int | None) -> None:
        return None

    def advance(self, amount: int = 1) -> None:
        return None


class InfoLog(Protocol):
    """A logger's `info`: the standard library's or the task logger Airflow gives an operator."""

    def info(self, event: Any, *args: Any) -> Any: ...


class LoggingProgress:
    """Progress as log lines, for the operators: a line at most every `interval` seconds while a
    step runs, and one when it ends, with counts and the rate (``Aborting uploads: 120,000 of
    1,000,000 (12%), 1,190/s``). Safe to advance from several threads."""

    def __init__(
        self,
        log: InfoLog,
        interval: float = PROGRESS_LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._description: str | None = None
        self._total: int | None = None
        self._done = 0
        self._started = self._logged = 0.0

    def start(self, description: str, total: int | None) -> None:
        with self._lock:
            self._finish()
            self._description, self._total, self._done = description, total, 0
            self._started = self._logged = self._clock()

    def advance(self, amount: int = 1) -> None:
        with self._lock:
            self._done += amount
            now = self._clock()
            if now - self._logged >= self._interval:
                self._logged = now
                self._line(now, "")

    def close(self) -> None:
        """Log how the last step ended."""
        with self._lock:
            self._finish()
            self._description = None

    def _finish(self) -> None:
        if self._description is not None:
            self._line(self._clock(), "done: ")

    def _line(self, now: float, prefix: str) -> None:
        elapsed = now - self._started
        of = "" if self._total is None else f" of {self._total:,}"
        share = f" ({100 * self._done / self._total:.0f}%)" if self._total else ""
        rate = f", {self._done / elapsed:,.0f}/s" if elapsed > 0 else ""
        self._log.info(
            "%s: %s%s%s%s in %.0fs%s", self._description, prefix, f"{self._done:,}", of, share, elapsed, rate
        )


class Breaker:
    """Stops a run once `limit` items in a row failed; what it did not try is reported as such.

    `items` hands out the source's items while the breaker holds; the source keeps the rest.
    """

    def __init__(self, limit: int = STOP_AFTER_FAILURES) -> None:
        self._limit = limit
        self._in_a_row = 0
        self._lock = threading.Lock()

    @property
    def tripped(self) -> bool:
        return self._in_a_row >= self._limit

    def note(self, failed: bool) -> None:
        with self._lock:
            self._in_a_row = self._in_a_row + 1 if failed else 0

    def items(self, source: Iterator[T]) -> Iterator[T]:
        """The source's items until the breaker trips; an item not handed out stays in `source`."""
        while not self.tripped:
            try:
                item = next(source)
            except StopIteration:
                return
            yield item


def counted(items: Iterable[T], progress: Progress) -> Iterator[T]:
    """`items`, advancing `progress` for each one handed out."""
    for item in items:
        progress.advance()
        yield item


def format_size(count: int | None) -> str:
    """Bytes for people: `512 B`, `1.5 MiB`; `?` when unknown."""
    if count is None:
        return "?"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def utc_now(now: datetime | None) -> datetime:
    """`now` (tests inject it instead of waiting), naive values taken as UTC, or the clock."""
    if now is None:
        return datetime.now(timezone.utc)
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)


def iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=timezone.utc).isoformat()


def one_line(error: BaseException) -> str:
    """The error's message on one line: reports and CLI output keep one line per failure."""
    return " ".join(str(error).split())


def with_retries(action: Callable[[], R], attempts: int, delay: float) -> tuple[R, int]:
    """Run `action`, retrying StoreErrors (not NoSuchUpload, which is an answer) with backoff.

    Returns (result, attempts used). The store's client already retries throttling; this covers
    errors that outlast it, such as a connection reset mid-abort.
    """
    for attempt in range(1, attempts + 1):
        try:
            return action(), attempt
        except NoSuchUploadError:
            raise
        except StoreError:
            if attempt == attempts:
                raise
            if delay > 0:
                time.sleep(delay * 2 ** (attempt - 1))
    raise AssertionError("unreachable")
