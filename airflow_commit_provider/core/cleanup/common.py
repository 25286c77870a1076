"""Helpers shared by upload and temp-tree cleanup: clocks, progress, retries, errors, sizes."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Protocol, TypeVar

from airflow_commit_provider.core.store.base import NoSuchUploadError, StoreError

R = TypeVar("R")

#: Keys listed in reports (XCom, JSON); the full list can be tens of thousands long.
SAMPLE_SIZE = 20


class Progress(Protocol):
    """What a long operation tells its caller; the CLI draws bars from it."""

    def start(self, description: str, total: int | None) -> None: ...

    def advance(self, amount: int = 1) -> None: ...


class NoProgress:
    def start(self, description: str, total: int | None) -> None:
        return None

    def advance(self, amount: int = 1) -> None:
        return None


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
