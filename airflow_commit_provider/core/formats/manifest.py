"""Hadoop's manifest committer TaskManifest (`files`/`directories`, short entry keys)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.iostats import IOStatistics
from airflow_commit_provider.core.formats.jsonio import dumps, optional_field, parse_object, require_field

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


@dataclass
class TaskManifest:
    job_id: str
    task_id: str
    task_attempt_id: str
    task_attempt_dir: str
    job_attempt_number: int = 0
    files: list[FileEntry] = field(default_factory=list)
    directories: list[dict[str, Any]] = field(default_factory=list)
    extra_data: dict[str, str] = field(default_factory=dict)
    iostatistics: IOStatistics = field(default_factory=IOStatistics)

    def to_bytes(self) -> bytes:
        return dumps(
            {
                "type": TASK_MANIFEST_TYPE,
                "version": TASK_MANIFEST_VERSION,
                "jobId": self.job_id,
                "jobAttemptNumber": self.job_attempt_number,
                "taskID": self.task_id,
                "taskAttemptID": self.task_attempt_id,
                "taskAttemptDir": self.task_attempt_dir,
                "files": [entry.to_json() for entry in self.files],
                "directories": self.directories,
                "extraData": self.extra_data,
                "iostatistics": self.iostatistics.to_json(),
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes, source: str) -> TaskManifest:
        obj = parse_object(data, source)
        if obj.get("type") != TASK_MANIFEST_TYPE:
            raise InvalidCommitDataError(
                f"{source}: type is {obj.get('type')!r}, expected {TASK_MANIFEST_TYPE!r}"
            )
        if obj.get("version") != TASK_MANIFEST_VERSION:
            raise InvalidCommitDataError(
                f"{source}: unsupported version {obj.get('version')!r}, expected {TASK_MANIFEST_VERSION}"
            )
        files = []
        for index, raw in enumerate(require_field(obj, "files", list, source)):
            where = f"{source}: files[{index}]"
            if not isinstance(raw, dict):
                raise InvalidCommitDataError(f"{where} is not an object")
            size = require_field(raw, "z", int, where)
            if size < 0:
                raise InvalidCommitDataError(f"{where}: negative size {size}")
            files.append(
                FileEntry(
                    _non_empty(raw, "s", where),
                    _non_empty(raw, "d", where),
                    size,
                    optional_field(raw, "e", str, where, None),
                )
            )
        return cls(
            job_id=require_field(obj, "jobId", str, source),
            task_id=require_field(obj, "taskID", str, source),
            task_attempt_id=require_field(obj, "taskAttemptID", str, source),
            task_attempt_dir=optional_field(obj, "taskAttemptDir", str, source, ""),
            job_attempt_number=optional_field(obj, "jobAttemptNumber", int, source, 0),
            files=files,
            directories=optional_field(obj, "directories", list, source, []),
            extra_data=optional_field(obj, "extraData", dict, source, {}),
            iostatistics=IOStatistics.from_json(
                optional_field(obj, "iostatistics", dict, source, {}), source
            ),
        )


def _non_empty(raw: dict[str, Any], key: str, where: str) -> str:
    value = require_field(raw, key, str, where)
    if not value:
        raise InvalidCommitDataError(f"{where}: field {key!r} is empty")
    return value
