"""Waiting, bounded, for something a test can observe: a file, a process group, a cluster's state."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    what: str,
    timeout: float,
    *,
    interval: float = 0.1,
    failure: type[Exception] = AssertionError,
) -> T:
    """Poll ``condition()`` until it returns something truthy, and return that.

    Raises `failure` naming `what` once `timeout` seconds have passed: a test fails by default,
    a fixture that cannot set up raises its own error instead.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise failure(f"gave up after {timeout:.0f}s waiting for: {what}")
        time.sleep(interval)  # polling an observable condition, bounded by the deadline
