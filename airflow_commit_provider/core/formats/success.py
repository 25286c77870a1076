"""`_SUCCESS` in the JSON format of Hadoop's SuccessData / ManifestSuccessData.

Beyond Hadoop's fields we add the full list of committed files with sizes (`files`), the
partitions written, totals and row counts. Hadoop's loader ignores these (unknown fields).
`filenames` stays capped at 100 as Hadoop writes it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core.formats.attempts import LostAttempt, read_left_out, read_lost_attempts
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.iostats import IOStatistics
from airflow_commit_provider.core.formats.jsonio import (
    now_millis,
    optional_field,
    optional_millis,
    parse_object,
)
from airflow_commit_provider.core.formats.partition_stats import PartitionStats, read_partition_stats
from airflow_commit_provider.core.formats.phases import CommitPhase

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUCCESS_NAME = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
SUCCESS_FILENAME = "_SUCCESS"
FILENAMES_LIMIT = 100
#: Where Hadoop's committers count the files a job committed (`iostatistics` counters): S3A's
#: CommitterStatisticNames.COMMITTER_COMMITS_COMPLETED and the manifest committer's
#: COMMITTER_FILES_COMMITTED_COUNT.
HADOOP_FILE_COUNTERS = ("committer_commits_completed", "committer_files_committed")
#: Where they count the bytes (S3A's and the manifest committer's COMMITTER_BYTES_COMMITTED).
HADOOP_BYTE_COUNTERS = ("committer_bytes_committed",)


@dataclass(frozen=True)
class CommittedFile:
    uri: str
    size: int


@dataclass
class SuccessData:
    committer: str
    job_id: str
    job_id_source: str = "airflow_commit.job_id"
    timestamp: int = field(default_factory=now_millis)
    hostname: str = field(default_factory=socket.gethostname)
    description: str = ""
    success: bool = True
    state: str = "committed"
    metrics: dict[str, int] = field(default_factory=dict)
    diagnostics: dict[str, str] = field(default_factory=dict)
    filenames: list[str] = field(default_factory=list)
    iostatistics: IOStatistics = field(default_factory=IOStatistics)
    partitions: list[str] = field(default_factory=list)
    file_count: int | None = None
    total_bytes: int | None = None
    rows: int | None = None
    files: list[CommittedFile] | None = None
    """Every committed file, when the writer recorded them (ours always do)."""
    partition_stats: dict[str, PartitionStats] | None = None
    """What each partition directory received, in the job record only (the commit report's)."""
    phases: list[CommitPhase] | None = None
    """The job commit's phases, in the job record only (the commit report's timeline)."""
    table: str | None = None
    """The catalog table the job wrote, fixed before its commit point (None: a path write)."""
    registered_partitions: list[str] | None = None
    """The partitions registered in the table's catalog after the commit; None while pending."""
    lost_attempts: list[LostAttempt] | None = None
    """The task attempts that were not their task's commit, in the job record only (folded in
    before cleanup, `stages.lost_attempts`); None in a record from before they were kept."""
    lost_attempts_left_out: dict[str, int] | None = None
    """Per task, how many more lost attempts there were than the record lists."""

    @property
    def registration_pending(self) -> bool:
        """A table write whose partitions are not yet registered (a driver's `finish_table_write`
        finishes it)."""
        return self.table is not None and self.registered_partitions is None

    @property
    def date(self) -> str:
        return datetime.fromtimestamp(self.timestamp / 1000, tz=timezone.utc).isoformat()

    def header(self) -> dict[str, Any]:
        header: dict[str, Any] = {
            "name": SUCCESS_NAME,
            "timestamp": self.timestamp,
            "date": self.date,
            "hostname": self.hostname,
            "committer": self.committer,
            "description": self.description,
            "jobId": self.job_id,
            "jobIdSource": self.job_id_source,
            "success": self.success,
            "state": self.state,
            "metrics": self.metrics,
            "diagnostics": self.diagnostics,
            "filenames": self.filenames[:FILENAMES_LIMIT],
            "iostatistics": self.iostatistics.to_json(),
            "partitions": self.partitions,
        }
        for key, value in (
            ("fileCount", self.file_count),
            ("totalBytes", self.total_bytes),
            ("rows", self.rows),
            ("table", self.table),
            ("registeredPartitions", self.registered_partitions),
        ):
            if value is not None:
                header[key] = value
        if self.partition_stats is not None:
            header["partitionStats"] = {name: stats.to_json() for name, stats in self.partition_stats.items()}
        if self.phases is not None:
            header["phases"] = [phase.to_json() for phase in self.phases]
        if self.lost_attempts is not None:
            header["lostAttempts"] = [attempt.to_json() for attempt in self.lost_attempts]
        if self.lost_attempts_left_out:
            header["lostAttemptsLeftOut"] = self.lost_attempts_left_out
        return header

    def write_to(self, stream: SupportsWrite[bytes], files: Iterable[CommittedFile] | None = None) -> None:
        """Serialize, streaming `files` so a job of any size is written in bounded memory."""
        files = self.files if files is None else files
        head = json.dumps(self.header(), ensure_ascii=False)
        if files is None:
            stream.write(head.encode("utf-8"))
            return
        stream.write(head[:-1].encode("utf-8"))
        stream.write(b', "files": [')
        for index, committed in enumerate(files):
            prefix = "\n  " if index == 0 else ",\n  "
            entry = json.dumps({"path": committed.uri, "size": committed.size}, ensure_ascii=False)
            stream.write((prefix + entry).encode("utf-8"))
        stream.write(b"\n]}")

    def to_bytes(self) -> bytes:
        import io

        buffer = io.BytesIO()
        self.write_to(buffer)
        return buffer.getvalue()

    def committed_file_count(self) -> tuple[int, bool]:
        """(count, exact). Hadoop's files list at most 100 `filenames`, so a shorter list is complete;
        a full one is exact only when its job counted the files it committed in `iostatistics`."""
        if self.file_count is not None:
            return self.file_count, True
        if self.files is not None:
            return len(self.files), True
        counted = [
            self.iostatistics.counters[name]
            for name in HADOOP_FILE_COUNTERS
            if name in self.iostatistics.counters
        ]
        if counted:
            return max(counted), True
        return len(self.filenames), len(self.filenames) < FILENAMES_LIMIT

    def committed_bytes(self) -> int | None:
        """The bytes the job committed: our total, else what Hadoop's committer counted, if it did."""
        if self.total_bytes is not None:
            return self.total_bytes
        counted = [
            self.iostatistics.counters[name]
            for name in HADOOP_BYTE_COUNTERS
            if name in self.iostatistics.counters
        ]
        return max(counted) if counted else None

    def summary(self) -> dict[str, Any]:
        """A small dict for logs and XCom (never the full file list)."""
        return {
            "job_id": self.job_id,
            "committer": self.committer,
            "files": self.committed_file_count()[0],
            "bytes": self.committed_bytes(),
            "rows": self.rows,
            "partitions": self.partitions,
            "timestamp": self.timestamp,
            "date": self.date,
            "hostname": self.hostname,
        }

    @classmethod
    def from_bytes(cls, data: bytes, source: str) -> SuccessData:
        """Parse ours or Hadoop's; a 0-byte legacy marker is a distinct, explained error."""
        if not data:
            raise LegacySuccessMarkerError(
                f"{source}: 0-byte _SUCCESS marker; it was written by the classic FileOutputCommitter, "
                "which records no job ID or file list"
            )
        obj = parse_object(data, source)
        if obj.get("name") != SUCCESS_NAME:
            raise InvalidCommitDataError(f"{source}: name is {obj.get('name')!r}, expected {SUCCESS_NAME!r}")
        raw_files = optional_field(obj, "files", list, source, None)
        files = None if raw_files is None else [_committed_file(entry, source) for entry in raw_files]
        raw_phases = optional_field(obj, "phases", list, source, None)
        return cls(
            committer=optional_field(obj, "committer", str, source, ""),
            job_id=optional_field(obj, "jobId", str, source, ""),
            job_id_source=optional_field(obj, "jobIdSource", str, source, ""),
            timestamp=optional_millis(obj, "timestamp", source, 0),
            hostname=optional_field(obj, "hostname", str, source, ""),
            description=optional_field(obj, "description", str, source, ""),
            success=optional_field(obj, "success", bool, source, True),
            state=optional_field(obj, "state", str, source, "") or "",
            metrics=optional_field(obj, "metrics", dict, source, {}),
            diagnostics=optional_field(obj, "diagnostics", dict, source, {}),
            filenames=[str(name) for name in optional_field(obj, "filenames", list, source, [])],
            iostatistics=IOStatistics.from_json(
                optional_field(obj, "iostatistics", dict, source, {}), source
            ),
            partitions=[str(p) for p in optional_field(obj, "partitions", list, source, [])],
            file_count=optional_field(obj, "fileCount", int, source, None),
            total_bytes=optional_field(obj, "totalBytes", int, source, None),
            rows=optional_field(obj, "rows", int, source, None),
            files=files,
            partition_stats=read_partition_stats(obj.get("partitionStats"), source),
            phases=None if raw_phases is None else [CommitPhase.from_json(p, source) for p in raw_phases],
            table=optional_field(obj, "table", str, source, None),
            registered_partitions=_registered(obj, source),
            lost_attempts=read_lost_attempts(obj.get("lostAttempts"), source),
            lost_attempts_left_out=read_left_out(obj.get("lostAttemptsLeftOut"), source),
        )

    def iter_files(self) -> Iterator[CommittedFile]:
        return iter(self.files or ())


def _registered(obj: dict[str, Any], source: str) -> list[str] | None:
    registered = optional_field(obj, "registeredPartitions", list, source, None)
    if registered is not None and not all(isinstance(partition, str) for partition in registered):
        raise InvalidCommitDataError(f"{source}: field 'registeredPartitions' must list partition paths")
    return registered


def _committed_file(entry: object, source: str) -> CommittedFile:
    """One `files` entry: its URI and size exactly as written, never coerced from another type."""
    if not isinstance(entry, dict):
        raise InvalidCommitDataError(f"{source}: malformed 'files' entry {entry!r}: not an object")
    path, size = entry.get("path"), entry.get("size")
    if (
        not isinstance(path, str)
        or not path
        or not isinstance(size, int)
        or isinstance(size, bool)
        or size < 0
    ):
        raise InvalidCommitDataError(
            f"{source}: malformed 'files' entry: path {path!r} and size {size!r} must be a URI and a byte count"
        )
    return CommittedFile(path, size)


class LegacySuccessMarkerError(InvalidCommitDataError):
    """The `_SUCCESS` file is the classic committer's empty marker."""
