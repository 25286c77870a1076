"""Strict-enough JSON loading: every failure names the file; unknown fields are ignored.

Everything read here comes from a store that other jobs, tools and people also write, so a
file is refused by its size and nesting depth before `json.loads` sees it: a 1 GB manifest
would need several GB of memory to parse, and a deeply nested one a RecursionError (or a
later one, when our code walks or prints the value).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.iostats import IOStatistics

if TYPE_CHECKING:
    from airflow_commit_provider.core.paths import StorePath
    from airflow_commit_provider.core.store.base import Store

#: The largest commit file read. Our `_SUCCESS` lists every committed file (about 150 bytes
#: each), so this allows well over a million files; a task manifest or record is far smaller.
MAX_JSON_BYTES = 256 * 1024 * 1024
#: The deepest nesting read. Our formats and Hadoop's nest 4 levels; Python's recursion limit
#: (about 1000 frames, shared with the caller's stack) is what this keeps well away from.
MAX_JSON_DEPTH = 64


def load_json(data: bytes | str, source: str) -> Any:
    """Any JSON value from a store file, refused (naming `source`) when too big, too deep or invalid."""
    refuse_oversized(len(data), source)
    if nested_deeper_than(data, MAX_JSON_DEPTH):
        raise InvalidCommitDataError(f"{source}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(data)
    except RecursionError:  # mismatched brackets, nested past what the depth check measures
        raise InvalidCommitDataError(f"{source}: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as error:  # invalid JSON or UTF-8, or an integer longer than Python converts
        raise InvalidCommitDataError(f"{source}: not valid JSON (truncated or corrupt?): {error}") from error


def refuse_oversized(size: int, source: str) -> None:
    """Refuse a commit file of `size` bytes, naming `source`, if it is larger than `MAX_JSON_BYTES`."""
    if size > MAX_JSON_BYTES:
        raise InvalidCommitDataError(
            f"{source}: {size} bytes is more than the {MAX_JSON_BYTES} a commit file may have"
        )


def read_json_bytes(store: Store, path: StorePath) -> bytes:
    """The bytes of a store file to be read as JSON, refused (naming `path`) by its size before it
    is read: one ranged GET of `MAX_JSON_BYTES` + 1 bytes on S3, a stat locally."""
    data = store.read_bytes_within(path, MAX_JSON_BYTES)
    if data is None:
        raise InvalidCommitDataError(f"{path}: more than the {MAX_JSON_BYTES} bytes a commit file may have")
    return data


def parse_object(data: bytes, source: str) -> dict[str, Any]:
    if not data:
        raise InvalidCommitDataError(f"{source}: file is empty")
    parsed = load_json(data, source)
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


def now_millis() -> int:
    """The time now in epoch milliseconds, as every record here stores times (and Hadoop's do)."""
    return int(time.time() * 1000)


#: 9999-12-31T23:59:59.999Z, the last instant a `datetime` holds, in epoch milliseconds.
_LAST_MILLIS = 253_402_300_799_999


def optional_millis(data: Mapping[str, Any], name: str, source: str, default: int) -> int:
    """An epoch-milliseconds field; one a `datetime` cannot hold is refused here, not later where
    a sensor or a log turns it into a date (OverflowError, OSError)."""
    value = optional_field(data, name, int, source, default)
    if isinstance(value, bool) or not 0 <= value <= _LAST_MILLIS:
        raise InvalidCommitDataError(
            f"{source}: field {name!r} is not a time in epoch milliseconds: {value!r}"
        )
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def nested_deeper_than(data: bytes | str, limit: int) -> bool:
    """Whether the brackets outside strings nest more than `limit` deep, found in C-speed passes
    (a tenth of what parsing a large `_SUCCESS` costs).

    Escaped backslashes and quotes go first, then everything but brackets and quotes; removing
    two adjacent quotes leaves every other character as much inside or outside a string as it
    was, so `""` pairs and then quoted runs go too. Each pass then removes the innermost `[]`
    and `{}` pairs: brackets still shrinking after `limit` passes nest deeper than that; ones
    that stop shrinking are mismatched, which `json.loads` then reports as what it is.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    skeleton = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_BRACKETS_OR_QUOTES)
    skeleton = skeleton.replace(b'""', b"")
    if b'"' in skeleton:
        skeleton = _QUOTED.sub(b"", skeleton)
    for _ in range(limit):
        shorter = skeleton.replace(b"[]", b"").replace(b"{}", b"")
        if len(shorter) == len(skeleton):
            return False
        skeleton = shorter
    return bool(skeleton)


_NOT_BRACKETS_OR_QUOTES = bytes(byte for byte in range(256) if byte not in b'[]{}"')
_QUOTED = re.compile(rb'"[^"]*"')


def read_iostatistics(data: Mapping[str, Any] | None, source: str) -> IOStatistics:
    """An IOStatisticsSnapshot as Hadoop's Jackson writes it (every value a long); anything
    else is refused naming `source`, never turned into a number by guesswork."""
    data = data or {}

    def longs(values: object, where: str) -> dict[str, int]:
        if not isinstance(values, dict) or not all(_is_long(value) for value in values.values()):
            raise InvalidCommitDataError(f"{source}: iostatistics {where} is not an object of integers")
        return {str(key): value for key, value in values.items()}

    def mean(name: str, value: object) -> dict[str, int]:
        where = f"meanstatistics {name!r}"
        if not isinstance(value, dict):
            raise InvalidCommitDataError(f"{source}: iostatistics {where} is not an object")
        # `mean` itself is derived from these two, and not read.
        return longs({key: 0 if value.get(key) is None else value[key] for key in ("samples", "sum")}, where)

    means = data.get("meanstatistics") or {}
    if not isinstance(means, dict):
        raise InvalidCommitDataError(f"{source}: iostatistics meanstatistics is not an object")
    return IOStatistics(
        counters=longs(data.get("counters") or {}, "counters"),
        gauges=longs(data.get("gauges") or {}, "gauges"),
        minimums=longs(data.get("minimums") or {}, "minimums"),
        maximums=longs(data.get("maximums") or {}, "maximums"),
        meanstatistics={str(name): mean(str(name), value) for name, value in means.items()},
    )


def _is_long(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
