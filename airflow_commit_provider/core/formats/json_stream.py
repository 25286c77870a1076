"""A JSON object with one large array member, written and read in bounded memory (HADOOP-19047).

A task's manifest lists one entry per file its task wrote (a TaskManifest's `files`, a pendingset's
`commits`): about 750 bytes each, 75 MB for a task of 100k files. Built as one value for
`json.dumps`, or parsed with `json.loads`, such a file costs several times its size at once, in
the task that writes it and again in job commit. Here the array's elements go through one at a
time:

- `write_object` writes the object exactly as `jsonio.dumps` does (the same bytes), taking the
  array's elements from an iterable as it goes;
- `read_object` reads the object from a byte stream a chunk at a time, each member's value and
  each element of a streamed array with `json.JSONDecoder.raw_decode` (C speed), and hands the
  elements to a callback. It holds one chunk and one value at a time.

The guards of `jsonio` apply as they are: a stream longer than `MAX_JSON_BYTES` is refused once it
is, and a value nesting the file deeper than `MAX_JSON_DEPTH` once it is read. One value larger
than `MAX_VALUE_CHARS` is refused too: that, not the file's size, bounds a read's memory. The
result is what `json.loads` of the whole file gives (a member named twice aside: a streamed array
named twice is refused, its first elements having been handed on already). Every failure names
the file, in one line.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import MAX_JSON_BYTES, MAX_JSON_DEPTH, nested_deeper_than

#: Bytes read from the stream at a time.
CHUNK_BYTES = 1 << 20
#: The largest one value read (a member's, or one element's of a streamed array), in characters:
#: what a read holds at most, whatever the file. A pendingset commit of S3's most parts (10,000,
#: each ETag with its checksum, as Hadoop 3.5 writes them) is about 2 MB.
MAX_VALUE_CHARS = 16 << 20

_WHITESPACE = re.compile(r"[ \t\n\r]*")
#: What may follow the part of a number read so far and still belong to it ("1" of "1.5e3").
_NUMBER_TAIL = re.compile(r"[0-9.eE+\-]*\Z")
_DECODER = json.JSONDecoder()
#: `jsonio.dumps`'s encoder: one, not one per element.
_ENCODER = json.JSONEncoder(indent=2, ensure_ascii=False)


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class Writable(Protocol):
    def write(self, data: bytes, /) -> object: ...


@dataclass
class StreamedObject:
    """A JSON object read by `read_object`: its members, but for the streamed arrays, which were
    handed on element by element and are here as how many elements each had."""

    members: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, int] = field(default_factory=dict)

    def require_array(self, name: str, source: str) -> int:
        """How many elements the streamed array `name` had; refused, naming `source`, when the
        object has no such array (the member is missing, or is not an array)."""
        if name not in self.arrays:
            raise InvalidCommitDataError(f"{source}: field {name!r} is missing or not a list")
        return self.arrays[name]


def write_object(
    out: Writable,
    head: Mapping[str, Any],
    name: str,
    elements: Iterable[Any],
    tail: Mapping[str, Any],
) -> int:
    """Write the object `{**head, name: [*elements], **tail}` to `out`, byte for byte as
    `jsonio.dumps` writes it, taking `elements` one at a time; returns how many there were."""
    out.write(b"{")
    for index, (key, value) in enumerate(head.items()):
        out.write(f"{',' if index else ''}\n  {_encoded(key)}: {_encoded(value, 1)}".encode())
    out.write(f"{',' if head else ''}\n  {_encoded(name)}: [".encode())
    count = 0
    for element in elements:
        out.write(f"{',' if count else ''}\n    {_encoded(element, 2)}".encode())
        count += 1
    out.write(b"\n  ]" if count else b"]")
    for key, value in tail.items():
        out.write(f",\n  {_encoded(key)}: {_encoded(value, 1)}".encode())
    out.write(b"\n}")
    return count


def _encoded(value: Any, depth: int = 0) -> str:
    """`value` as `json.dumps(indent=2)` writes it `depth` levels down: every line after the first
    indented by 2 spaces a level (a string never holds a raw newline, so this is exact)."""
    return _ENCODER.encode(value).replace("\n", "\n" + "  " * depth)


def read_object(
    stream: Readable, source: str, arrays: Mapping[str, Callable[[Any], object]]
) -> StreamedObject:
    """The JSON object in `stream` (the file `source`), each element of the members named in
    `arrays` handed to that member's callback as it is read and not kept.

    A member named in `arrays` whose value is not an array is kept with the others (so that the
    caller's field check names it). InvalidCommitDataError, naming `source`, for anything that is
    not one JSON object within the guards; a callback's own errors pass as they are.
    """
    return _Reader(stream, source).read_object(arrays)


def _goes_on(value: Any, text: str, end: int) -> bool:
    """Whether a number that ends at `end` may go on past the text read so far: all that follows it
    could still be part of it."""
    return type(value) in (int, float) and _NUMBER_TAIL.match(text, end) is not None


class _Reader:
    """One pass over a stream of JSON text: the text read and not yet parsed, and where it begins."""

    def __init__(self, stream: Readable, source: str) -> None:
        self._stream = stream
        self._source = source
        # As json.loads reads bytes: UTF-8 with an optional BOM, encoded surrogates passed through.
        self._decode = codecs.getincrementaldecoder("utf-8-sig")("surrogatepass").decode
        self._text = ""
        self._pos = 0
        self._dropped = 0
        """Characters parsed and dropped before `_text` (for the positions in messages)."""
        self._bytes = 0
        self._ended = False

    def read_object(self, arrays: Mapping[str, Callable[[Any], object]]) -> StreamedObject:
        first = self._skip_whitespace()
        if not first:
            if self._bytes == 0:
                raise InvalidCommitDataError(f"{self._source}: file is empty")
            raise self._invalid("Expecting value")
        if first != "{":
            value = self._value(0)
            self._expect_end()
            raise InvalidCommitDataError(
                f"{self._source}: expected a JSON object, got {type(value).__name__}"
            )
        self._pos += 1
        found = StreamedObject()
        if self._skip_whitespace() == "}":
            self._pos += 1
            self._expect_end()
            return found
        seen: set[str] = set()
        while True:
            name = self._name()
            self._expect(":", "':' delimiter")
            handler = arrays.get(name)
            if handler is not None:
                if name in seen:
                    raise InvalidCommitDataError(f"{self._source}: field {name!r} appears more than once")
                seen.add(name)
            if handler is not None and self._skip_whitespace() == "[":
                found.arrays[name] = self._array(handler)
            else:
                found.members[name] = self._value(1)
            if self._expect(",}", "',' delimiter") == "}":
                break
        self._expect_end()
        return found

    # Structure -------------------------------------------------------------------------------
    def _name(self) -> str:
        if self._skip_whitespace() != '"':
            raise self._invalid("Expecting property name enclosed in double quotes")
        name: str = self._value(1)
        return name

    def _array(self, handler: Callable[[Any], object]) -> int:
        self._pos += 1
        if self._skip_whitespace() == "]":
            self._pos += 1
            return 0
        count = 0
        while True:
            handler(self._value(2))
            count += 1
            if self._expect(",]", "',' delimiter") == "]":
                return count

    def _expect(self, allowed: str, what: str) -> str:
        char = self._skip_whitespace()
        if not char or char not in allowed:
            raise self._invalid(f"Expecting {what}")
        self._pos += 1
        return char

    def _expect_end(self) -> None:
        if self._skip_whitespace():
            raise self._invalid("Extra data")

    def _value(self, depth: int) -> Any:
        """The value at the current position, inside `depth` levels of the file's nesting."""
        self._skip_whitespace()
        while True:
            try:
                value, end = _DECODER.raw_decode(self._text, self._pos)
            except RecursionError:
                raise self._too_deep() from None
            except json.JSONDecodeError as error:
                if self._grow():  # the value may go on past the text read so far
                    continue
                raise self._invalid(error.msg, error.pos) from None
            except ValueError as error:  # an integer longer than Python converts
                raise self._invalid(str(error)) from None
            if _goes_on(value, self._text, end) and self._grow():
                continue
            break
        if nested_deeper_than(self._text[self._pos : end], MAX_JSON_DEPTH - depth):
            raise self._too_deep()
        self._pos = end
        return value

    # Text ------------------------------------------------------------------------------------
    def _skip_whitespace(self) -> str:
        """Move past whitespace; the next character, or "" at the end of the stream."""
        while True:
            match = _WHITESPACE.match(self._text, self._pos)
            assert match is not None  # it matches the empty string
            self._pos = match.end()
            if self._pos < len(self._text):
                return self._text[self._pos]
            if not self._read_chunk():
                return ""

    def _grow(self) -> bool:
        """Read on for a value that does not end in the text held: at least as much again as it
        holds of the value; False at the end of the stream. A value past `MAX_VALUE_CHARS` is refused."""
        held = len(self._text) - self._pos
        if held > MAX_VALUE_CHARS:
            raise InvalidCommitDataError(
                f"{self._source}: a value at character {self._dropped + self._pos} is longer than "
                f"the {MAX_VALUE_CHARS} characters one value may have"
            )
        wanted = min(2 * held, MAX_VALUE_CHARS) + 1
        grew = False
        while len(self._text) - self._pos < wanted and self._read_chunk():
            grew = True
        return grew

    def _read_chunk(self) -> bool:
        """Append the next chunk of the stream to the text (dropping what was parsed); False once
        the stream has ended."""
        if self._ended:
            return False
        chunk = self._stream.read(CHUNK_BYTES)
        self._bytes += len(chunk)
        if self._bytes > MAX_JSON_BYTES:
            raise InvalidCommitDataError(
                f"{self._source}: more than the {MAX_JSON_BYTES} bytes a commit file may have"
            )
        try:
            text = self._decode(chunk, final=not chunk)
        except UnicodeDecodeError as error:
            raise self._invalid(f"{error.reason} in the bytes from {self._bytes - len(chunk)}") from None
        self._dropped += self._pos
        self._text = self._text[self._pos :] + text
        self._pos = 0
        self._ended = not chunk
        return True

    def _invalid(self, message: str, position: int | None = None) -> InvalidCommitDataError:
        where = self._dropped + (self._pos if position is None else position)
        return InvalidCommitDataError(
            f"{self._source}: not valid JSON (truncated or corrupt?): {message} (char {where})"
        )

    def _too_deep(self) -> InvalidCommitDataError:
        return InvalidCommitDataError(f"{self._source}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
