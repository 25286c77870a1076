"""Decoding committed-task manifests (TaskManifest or PendingSet) into commit entries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.iostats import IOStatistics
from airflow_commit_provider.core.formats.manifest import TaskManifest
from airflow_commit_provider.core.formats.partition_rows import read_partition_rows
from airflow_commit_provider.core.formats.pending import PendingSet
from airflow_commit_provider.core.stages.entries import CommitEntry


@dataclass
class LoadedManifest:
    job_id: str
    task_id: str
    task_attempt_id: str
    entries: list[CommitEntry]
    statistics: IOStatistics = field(default_factory=IOStatistics)
    rows: int | None = None
    partition_rows: dict[str, int] | None = None
    """Rows per partition directory, when the task counted them."""

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.entries)


class ManifestDecoder(Protocol):
    """Decodes one committed task's manifest (its bytes, and the key they came from for errors).

    A Protocol rather than a Callable alias: committers hold one as a class attribute, and a
    Callable there would read as a method bound to the committer.
    """

    def __call__(self, data: bytes, source: str, /) -> LoadedManifest: ...


def decode_task_manifest(data: bytes, source: str) -> LoadedManifest:
    manifest = TaskManifest.from_bytes(data, source)
    entries = [CommitEntry(f.dest, f.size, manifest.task_id, source=f.source) for f in manifest.files]
    return LoadedManifest(
        manifest.job_id,
        manifest.task_id,
        manifest.task_attempt_id,
        entries,
        manifest.iostatistics,
        _rows(manifest.extra_data.get("rows"), source),
        read_partition_rows(manifest.extra_data, source),
    )


def decode_pendingset(data: bytes, source: str) -> LoadedManifest:
    pendingset = PendingSet.from_bytes(data, source)
    entries = [
        CommitEntry(c.uri, c.length, pendingset.task_id, upload_id=c.upload_id, etags=c.etags)
        for c in pendingset.commits
    ]
    rows = pendingset.iostatistics.counters.get("rows_written")
    return LoadedManifest(
        pendingset.job_id,
        pendingset.task_id,
        pendingset.task_attempt_id,
        entries,
        pendingset.iostatistics,
        rows,
        read_partition_rows(pendingset.extra_data, source),
    )


def _rows(value: object, source: str) -> int | None:
    """The rows a task recorded in its manifest's `extraData` (a string, as all of it is)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise InvalidCommitDataError(f"{source}: extraData rows {value!r} is not a count of rows")
    return int(value)
