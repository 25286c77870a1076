"""Strict-enough JSON loading: every failure names the file; unknown fields are ignored."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError


def parse_object(data: bytes, source: str) -> dict[str, Any]:
    if not data:
        raise InvalidCommitDataError(f"{source}: file is empty")
    try:
        parsed = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidCommitDataError(f"{source}: not valid JSON (truncated or corrupt?): {error}") from error
    if not isinstance(parsed, dict):
        raise InvalidCommitDataError(f"{source}: expected a JSON object, got {type(parsed).__name__}")
    return parsed


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8")


def require_field(data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], source: str) -> Any:
    value = data.get(name)
    if value is None or not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise InvalidCommitDataError(f"{source}: field {name!r} is missing or not a {_kind_name(kind)}")
    return value


def optional_field(
    data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], source: str, default: Any
) -> Any:
    value = data.get(name)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise InvalidCommitDataError(f"{source}: field {name!r} is not a {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__
