"""`_SUCCESS` in the JSON format of Hadoop's SuccessData / ManifestSuccessData, of a bounded size.

Hadoop's loaders read it (they ignore the fields they do not know); `filenames` stays capped at
`FILENAMES_LIMIT` as Hadoop writes it. Beyond Hadoop's fields we add counts, bytes and rows, the
partitions (inline up to `PARTITIONS_LIMIT`, past it their count and a partition list) and a
reference to the file list of every committed file (`file_list.ListRef`): what grows with the job
lives in those lists, so a `_SUCCESS` and a job record stay small whatever the job wrote.

Fields are written in the order of `docs/bounded-commits.md`, so everything a check needs lies in
the first `SENSOR_READ_BYTES` (`SuccessData.read_head`). Older files of ours (every file inline in
`files`, every partition inline, `registeredPartitions` without a count, `partitionStats` for
every partition) still parse, and so do Hadoop's.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from airflow_commit_provider.core.formats.attempts import LostAttempt, read_left_out, read_lost_attempts
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import ListRef, iter_file_list, iter_partitions
from airflow_commit_provider.core.formats.json_prefix import FilePrefix, parse_prefix, read_prefix
from airflow_commit_provider.core.formats.jsonio import (
    now_millis,
    optional_field,
    optional_millis,
    parse_object,
    read_iostatistics,
    read_json_bytes,
)
from airflow_commit_provider.core.formats.partition_stats import PartitionStats, read_partition_stats
from airflow_commit_provider.core.formats.phases import CommitPhase
from airflow_commit_provider.core.iostats import IOStatistics
from airflow_commit_provider.core.paths import InvalidPathError, StorePath

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

    from airflow_commit_provider.core.store.base import Store

SUCCESS_NAME = "org.apache.hadoop.fs.s3a.commit.files.SuccessData/1"
#: Hadoop's `filenames`: the first files in path order (S3A and the manifest committer cap it at 100 too).
FILENAMES_LIMIT = 100
#: `partitions` (and `registeredPartitions`) inline: at most this many names...
PARTITIONS_LIMIT = 100
#: ...and at most this many bytes of them as JSON; past either, `partitionCount` and `partitionList`.
PARTITIONS_INLINE_BYTES = 16 * 1024
#: What a sensor poke, the trigger and `success verify` read of a `_SUCCESS` or record (one ranged GET).
SENSOR_READ_BYTES = 64 * 1024
#: The lost attempts a record lists in all (`KEPT_PER_TASK` bounds them per task); the rest are counted.
LOST_ATTEMPTS_LIMIT = 200
#: The `lostAttemptsLeftOut` key that counts the attempts of the tasks it does not name, once it
#: names `LOST_ATTEMPTS_LIMIT` tasks.
OTHER_TASKS = "*"
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


class InlinePartitions:
    """The partitions a `_SUCCESS` lists inline, fed one by one in order: the first ones that fit in
    `PARTITIONS_LIMIT` names and `PARTITIONS_INLINE_BYTES`, and how many there were in all.

    The inline list is always the first names of the full sorted list, so it is complete exactly
    when it is as long as the count (`partitionCount`); past the cap a partition list holds them all.
    """

    def __init__(self) -> None:
        self.names: list[str] = []
        self.count = 0
        self._bytes = 2  # the brackets
        self._full = False

    def add(self, partition: str) -> None:
        self.count += 1
        if self._full:
            return
        cost = len(json.dumps(partition, ensure_ascii=False).encode("utf-8")) + 2  # and ", "
        if len(self.names) >= PARTITIONS_LIMIT or self._bytes + cost > PARTITIONS_INLINE_BYTES:
            self._full = True
            return
        self.names.append(partition)
        self._bytes += cost

    @property
    def complete(self) -> bool:
        return len(self.names) == self.count


def inline_partitions(partitions: Iterable[str]) -> list[str]:
    """The first of `partitions` (in their order) that a `_SUCCESS` lists inline."""
    inline = InlinePartitions()
    for partition in partitions:
        inline.add(partition)
    return inline.names


@dataclass
class SuccessData:
    """A `_SUCCESS` (the destination's, or a partition's) and a job record: one format, whose JSON
    field names are these fields' in camelCase (`header` writes them in order)."""

    committer: str
    """The committer's name (`partitioned`, `magic`, ...)."""
    job_id: str
    """The job that committed: its outcome and record are `_airflow_commit/<jobId>.*`."""
    job_id_source: str = "airflow_commit.job_id"
    """Where the job ID came from (Hadoop's field)."""
    timestamp: int = field(default_factory=now_millis)
    """When the file was written, in epoch milliseconds (`date` is the same instant in ISO 8601)."""
    hostname: str = field(default_factory=socket.gethostname)
    """The host that wrote it (the driver's)."""
    description: str = ""
    """A human-readable line naming the committer."""
    success: bool = True
    """Hadoop's flag: true in every file ours write; a check refuses a file where it is false."""
    state: str = "committed"
    """`committed` in every file ours write (a 0-byte `_SUCCESS` of Spark's classic protocol reads as
    a legacy marker, which records no job)."""
    metrics: dict[str, int] = field(default_factory=dict)
    """Hadoop's metrics map (empty in ours)."""
    diagnostics: dict[str, str] = field(default_factory=dict)
    """Text by name: the options the job ran with (`airflow_commit.*`), the stage, the principal."""
    filenames: list[str] = field(default_factory=list)
    """The first `FILENAMES_LIMIT` committed files' URIs in path order, as Hadoop writes them."""
    iostatistics: IOStatistics = field(default_factory=IOStatistics)
    """Store requests and committer stages counted and timed, in Hadoop's IOStatistics layout."""
    partitions: list[str] = field(default_factory=list)
    """The partitions written, sorted: all of them, or past the caps the first ones
    (`InlinePartitions`), and then `partition_count` and `partition_list` say the rest. Written as
    given: the writer caps them."""
    file_count: int | None = None
    """How many files the job committed (in this partition, for a partition's `_SUCCESS`)."""
    total_bytes: int | None = None
    """Their bytes."""
    rows: int | None = None
    """Their rows, when the writer counted them."""
    files: list[CommittedFile] | None = None
    """Every committed file inline, as older files of ours list them; `file_list` replaces it."""
    partition_stats: dict[str, PartitionStats] | None = None
    """What each partition directory received, in the job record only (the commit report's); for
    the inline partitions only, when there is a partition list."""
    phases: list[CommitPhase] | None = None
    """The job commit's phases, in the job record only (the commit report's timeline)."""
    table: str | None = None
    """The catalog table the job wrote, fixed before its commit point (None: a path write)."""
    registered_partitions: list[str] | None = None
    """The partitions registered in the table's catalog after the commit (the first ones, capped as
    `partitions` is); None while pending."""
    lost_attempts: list[LostAttempt] | None = None
    """The task attempts that were not their task's commit, in the job record only (folded in
    before cleanup, `stages.lost_attempts`); None when no attempt was lost, and in a record from
    before they were kept. At most
    `LOST_ATTEMPTS_LIMIT` are written; the rest are counted in `lost_attempts_left_out`."""
    lost_attempts_left_out: dict[str, int] | None = None
    """Per task, how many more lost attempts there were than the record lists (`OTHER_TASKS`:
    those of the tasks not named)."""
    partition_count: int | None = None
    """How many partitions the job wrote; None means `partitions` lists them all."""
    partition_list: ListRef | None = None
    """Every partition with its counts, when `partitions` does not list them all."""
    file_list: ListRef | None = None
    """Every committed file, in the file list (`core.formats.file_list`)."""
    registered_partition_count: int | None = None
    """How many partitions were registered; None means `registered_partitions` lists them all."""
    read_fields: frozenset[str] | None = field(default=None, compare=False)
    """The JSON fields this was read from, when it was built from a prefix of its file (`read_head`);
    None when the whole file was read."""

    @property
    def registration_pending(self) -> bool:
        """A table write whose partitions are not yet registered (a driver's `finish_table_write`
        finishes it)."""
        return (
            self.table is not None
            and self.registered_partitions is None
            and self.registered_partition_count is None
        )

    @property
    def date(self) -> str:
        """`timestamp` in ISO 8601, UTC, for people."""
        return datetime.fromtimestamp(self.timestamp / 1000, tz=timezone.utc).isoformat()

    @property
    def total_partitions(self) -> int:
        """How many partitions the job wrote, inline or not."""
        return len(self.partitions) if self.partition_count is None else self.partition_count

    @property
    def partitions_complete(self) -> bool:
        """Whether `partitions` lists every partition the job wrote."""
        return len(self.partitions) >= self.total_partitions

    @property
    def lists_all_files(self) -> bool:
        """Whether this names every committed file (ours do; Hadoop's name the first 100)."""
        return self.files is not None or self.file_list is not None

    def header(self) -> dict[str, Any]:
        """The fields in the order of `docs/bounded-commits.md`: what a check needs comes first."""
        header: dict[str, Any] = {
            "name": SUCCESS_NAME,
            "jobId": self.job_id,
            "jobIdSource": self.job_id_source,
            "committer": self.committer,
            "timestamp": self.timestamp,
            "date": self.date,
            "hostname": self.hostname,
            "success": self.success,
            "state": self.state,
            "description": self.description,
        }
        for key, value in (
            ("fileCount", self.file_count),
            ("totalBytes", self.total_bytes),
            ("rows", self.rows),
            ("table", self.table),
        ):
            if value is not None:
                header[key] = value
        if self.registered_partitions is not None or self.registered_partition_count is not None:
            registered = self.registered_partitions or []
            header["registeredPartitionCount"] = (
                len(registered)
                if self.registered_partition_count is None
                else self.registered_partition_count
            )
            header["registeredPartitions"] = inline_partitions(registered)
        header["partitionCount"] = self.total_partitions
        header["partitions"] = self.partitions
        if self.partition_list is not None:
            header["partitionList"] = self.partition_list.to_json()
        elif not self.partitions_complete:
            raise ValueError(
                f"_SUCCESS of job {self.job_id}: {len(self.partitions)} of {self.total_partitions} "
                "partitions inline needs the partition list of them all"
            )
        if self.file_list is not None:
            header["fileList"] = self.file_list.to_json()
        header["filenames"] = self.filenames[:FILENAMES_LIMIT]
        header["metrics"] = self.metrics
        header["diagnostics"] = self.diagnostics
        header["iostatistics"] = self.iostatistics.to_json()
        if self.phases is not None:
            header["phases"] = [phase.to_json() for phase in self.phases]
        if self.partition_stats is not None:
            inline = set(self.partitions) if not self.partitions_complete else None
            header["partitionStats"] = {
                name: stats.to_json()
                for name, stats in self.partition_stats.items()
                if inline is None or name in inline
            }
        if self.lost_attempts is not None:
            listed, left_out = self._bounded_lost_attempts()
            header["lostAttempts"] = [attempt.to_json() for attempt in listed]
            if left_out:
                header["lostAttemptsLeftOut"] = left_out
        return header

    def _bounded_lost_attempts(self) -> tuple[list[LostAttempt], dict[str, int]]:
        """The first `LOST_ATTEMPTS_LIMIT` lost attempts, and per task how many more there were, for
        at most `LOST_ATTEMPTS_LIMIT` tasks (the other tasks' under `OTHER_TASKS`)."""
        attempts = self.lost_attempts or []
        left_out = dict(self.lost_attempts_left_out or {})
        for attempt in attempts[LOST_ATTEMPTS_LIMIT:]:
            left_out[attempt.task_id] = left_out.get(attempt.task_id, 0) + 1
        if len(left_out) > LOST_ATTEMPTS_LIMIT:
            named = sorted(task for task in left_out if task != OTHER_TASKS)[: LOST_ATTEMPTS_LIMIT - 1]
            others = sum(count for task, count in left_out.items() if task not in named)
            left_out = {**{task: left_out[task] for task in named}, OTHER_TASKS: others}
        return attempts[:LOST_ATTEMPTS_LIMIT], left_out

    def write_to(self, stream: SupportsWrite[bytes], files: Iterable[CommittedFile] | None = None) -> None:
        """Serialize; `files` (or `self.files`) are streamed inline after every other field, as
        older files of ours list them."""
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
        if self.file_list is not None:
            return self.file_list.entries, True
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
        """A small dict for logs and XCom (never the full file list, nor past the inline partitions)."""
        return {
            "job_id": self.job_id,
            "committer": self.committer,
            "files": self.committed_file_count()[0],
            "bytes": self.committed_bytes(),
            "rows": self.rows,
            "partitions": self.partitions,
            "partition_count": self.total_partitions,
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
        return cls._from_members(parse_object(data, source), source, None)

    @classmethod
    def from_prefix(cls, prefix: FilePrefix, source: str) -> SuccessData:
        """Parse the first bytes of a file (`json_prefix.read_prefix`): the fields complete in them,
        named in `read_fields` (None when the prefix held the whole object). The others hold their
        defaults, so a caller looks at `read_fields` first; `read_head` does, for a check."""
        if prefix.whole:
            return cls.from_bytes(prefix.data, source)
        parsed = parse_prefix(prefix, source)
        if "name" not in parsed.members and not parsed.complete:
            raise InvalidCommitDataError(
                f"{source}: no complete 'name' in its first {len(prefix.data)} bytes, "
                f"expected {SUCCESS_NAME!r} first"
            )
        return cls._from_members(
            parsed.members, source, None if parsed.complete else frozenset(parsed.members)
        )

    @classmethod
    def read_head(cls, store: Store, path: StorePath) -> SuccessData:
        """What a check needs of a `_SUCCESS` or record at `path`: ours in one ranged GET of at most
        `SENSOR_READ_BYTES`, whose first fields (up to `fileList`) are always in it; older files of
        ours and Hadoop's, when larger, are then read whole (up to `MAX_JSON_BYTES`), as before.

        Raises FileNotFoundInStoreError if there is no such file, InvalidCommitDataError naming it if
        it cannot be trusted (LegacySuccessMarkerError for a 0-byte marker).
        """
        head = cls.from_prefix(read_prefix(store, path, SENSOR_READ_BYTES), str(path))
        if head.read_fields is None or "fileList" in head.read_fields:
            return head
        return cls.from_bytes(read_json_bytes(store, path), str(path))

    @classmethod
    def _from_members(
        cls, obj: dict[str, Any], source: str, read_fields: frozenset[str] | None
    ) -> SuccessData:
        if obj.get("name") != SUCCESS_NAME:
            raise InvalidCommitDataError(f"{source}: name is {obj.get('name')!r}, expected {SUCCESS_NAME!r}")
        raw_files = optional_field(obj, "files", list, source, None)
        files = None if raw_files is None else [_committed_file(entry, source) for entry in raw_files]
        raw_phases = optional_field(obj, "phases", list, source, None)
        partitions = _names(obj, "partitions", source, []) or []
        registered = _names(obj, "registeredPartitions", source, None)
        partition_count = _count_of(obj, "partitionCount", partitions, source)
        partition_list = ListRef.read_field(obj, "partitionList", source)
        if (
            partition_count is not None
            and partition_count > len(partitions)
            and partition_list is None
            and (read_fields is None or "fileList" in read_fields)  # else it may lie past the prefix
        ):
            raise InvalidCommitDataError(
                f"{source}: lists {len(partitions)} of {partition_count} partitions and no 'partitionList'"
            )
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
            iostatistics=read_iostatistics(optional_field(obj, "iostatistics", dict, source, {}), source),
            partitions=partitions,
            file_count=_count(obj, "fileCount", source),
            total_bytes=_count(obj, "totalBytes", source),
            rows=_count(obj, "rows", source),
            files=files,
            partition_stats=read_partition_stats(obj.get("partitionStats"), source),
            phases=None if raw_phases is None else [CommitPhase.from_json(p, source) for p in raw_phases],
            table=optional_field(obj, "table", str, source, None),
            registered_partitions=registered,
            lost_attempts=read_lost_attempts(obj.get("lostAttempts"), source),
            lost_attempts_left_out=read_left_out(obj.get("lostAttemptsLeftOut"), source),
            partition_count=partition_count,
            partition_list=partition_list,
            file_list=ListRef.read_field(obj, "fileList", source),
            registered_partition_count=_count_of(obj, "registeredPartitionCount", registered, source),
            read_fields=read_fields,
        )

    def iter_files(self) -> Iterator[CommittedFile]:
        """The files listed inline (older files of ours); `iter_all_files` reads the file list too."""
        return iter(self.files or ())

    # The lists beside it ----------------------------------------------------------------------------
    def list_root(self, destination: StorePath) -> StorePath:
        """What this file's list references are relative to, for the `destination` it was found in: the
        job's destination. That is `destination`, unless this is a partition marker (one partition,
        which `destination` ends with), whose destination is `destination` minus its partition.

        A job whose destination itself ends with the one partition it wrote (files at `t/p/p/`)
        cannot be told from its marker; its `_SUCCESS` then names a list that is not there, and the
        reader's error names it.
        """
        partition = self._marker_partition(destination)
        if partition is None:
            return destination
        key = destination.key.rstrip("/")
        return StorePath(destination.scheme, destination.bucket, key[: -len(partition) - 1])

    def _marker_partition(self, destination: StorePath) -> str | None:
        if len(self.partitions) != 1 or self.total_partitions != 1:
            return None
        partition = self.partitions[0].strip("/")
        return partition if partition and destination.key.rstrip("/").endswith("/" + partition) else None

    def iter_all_files(
        self, store: Store, destination: StorePath, source: str | None = None
    ) -> Iterator[CommittedFile]:
        """Every file this `_SUCCESS` (found in `destination`) vouches for: inline in older files of
        ours, else from the file list (checked whole first; for a partition marker, the rows of its
        partition). InvalidCommitDataError when it lists neither (Hadoop's name only 100 files)."""
        if self.files is not None:
            yield from self.files
            return
        if self.file_list is None:
            raise InvalidCommitDataError(
                f"{source or destination}: lists no files (neither 'files' nor a 'fileList'); "
                f"its 'filenames' name the first {FILENAMES_LIMIT}"
            )
        partition = self._marker_partition(destination)
        root = self.list_root(destination)
        inside = _inside(root)
        for entry in iter_file_list(store, root, self.file_list, source):
            if not inside(entry.uri):
                raise InvalidCommitDataError(
                    f"{source or destination}: its file list names {entry.uri!r}, which is outside {root}"
                )
            if partition is None or entry.partition == partition:
                yield CommittedFile(entry.uri, entry.size)

    def iter_all_partitions(
        self, store: Store, destination: StorePath, source: str | None = None
    ) -> Iterator[str]:
        """Every partition the job wrote: inline when complete, else from the partition list."""
        if self.partitions_complete:
            yield from self.partitions
            return
        for partition, _ in self._listed_partitions(store, destination, source):
            yield partition

    def iter_partition_stats(
        self, store: Store, destination: StorePath, source: str | None = None
    ) -> Iterator[tuple[str, PartitionStats]]:
        """Every partition with what it received: the record's inline `partitionStats` when the
        partitions are all inline, else the partition list."""
        if self.partitions_complete:
            yield from sorted((self.partition_stats or {}).items())
            return
        yield from self._listed_partitions(store, destination, source)

    def _listed_partitions(
        self, store: Store, destination: StorePath, source: str | None
    ) -> Iterator[tuple[str, PartitionStats]]:
        if self.partition_list is None:
            raise InvalidCommitDataError(
                f"{source or destination}: lists {len(self.partitions)} of {self.total_partitions} "
                "partitions and no 'partitionList'"
            )
        yield from iter_partitions(store, self.list_root(destination), self.partition_list, source)


def _inside(root: StorePath) -> Callable[[str], bool]:
    """Whether a listed URI lies under `root`: a `_SUCCESS` vouches for its own table's files only.
    URIs as `StorePath.uri` writes them are checked by their text; any other spelling is parsed."""
    scheme, _, rest = root.uri().partition("://")
    prefix = rest.rstrip("/") + "/"

    def inside(uri: str) -> bool:
        uri_scheme, _, uri_rest = uri.partition("://")
        if (
            (uri_scheme == "file") == (scheme == "file")
            and uri_rest.startswith(prefix)
            and "/." not in uri_rest
        ):
            return True
        try:
            return StorePath.from_uri(uri).is_under(root)
        except InvalidPathError:
            return False

    return inside


def _names(obj: dict[str, Any], name: str, source: str, default: list[str] | None) -> list[str] | None:
    """A list of partition paths (`partitions`, `registeredPartitions`), refused unless it is one."""
    names = optional_field(obj, name, list, source, default)
    if names is not None and not all(isinstance(partition, str) for partition in names):
        raise InvalidCommitDataError(f"{source}: field {name!r} must list partition paths")
    return names


def _count(obj: dict[str, Any], name: str, source: str) -> int | None:
    value = optional_field(obj, name, int, source, None)
    if value is not None and (isinstance(value, bool) or value < 0):
        raise InvalidCommitDataError(f"{source}: field {name!r} is not a count: {value!r}")
    return value


def _count_of(obj: dict[str, Any], name: str, listed: list[str] | None, source: str) -> int | None:
    """A count of what `listed` lists the first of: at least as many (None when absent, as in older
    files, whose lists are complete)."""
    count = _count(obj, name, source)
    if count is not None and count < len(listed or ()):
        raise InvalidCommitDataError(
            f"{source}: field {name!r} is {count}, fewer than the {len(listed or ())} listed"
        )
    return count


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
