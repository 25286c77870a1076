"""The complete top-level members of a JSON object, from the first bytes of a file.

A sensor poke reads at most `SENSOR_READ_BYTES` of a `_SUCCESS` (`docs/bounded-commits.md`), and
ours put everything a check needs first. So a reader parses the members that are complete in
that prefix and stops where the prefix ends: a member counts only once the `,` or `}` after it is
in the prefix, so a number or name cut short is never read as a shorter one. A prefix yields
fewer members, never a different value. Damage past the last complete member reads as the end of
the prefix: a reader that needs more reads the whole file, where `jsonio.load_json` refuses it.

The guards of `jsonio` hold: a prefix nested deeper than `MAX_JSON_DEPTH`, one that is not a JSON
object, invalid UTF-8 or a member named twice is refused naming the file.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import (
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    nested_deeper_than,
    parse_object,
)

if TYPE_CHECKING:
    from airflow_commit_provider.core.paths import StorePath
    from airflow_commit_provider.core.store.base import Store

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class FilePrefix:
    """The first bytes of a file, and whether they are all of it."""

    data: bytes
    whole: bool


@dataclass(frozen=True)
class PrefixMembers:
    """The members of a JSON object complete in a prefix, in file order; `complete` when the
    object's closing brace was in it (every member is here)."""

    members: dict[str, Any]
    complete: bool


def read_prefix(store: Store, path: StorePath, limit: int) -> FilePrefix:
    """At most `limit` bytes from the start of `path`, in one request (a ranged GET on S3).

    `whole` is true when the file is shorter than `limit`; a file of exactly `limit` bytes reads as
    a prefix, which costs nothing when the object closes in it.
    """
    data = store.read_range(path, 0, limit)
    return FilePrefix(data, len(data) < limit)


def parse_prefix(prefix: FilePrefix, source: str) -> PrefixMembers:
    """The members of the JSON object `prefix` starts, refused naming `source` when it is not one.

    A whole file is parsed as `jsonio.parse_object` parses it (every member, or an error).
    """
    if prefix.whole:
        return PrefixMembers(parse_object(prefix.data, source), True)
    data = prefix.data
    if len(data) > MAX_JSON_BYTES:
        raise InvalidCommitDataError(f"{source}: a prefix of {len(data)} bytes is more than {MAX_JSON_BYTES}")
    if nested_deeper_than(data, MAX_JSON_DEPTH):
        raise InvalidCommitDataError(f"{source}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        # A multi-byte character cut at the end of the prefix is left out, not an error.
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError as error:
        raise InvalidCommitDataError(f"{source}: not valid UTF-8: {error}") from error
    return _members(text, source)


def _members(text: str, source: str) -> PrefixMembers:
    index = _WHITESPACE.match(text).end()  # type: ignore[union-attr]  # matches the empty string
    if index == len(text):
        return PrefixMembers({}, False)
    if text[index] != "{":
        raise InvalidCommitDataError(f"{source}: expected a JSON object, found {text[index]!r}")
    members: dict[str, Any] = {}
    index = _skip(text, index + 1)
    if text.startswith("}", index):
        return PrefixMembers(members, True)
    while index < len(text):
        try:
            name, index = _DECODER.raw_decode(text, index)
            index = _skip(text, index)
            if not isinstance(name, str) or not text.startswith(":", index):
                break  # not a member (damage or the prefix's end: the whole file will tell)
            value, index = _DECODER.raw_decode(text, _skip(text, index + 1))
        except json.JSONDecodeError:
            break  # cut short (or damaged) here: the members before it stand
        except RecursionError:
            raise InvalidCommitDataError(
                f"{source}: JSON nested deeper than {MAX_JSON_DEPTH} levels"
            ) from None
        except ValueError as error:  # e.g. an integer longer than Python converts
            raise InvalidCommitDataError(f"{source}: not valid JSON: {error}") from error
        index = _skip(text, index)
        if index == len(text) or text[index] not in ",}":
            break  # the value may go on past the prefix (a number, say): not complete
        if name in members:
            raise InvalidCommitDataError(f"{source}: member {name!r} appears twice")
        members[name] = value
        if text[index] == "}":
            return PrefixMembers(members, True)
        index = _skip(text, index + 1)
    return PrefixMembers(members, False)


def _skip(text: str, index: int) -> int:
    return _WHITESPACE.match(text, index).end()  # type: ignore[union-attr]  # matches the empty string
