"""Atheris target: locations as users give them (`StorePath.parse`). Accepted ones print back to
themselves, and their stored URI reads back to the same path."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused, text_of

from airflow_commit_provider.core.paths import InvalidPathError, StorePath

MAX_LEN = 256


def TestOneInput(data: bytes) -> None:
    text = text_of(data)
    path = accepted_or_refused(lambda: StorePath.parse(text), InvalidPathError, repr(text), "empty path")
    if path is not None:
        assert StorePath.parse(str(path)) == path, repr(text)
        assert StorePath.from_uri(path.uri()) == path, repr(text)
