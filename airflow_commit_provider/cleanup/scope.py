"""Validating a cleanup scope before anything is listed, let alone deleted.

A cleanup once destroyed a neighbouring dataset through a plain prefix match; the scope is
therefore always a directory (`out/dataset1` never covers `out/dataset10`), and a scope that
covers a whole bucket or filesystem root has to be asked for explicitly.
"""

from __future__ import annotations

import os
import re

from airflow_commit_provider.core.paths import InvalidPathError, StorePath

_SCHEME_WITHOUT_SLASHES = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(?!//)")


class ScopeError(ValueError):
    """The cleanup scope is missing, malformed or too broad; the message names the argument."""


def parse_scope(
    scope: str | os.PathLike[str] | StorePath,
    *,
    argument: str = "scope",
    allow_bucket_root: bool = False,
) -> StorePath:
    """The folder a cleanup may act in (its scope, parsed), or ScopeError saying what is wrong with `scope`."""
    if isinstance(scope, StorePath):
        path = scope
        shown = str(scope)
    else:
        if not isinstance(scope, (str, os.PathLike)):
            raise ScopeError(f"{argument}: expected a URL such as s3://bucket/table, got {scope!r}")
        shown = os.fspath(scope)
        text = shown.strip()
        if not text:
            raise ScopeError(
                f"{argument}: empty scope: give an s3://bucket/prefix, file:// URL or local path"
            )
        if "{{" in text or "}}" in text:
            raise ScopeError(f"{argument}: {shown!r} contains an unrendered template")
        if _SCHEME_WITHOUT_SLASHES.match(text) and len(text.split(":", 1)[0]) > 1:
            raise ScopeError(f"{argument}: cannot parse {shown!r} as a URL: expected scheme://bucket/prefix")
        if any(char in text for char in "*?["):
            raise ScopeError(
                f"{argument}: {shown!r} has wildcards; the scope is one directory, not a pattern"
            )
        try:
            path = StorePath.parse(text)
        except InvalidPathError as error:
            raise ScopeError(f"{argument}: {error}") from error
    if not path.is_local and not path.bucket:
        raise ScopeError(f"{argument}: {shown!r} has no bucket")
    segments = path.key.strip("/").split("/")
    if ".." in segments or "." in segments:
        raise ScopeError(f"{argument}: {shown!r} must not contain '.' or '..' segments")
    at_root = path.key.strip("/") == ""
    if at_root and not allow_bucket_root:
        where = "the whole filesystem" if path.is_local else f"the whole bucket {path.bucket!r}"
        raise ScopeError(
            f"{argument}: {shown!r} has an empty prefix and would cover {where}; "
            "pass allow_bucket_root=True (--allow-bucket-root) if that is really meant"
        )
    return path
