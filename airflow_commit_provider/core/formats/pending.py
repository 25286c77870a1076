"""S3A's `.pending` (SinglePendingCommit) and `.pendingset` (PendingSet) formats.

A pendingset lists one commit per file its task wrote, so it is written and read as a stream
(`core.formats.json_stream`): `write_pendingset` takes the commits from an iterable, and
`PendingSet.read` hands them on one at a time (HADOOP-19047: S3A builds and parses it whole).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.json_stream import Readable, Writable, read_object, write_object
from airflow_commit_provider.core.formats.jsonio import (
    dumps,
    now_millis,
    optional_field,
    optional_millis,
    parse_object,
    read_iostatistics,
    refuse_oversized,
    require_field,
)
from airflow_commit_provider.core.iostats import IOStatistics

PENDING_VERSION = 2
PENDINGSET_VERSION = 3
_READABLE_PENDINGSET_VERSIONS = (1, 2, 3)


@dataclass(frozen=True)
class PendingCommit:
    """One incomplete multipart upload that job commit completes."""

    uri: str
    bucket: str
    destination_key: str
    upload_id: str
    etags: tuple[str, ...]
    length: int
    created: int = field(default_factory=now_millis)
    text: str = ""
    extra_data: dict[str, str] = field(default_factory=dict)

    def to_json(self, job_id: str = "", task_id: str = "") -> dict[str, Any]:
        return {
            "version": PENDING_VERSION,
            "filename": "",
            "uri": self.uri,
            "uploadId": self.upload_id,
            "bucket": self.bucket,
            "destinationKey": self.destination_key,
            "created": self.created,
            "saved": self.created,
            "date": datetime.fromtimestamp(self.created / 1000, tz=timezone.utc).strftime(
                "%a %b %d %H:%M:%S UTC %Y"
            ),
            "jobId": job_id,
            "taskId": task_id,
            "text": self.text,
            "etags": list(self.etags),
            "length": self.length,
            "extraData": self.extra_data,
            "partCount": len(self.etags),
            "iostatistics": IOStatistics().to_json(),
        }

    def to_bytes(self) -> bytes:
        return dumps(self.to_json())

    def to_record(self) -> tuple[Any, ...]:
        """Its fields as plain values for a spool (`core.sorted_spool`), in the order
        `PendingCommit(*record)` takes them back."""
        return (
            self.uri,
            self.bucket,
            self.destination_key,
            self.upload_id,
            self.etags,
            self.length,
            self.created,
            self.text,
            self.extra_data,
        )

    @classmethod
    def from_json(cls, raw: Any, source: str) -> PendingCommit:
        if not isinstance(raw, dict):
            raise InvalidCommitDataError(f"{source}: pending commit is not an object")
        version = raw.get("version", PENDING_VERSION)
        if version not in (1, PENDING_VERSION):
            raise InvalidCommitDataError(f"{source}: unsupported pending commit version {version!r}")
        found = [_etag(tag) for tag in require_field(raw, "etags", list, source)]
        etags = [tag for tag in found if tag is not None]
        if not etags or len(etags) != len(found):
            raise InvalidCommitDataError(
                f"{source}: etags must be a non-empty list of ETags (strings, or objects with an 'etag')"
            )
        length = require_field(raw, "length", int, source)
        if length < 0:
            raise InvalidCommitDataError(f"{source}: negative length {length}")
        values = {
            name: require_field(raw, name, str, source)
            for name in ("uri", "bucket", "destinationKey", "uploadId")
        }
        for name, value in values.items():
            if not value and not (name == "bucket" and values["uri"].startswith("file:")):
                raise InvalidCommitDataError(f"{source}: field {name!r} is empty")
        return cls(
            uri=values["uri"],
            bucket=values["bucket"],
            destination_key=values["destinationKey"],
            upload_id=values["uploadId"],
            etags=tuple(etags),
            length=length,
            created=optional_millis(raw, "created", source, 0),
            text=optional_field(raw, "text", str, source, ""),
            extra_data=optional_field(raw, "extraData", dict, source, {}),
        )

    @classmethod
    def from_bytes(cls, data: bytes, source: str) -> PendingCommit:
        return cls.from_json(parse_object(data, source), source)


def _etag(tag: Any) -> str | None:
    """A part's ETag as S3A lists it: a string, or (Hadoop 3.5.0 writes these, with the part's
    checksum: `commit.files.UploadEtag`) an object ``{"etag", "checksumAlgorithm", "checksum"}``."""
    if isinstance(tag, dict):
        tag = tag.get("etag")
    return tag if isinstance(tag, str) and tag else None


@dataclass
class PendingSet:
    """The uploads of one committed task attempt."""

    job_id: str
    task_id: str
    task_attempt_id: str
    commits: list[PendingCommit] = field(default_factory=list)
    iostatistics: IOStatistics = field(default_factory=IOStatistics)
    extra_data: dict[str, str] = field(default_factory=dict)
    """More of ``extraData`` than the task's IDs (e.g. its rows per partition)."""

    def to_bytes(self) -> bytes:
        out = io.BytesIO()
        write_pendingset(out, self, self.commits)
        return out.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, source: str) -> PendingSet:
        refuse_oversized(len(data), source)
        commits: list[PendingCommit] = []
        pendingset = cls.read(io.BytesIO(data), source, commits.append)
        pendingset.commits = commits
        return pendingset

    @classmethod
    def read(cls, stream: Readable, source: str, on_commit: Callable[[PendingCommit], object]) -> PendingSet:
        """The pendingset in `stream` (the file `source`), each commit handed to `on_commit` as it
        is read, not kept (its `commits` is empty)."""
        index = 0

        def commit(raw: Any) -> None:
            nonlocal index
            on_commit(PendingCommit.from_json(raw, f"{source}: commits[{index}]"))
            index += 1

        found = read_object(stream, source, {"commits": commit})
        obj = found.members
        version = obj.get("version")
        if version not in _READABLE_PENDINGSET_VERSIONS:
            raise InvalidCommitDataError(
                f"{source}: unsupported pendingset version {version!r}, expected one of {_READABLE_PENDINGSET_VERSIONS}"
            )
        found.require_array("commits", source)
        extra = optional_field(obj, "extraData", dict, source, {})
        return cls(
            job_id=optional_field(obj, "jobId", str, source, ""),
            task_id=str(extra.get("task.id", "")),
            task_attempt_id=str(extra.get("task.attempt.id", "")),
            iostatistics=read_iostatistics(optional_field(obj, "iostatistics", dict, source, {}), source),
            extra_data={
                str(key): str(value)
                for key, value in extra.items()
                if key not in ("task.id", "task.attempt.id")
            },
        )


def write_pendingset(out: Writable, pendingset: PendingSet, commits: Iterable[PendingCommit]) -> int:
    """`pendingset` with `commits` in place of its own list, written to `out` as they come (a task
    spools its commits on local disk rather than hold them); returns how many there were."""
    return write_object(
        out,
        {"version": PENDINGSET_VERSION, "jobId": pendingset.job_id},
        "commits",
        (commit.to_json(pendingset.job_id, pendingset.task_id) for commit in commits),
        {
            "extraData": {
                **pendingset.extra_data,
                "task.id": pendingset.task_id,
                "task.attempt.id": pendingset.task_attempt_id,
            },
            "iostatistics": pendingset.iostatistics.to_json(),
        },
    )


PENDING_SUFFIX = ".pending"
PENDINGSET_SUFFIX = ".pendingset"


def is_pending_file(name: str) -> bool:
    """Whether a file name is one of S3A's upload lists (a task's `.pendingset`, a file's `.pending`)."""
    return name.endswith((PENDINGSET_SUFFIX, PENDING_SUFFIX))


def read_pending_commits(data: bytes, source: str) -> list[PendingCommit]:
    """The uploads a `.pendingset` or `.pending` file lists (`source`, its path, says which).

    S3A's magic committer writes both under its job directory; an abort must find every upload
    they name, whichever kind of file it is.
    """
    if source.endswith(PENDINGSET_SUFFIX):
        return PendingSet.from_bytes(data, source).commits
    return [PendingCommit.from_bytes(data, source)]
