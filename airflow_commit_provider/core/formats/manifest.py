"""Hadoop's manifest committer TaskManifest (`files`/`directories`, short entry keys).

A manifest lists one entry per file its task wrote, so it is written and read as a stream
(`core.formats.json_stream`): `write_task_manifest` takes the entries from an iterable, and
`TaskManifest.read` hands them on one at a time.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.json_stream import Readable, Writable, read_object, write_object
from airflow_commit_provider.core.formats.jsonio import (
    optional_field,
    read_iostatistics,
    refuse_oversized,
    require_field,
)
from airflow_commit_provider.core.iostats import IOStatistics

TASK_MANIFEST_TYPE = "org.apache.hadoop.mapreduce.lib.output.committer.manifest.files.TaskManifest/1"
TASK_MANIFEST_VERSION = 1


@dataclass(frozen=True)
class FileEntry:
    """One file to rename at job commit: source URI, destination URI, size, optional ETag."""

    source: str
    dest: str
    size: int
    etag: str | None = None

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"s": self.source, "d": self.dest, "z": self.size}
        if self.etag:
            entry["e"] = self.etag
        return entry

    def to_record(self) -> tuple[str, str, int, str | None]:
        """Its fields as plain values for a spool (`core.sorted_spool`), in the order
        `FileEntry(*record)` takes them back."""
        return (self.source, self.dest, self.size, self.etag)


@dataclass
class TaskManifest:
    job_id: str
    task_id: str
    task_attempt_id: str
    task_attempt_dir: str
    job_attempt_number: int = 0
    files: list[FileEntry] = field(default_factory=list)
    directories: list[Any] = field(default_factory=list)
    extra_data: dict[str, str] = field(default_factory=dict)
    iostatistics: IOStatistics = field(default_factory=IOStatistics)

    def to_bytes(self) -> bytes:
        out = io.BytesIO()
        write_task_manifest(out, self, self.files)
        return out.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, source: str) -> TaskManifest:
        refuse_oversized(len(data), source)
        files: list[FileEntry] = []
        directories: list[Any] = []
        manifest = cls.read(io.BytesIO(data), source, files.append, directories.append)
        manifest.files, manifest.directories = files, directories
        return manifest

    @classmethod
    def read(
        cls,
        stream: Readable,
        source: str,
        on_file: Callable[[FileEntry], object],
        on_directory: Callable[[Any], object] | None = None,
    ) -> TaskManifest:
        """The manifest in `stream` (the file `source`), each file entry handed to `on_file` as it
        is read, and each directory entry (which job commit does not use) to `on_directory`; neither
        is kept (its `files` and `directories` are empty)."""
        index = 0

        def file_entry(raw: Any) -> None:
            nonlocal index
            on_file(_file_entry(raw, f"{source}: files[{index}]"))
            index += 1

        found = read_object(stream, source, {"files": file_entry, "directories": on_directory or _ignored})
        obj = found.members
        if obj.get("type") != TASK_MANIFEST_TYPE:
            raise InvalidCommitDataError(
                f"{source}: type is {obj.get('type')!r}, expected {TASK_MANIFEST_TYPE!r}"
            )
        if obj.get("version") != TASK_MANIFEST_VERSION:
            raise InvalidCommitDataError(
                f"{source}: unsupported version {obj.get('version')!r}, expected {TASK_MANIFEST_VERSION}"
            )
        found.require_array("files", source)
        if "directories" not in found.arrays:
            optional_field(obj, "directories", list, source, [])
        return cls(
            job_id=require_field(obj, "jobId", str, source),
            task_id=require_field(obj, "taskID", str, source),
            task_attempt_id=require_field(obj, "taskAttemptID", str, source),
            task_attempt_dir=optional_field(obj, "taskAttemptDir", str, source, ""),
            job_attempt_number=optional_field(obj, "jobAttemptNumber", int, source, 0),
            extra_data=optional_field(obj, "extraData", dict, source, {}),
            iostatistics=read_iostatistics(optional_field(obj, "iostatistics", dict, source, {}), source),
        )


def write_task_manifest(out: Writable, manifest: TaskManifest, files: Iterable[FileEntry]) -> int:
    """`manifest` with `files` in place of its own list, written to `out` as they come (a task
    spools its entries on local disk rather than hold them); returns how many there were."""
    return write_object(
        out,
        {
            "type": TASK_MANIFEST_TYPE,
            "version": TASK_MANIFEST_VERSION,
            "jobId": manifest.job_id,
            "jobAttemptNumber": manifest.job_attempt_number,
            "taskID": manifest.task_id,
            "taskAttemptID": manifest.task_attempt_id,
            "taskAttemptDir": manifest.task_attempt_dir,
        },
        "files",
        (entry.to_json() for entry in files),
        {
            "directories": manifest.directories,
            "extraData": manifest.extra_data,
            "iostatistics": manifest.iostatistics.to_json(),
        },
    )


def _file_entry(raw: Any, where: str) -> FileEntry:
    if not isinstance(raw, dict):
        raise InvalidCommitDataError(f"{where} is not an object")
    size = require_field(raw, "z", int, where)
    if size < 0:
        raise InvalidCommitDataError(f"{where}: negative size {size}")
    return FileEntry(
        _non_empty(raw, "s", where),
        _non_empty(raw, "d", where),
        size,
        optional_field(raw, "e", str, where, None),
    )


def _ignored(_: Any) -> None:
    """What becomes of a directory entry read for job commit, which has no use for them."""


def _non_empty(raw: dict[str, Any], key: str, where: str) -> str:
    value = require_field(raw, key, str, where)
    if not value:
        raise InvalidCommitDataError(f"{where}: field {key!r} is empty")
    return value
