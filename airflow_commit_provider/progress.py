"""How a long operation tells people how far it is, and sizes for people.

One owner for what the cleanups, the success check's file-by-file verify, the commit report, the CLI
and the operators share: the `Progress` a long operation advances (the CLI draws bars from it, an
operator logs lines with `LoggingProgress`) and `format_size`. It imports nothing of the package, so
every room above `core` may use it (the layer contract in pyproject.toml).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

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
