"""Atheris target: durations (cleanup ages) as text (`parse_duration`), and as the number of
seconds an operator may pass instead (`as_timedelta`): never negative, never timedelta's own
OverflowError."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

from support.fuzzing import accepted_or_refused, text_of

from airflow_commit_provider.durations import as_timedelta, parse_duration

MAX_LEN = 512


def TestOneInput(data: bytes) -> None:
    text = text_of(data)
    parsed = accepted_or_refused(lambda: parse_duration(text, "older_than"), ValueError, "older_than")
    assert parsed is None or parsed >= timedelta(0), repr(text)
    try:
        seconds: float | None = float(text)
    except (ValueError, OverflowError):
        seconds = None
    for value in (text, seconds, int(seconds) if seconds is not None and seconds.is_integer() else None):
        if value is not None:
            age = accepted_or_refused(partial(as_timedelta, value, "older_than"), ValueError, "older_than")
            assert age is None or age >= timedelta(0), repr(value)
