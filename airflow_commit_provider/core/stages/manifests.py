"""Decoding committed-task manifests (TaskManifest or PendingSet) into commit entries, as a stream:
a manifest lists one entry per file its task wrote, and none of them is held (HADOOP-19047)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.json_stream import Readable
from airflow_commit_provider.core.formats.manifest import FileEntry, TaskManifest
from airflow_commit_provider.core.formats.partition_rows import read_partition_rows
from airflow_commit_provider.core.formats.pending import PendingCommit, PendingSet
from airflow_commit_provider.core.iostats import IOStatistics
from airflow_commit_provider.core.stages.entries import CommitEntry

EntrySink = Callable[[CommitEntry], object]


@dataclass
class ManifestSummary:
    """What task and job commit need of one task's manifest besides its entries, which stream
    past (to an `EntrySink`) and are only counted here."""

    job_id: str
    task_id: str
    task_attempt_id: str
    files: int
    total_bytes: int
    statistics: IOStatistics = field(default_factory=IOStatistics)
    rows: int | None = None
    partition_rows: dict[str, int] | None = None
    """Rows per partition directory, when the task counted them."""


class ManifestDecoder(Protocol):
    """Decodes one committed task's manifest from a stream of its bytes (`source` names the file in
    errors), handing each entry to `on_entry` as it is read, as an entry of `task_id` (the task
    the caller expects: it refuses a manifest of another).

    A Protocol rather than a Callable alias: committers hold one as a class attribute, and a
    Callable there would read as a method bound to the committer.
    """

    def __call__(
        self, stream: Readable, source: str, task_id: str, on_entry: EntrySink | None = None, /
    ) -> ManifestSummary: ...


class _Tally:
    """The files and bytes of the entries that went past."""

    def __init__(self, on_entry: EntrySink | None) -> None:
        self.files = 0
        self.total_bytes = 0
        self._on_entry = on_entry

    def add(self, entry: CommitEntry) -> None:
        self.files += 1
        self.total_bytes += entry.size
        if self._on_entry is not None:
            self._on_entry(entry)


def decode_task_manifest(
    stream: Readable, source: str, task_id: str, on_entry: EntrySink | None = None
) -> ManifestSummary:
    tally = _Tally(on_entry)

    def add(file: FileEntry) -> None:
        tally.add(CommitEntry(file.dest, file.size, task_id, source=file.source))

    manifest = TaskManifest.read(stream, source, add)
    return ManifestSummary(
        manifest.job_id,
        manifest.task_id,
        manifest.task_attempt_id,
        tally.files,
        tally.total_bytes,
        manifest.iostatistics,
        _rows(manifest.extra_data.get("rows"), source),
        read_partition_rows(manifest.extra_data, source),
    )


def decode_pendingset(
    stream: Readable, source: str, task_id: str, on_entry: EntrySink | None = None
) -> ManifestSummary:
    tally = _Tally(on_entry)

    def add(commit: PendingCommit) -> None:
        tally.add(
            CommitEntry(commit.uri, commit.length, task_id, upload_id=commit.upload_id, etags=commit.etags)
        )

    pendingset = PendingSet.read(stream, source, add)
    return ManifestSummary(
        pendingset.job_id,
        pendingset.task_id,
        pendingset.task_attempt_id,
        tally.files,
        tally.total_bytes,
        pendingset.iostatistics,
        pendingset.iostatistics.counters.get("rows_written"),
        read_partition_rows(pendingset.extra_data, source),
    )


def _rows(value: object, source: str) -> int | None:
    """The rows a task recorded in its manifest's `extraData` (a string, as all of it is)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        raise InvalidCommitDataError(f"{source}: extraData rows {value!r} is not a count of rows")
    return int(value)
