"""Atheris target: a cleanup's scope (`parse_scope`): one directory, never a bucket's root
(unless allowed, as the first byte says), never with '..' in it."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused, text_of

from airflow_commit_provider.cleanup.scope import ScopeError, parse_scope

MAX_LEN = 256


def TestOneInput(data: bytes) -> None:
    allow_bucket_root = data[:1] == b"\x01"
    text = text_of(data[1:])
    scope = accepted_or_refused(
        lambda: parse_scope(text, argument="--scope", allow_bucket_root=allow_bucket_root),
        ScopeError,
        "--scope",
    )
    if scope is not None:
        assert ".." not in scope.key.split("/"), repr(text)
        assert allow_bucket_root or scope.key.strip("/"), repr(text)
