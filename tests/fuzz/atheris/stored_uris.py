"""Atheris target: locations as commit files store them (`StorePath.from_uri`): read back from
their own URI to the same path."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused, text_of

from airflow_commit_provider.core.paths import InvalidPathError, StorePath

MAX_LEN = 256


def TestOneInput(data: bytes) -> None:
    uri = text_of(data)
    path = accepted_or_refused(lambda: StorePath.from_uri(uri), InvalidPathError, repr(uri))
    if path is not None:
        assert StorePath.from_uri(path.uri()) == path, repr(uri)
