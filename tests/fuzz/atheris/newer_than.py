"""Atheris target: `_SUCCESS` age limits as dates (`parse_newer_than`, from a rendered template):
a timezone-aware date-time, or a ValueError naming newer_than (pendulum's own errors included)."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused, text_of

from airflow_commit_provider.success.check import parse_newer_than

MAX_LEN = 64


def TestOneInput(data: bytes) -> None:
    text = text_of(data)
    moment = accepted_or_refused(lambda: parse_newer_than(text), ValueError, "newer_than")
    assert moment is None or moment.tzinfo is not None, repr(text)
