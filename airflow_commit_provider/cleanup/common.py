"""Helpers shared by the kinds of cleanup: clocks, samples, a breaker, retries, errors."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import TypeVar

from airflow_commit_provider.core.store.base import NoSuchUploadError, StoreError

R = TypeVar("R")
T = TypeVar("T")

#: Keys listed in reports (XCom, JSON); the full list can be a million long.
SAMPLE_SIZE = 20
#: Items failing in a row after which a run takes no more: a store that fails every request
#: (down, credentials revoked) is not asked about each of a million items, with retries.
STOP_AFTER_FAILURES = 50


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
