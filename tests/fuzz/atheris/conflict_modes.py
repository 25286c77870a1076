"""Atheris target: conflict modes (`parse_conflict_mode`) and flags (`parse_bool`), as a rendered
template or a Spark conf hands them over: exactly a documented value, or a ValueError naming it."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused, text_of

from airflow_commit_provider.core.options import CONFLICT_MODES, parse_bool, parse_conflict_mode

MAX_LEN = 64


def TestOneInput(data: bytes) -> None:
    text = text_of(data)
    mode = accepted_or_refused(lambda: parse_conflict_mode(text), ValueError, repr(text))
    assert mode is None or (mode in CONFLICT_MODES and mode == text), repr(text)
    accepted_or_refused(lambda: parse_bool(text, "skip_cleanup"), ValueError, "skip_cleanup")
