"""Loading and verifying a job's `_SUCCESS` or job record, shared by the CLI, sensor, trigger and operator.

A `_SUCCESS` file only proves that *some* job finished; downstream work usually needs to know
it was *this* job, from an expected committer, recently, with enough output. Verification
returns every failed condition as a sentence, so callers can say why, not just "no".

A table's `_SUCCESS` is rewritten by every job that commits to it, so with parallel backfills it
often names a later job. Each committed job also leaves a small record of its own under
`<destination>/_airflow_commit/` (`JobLayout.job_record`), in the same SuccessData format.
`SuccessExpectations.check` is the one place that decides which of the two proves a given job:
the `_SUCCESS` when it names the job (one GET), else the job's record (a second GET).

Each read is one ranged GET of at most `SENSOR_READ_BYTES` (`SuccessData.read_head`), whatever the
job wrote: ours keep what a check needs in their first 64 KiB and name their file and partition
lists instead of listing what they hold (`docs/bounded-commits.md`). Only Hadoop's files and older
ones of ours, larger than that, are read whole, as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Any, Literal

from airflow_commit_provider.core.committers.registry import (
    COMMITTERS,
    committer_named_in_success,
    committer_spelling,
)
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import ListRef, find_partitions
from airflow_commit_provider.core.formats.success import (
    FILENAMES_LIMIT,
    LegacySuccessMarkerError,
    SuccessData,
)
from airflow_commit_provider.core.job_records import job_record_path, load_job_record
from airflow_commit_provider.core.layout import RECORDS_DIR, SUCCESS_FILENAME, JobLayout, validate_job_id
from airflow_commit_provider.core.paths import InvalidPathError, StorePath
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, Store

#: `state` of the SuccessData that stands for a classic 0-byte marker (only with allow_legacy).
LEGACY_STATE = "legacy-marker"

__all__ = [
    "LEGACY_STATE",
    "SUMMARY_PARTITIONS",
    "CheckState",
    "SuccessCheck",
    "SuccessExpectations",
    "WrittenPartitions",
    "hadoop_listed_path",
    "is_legacy",
    "load_success",
    "parse_newer_than",
    "partitions_summary",
    "success_path",
    "vouches_for_its_own",
    "with_hadoop_partitions",
]


def success_path(destination: str | os.PathLike[str] | StorePath) -> StorePath:
    """The `_SUCCESS` file of a destination, or the path itself if it names one."""
    path = StorePath.parse(destination)
    return path if path.name == SUCCESS_FILENAME else path.join(SUCCESS_FILENAME)


def load_success(
    store: Store, destination: str | os.PathLike[str] | StorePath, allow_legacy: bool = False
) -> SuccessData:
    """Read and parse the `_SUCCESS` of `destination` (or of the `_SUCCESS` file itself).

    One ranged GET of at most `SENSOR_READ_BYTES` for any `_SUCCESS` of ours, whatever its job
    wrote: everything a check needs (job, committer, time, counts, the partitions within the
    inline cap, table and registration) lies in its first 64 KiB, and the rest is in lists beside
    it (`SuccessData.read_head`). Hadoop's (S3A's, the manifest committer's) and older ones of ours
    (every file inline in `files`) may keep what a check needs past that prefix: when larger, they
    are read whole, up to `MAX_JSON_BYTES`, as before (a second GET).

    Raises FileNotFoundInStoreError if it is absent, InvalidCommitDataError if it is corrupt, lists
    files outside its destination or names lists that are not its job's (`vouches_for_its_own`), and
    LegacySuccessMarkerError for a classic 0-byte marker unless `allow_legacy`; then a SuccessData
    with `state == LEGACY_STATE`, no job ID and the file's modification time is returned, so a
    job-ID check on it fails with a reason instead of passing silently.
    """
    path = success_path(destination)
    try:
        parsed = vouches_for_its_own(SuccessData.read_head(store, path), path, path.parent)
        return with_hadoop_partitions(parsed, path.parent)
    except LegacySuccessMarkerError:
        if not allow_legacy:
            raise
    status = store.get_status(path)
    if status is None:  # deleted between read and stat
        raise FileNotFoundInStoreError(f"no such file: {path}")
    return SuccessData(
        committer="",
        job_id="",
        job_id_source="",
        timestamp=int(status.modified * 1000),
        hostname="",
        description="0-byte _SUCCESS marker of the classic FileOutputCommitter",
        state=LEGACY_STATE,
    )


def vouches_for_its_own(data: SuccessData, path: StorePath, destination: StorePath) -> SuccessData:
    """`data`, read from `path` in `destination`, unless it vouches for what is not its own: a
    `_SUCCESS` (or a job's record) vouches for its own table's files only, so one copied or forged
    to name another table's never proves a commit.

    What it lists inline must lie under `destination`: every `files` entry (older files of ours) and
    every `filenames` entry (Hadoop's field, read as Hadoop's committers write it). A list it names
    (`fileList`, `partitionList`) must be its own job's, under the records directory of the
    destination (`JobLayout.lists_dir`): the list's rows are checked when it is read, not here,
    since a check reads only the head. For a job record, `destination` is its job's.

    Raises InvalidCommitDataError naming the file (`path`) and the first offending entry.
    """
    for entry in data.iter_files():
        if not _lies_under(entry.uri, StorePath.from_uri, destination):
            raise InvalidCommitDataError(f"{path}: lists {entry.uri!r}, which is outside {destination}")
    for name in data.filenames:
        if not _lies_under(name, lambda listed: hadoop_listed_path(listed, destination), destination):
            raise InvalidCommitDataError(
                f"{path}: its 'filenames' name {name!r}, which is outside {destination}"
            )
    root = data.list_root(destination)
    for field, ref, expected in (
        ("fileList", data.file_list, JobLayout.file_list),
        ("partitionList", data.partition_list, JobLayout.partition_list),
    ):
        if ref is not None and ref.path != _own_list(root, data.job_id, ref, expected):
            raise InvalidCommitDataError(
                f"{path}: its {field!r} names {ref.path!r}, which is not a list of job "
                f"{data.job_id!r} under {root.join(RECORDS_DIR)}"
            )
    return data


def _lies_under(listed: str, parse: Callable[[str], StorePath], destination: StorePath) -> bool:
    try:
        return parse(listed).is_under(destination)
    except InvalidPathError:
        return False


def _own_list(
    root: StorePath, job_id: str, ref: ListRef, path_of: Callable[[JobLayout, str], StorePath]
) -> str | None:
    """Where job `job_id` keeps the list `ref` names, relative to `root` (None: no such job)."""
    try:
        return path_of(JobLayout(root, validate_job_id(job_id)), ref.sha256).relative_to(root)
    except ValueError:
        return None


def is_legacy(data: SuccessData) -> bool:
    return data.state == LEGACY_STATE


def with_hadoop_partitions(data: SuccessData, destination: StorePath) -> SuccessData:
    """`data` with the partitions its `filenames` lie in, when it is Hadoop's (which lists no
    partitions): their directories relative to `destination`, the one the `_SUCCESS` is in.

    Hadoop lists at most 100 files, so past that these are the partitions of the first 100.
    """
    if data.lists_all_files or data.partitions or not data.filenames:
        return data
    partitions: dict[str, None] = {}
    for name in data.filenames:
        try:
            relative = hadoop_listed_path(name, destination).relative_to(destination)
        except ValueError:
            continue  # a file outside the destination names no partition of it
        partition = relative.rpartition("/")[0]
        if partition:
            partitions.setdefault(partition)
    return replace(data, partitions=list(partitions))


def hadoop_listed_path(name: str, destination: StorePath) -> StorePath:
    """A Hadoop `filenames` entry as a path: the manifest committer lists percent-encoded URIs
    (``file:/...`` included), S3A lists ``/<key>``, the raw key in the destination's bucket."""
    if name.startswith("file:/") and not name.startswith("file://"):
        name = "file://" + name[len("file:") :]
    if "://" in name:
        return StorePath.from_uri(name)
    if destination.is_local:
        return StorePath("file", "", name)
    return StorePath(destination.scheme, destination.bucket, name.lstrip("/"))


def _partition_key(partition: str) -> str:
    return partition.strip("/")


def _committer_matches(recorded: str, wanted: Iterable[str]) -> bool:
    """Whether the committer a `_SUCCESS` names is one of `wanted`, by our registry's names:
    Hadoop's manifest committer writes its class name, ``staging`` is the directory committer."""

    def canonical(name: str) -> str:
        return committer_named_in_success(name) or committer_spelling(name)

    return canonical(recorded) in {canonical(name) for name in wanted}


# The one check ----------------------------------------------------------------------------------
CheckState = Literal["missing", "rejected", "accepted"]

#: Partitions an XCom summary lists; its `partition_count` is always exact.
SUMMARY_PARTITIONS = 100


def partitions_summary(partitions: Iterable[str] | None, count: int | None = None) -> dict[str, Any]:
    """The partitions part of an XCom summary: XCom stays small however many partitions a job wrote.
    `count` is how many there are when `partitions` lists only the first (`SuccessData.partitions`)."""
    listed = list(partitions or ())
    return {
        "partitions": listed[:SUMMARY_PARTITIONS],
        "partition_count": len(listed) if count is None else count,
    }


@dataclass(frozen=True)
class SuccessCheck:
    """One look at a destination for (optionally) one job: what was found and whether it qualifies.

    ``missing``: no `_SUCCESS` and, with a job ID, no record of the job either. ``rejected``: a
    valid file that fails an expectation (`reasons`). ``accepted``: `data` meets every expectation.
    `path` is the file judged: the job's record when `from_record`, else the `_SUCCESS`.
    """

    state: CheckState
    path: StorePath
    data: SuccessData | None = None
    reasons: tuple[str, ...] = ()
    from_record: bool = False

    @property
    def source(self) -> str:
        return "job record" if self.from_record else SUCCESS_FILENAME

    @property
    def destination(self) -> StorePath:
        """The destination whose files the judged file vouches for: the `_SUCCESS`'s own, or the
        destination of the job whose record it is (`<destination>/_airflow_commit/<job>...`)."""
        return self.path.parent.parent if self.from_record else self.path.parent

    def describe(self) -> str:
        if self.state == "missing":
            return "; ".join(self.reasons) if self.reasons else f"{self.path} does not exist yet"
        if self.state == "rejected":
            return f"{self.path} does not qualify: {'; '.join(self.reasons)}"
        return f"{self.path} qualifies"

    def xcom_summary(self) -> dict[str, Any] | None:
        """What the sensor and its trigger return: the file judged as a small JSON-able dict (never
        the full file list), naming the file and its `source`; None when nothing was found."""
        if self.data is None:
            return None
        summary = self.data.summary()
        summary.update(partitions_summary(summary.get("partitions"), summary.get("partition_count")))
        summary["path"] = str(self.path)
        summary["source"] = self.source
        summary["legacy"] = is_legacy(self.data)
        return summary


# Expectations, as callers state them ------------------------------------------------------------
def parse_newer_than(value: datetime | str | None) -> datetime | None:
    """A timezone-aware datetime from a datetime or an ISO-8601 string (rendered templates); naive = UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
        except ValueError:
            import pendulum

            try:
                parsed = pendulum.parse(text)  # type: ignore[assignment]
            except Exception as error:
                raise ValueError(f"newer_than {value!r} is not an ISO-8601 date-time") from error
            if not isinstance(parsed, datetime):
                raise ValueError(f"newer_than {value!r} is not a date-time") from None
        value = parsed
    if not isinstance(value, datetime):
        raise TypeError(f"newer_than must be a datetime or an ISO-8601 string, got {type(value).__name__}")
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class SuccessExpectations:
    """What a `_SUCCESS` (or a job's record) must say to prove a commit; every field is optional.

    The one carrier of the success checks: the CLI, the sensor, its trigger and the operator state
    their expectations as one of these, so they all judge the same way, and the trigger stores it
    as `to_dict()`. `committers` may match any of its names; `newer_than` is strict.
    """

    job_id: str | None = None
    committers: tuple[str, ...] | None = None
    min_files: int | None = None
    newer_than: datetime | None = None
    required_partitions: tuple[str, ...] = ()
    allow_legacy: bool = False

    @classmethod
    def build(
        cls,
        *,
        job_id: str | None = None,
        committers: str | Iterable[str] | None = None,
        min_files: int | str | None = None,
        newer_than: datetime | str | None = None,
        required_partitions: str | Iterable[str] | None = None,
        allow_legacy: bool = False,
    ) -> SuccessExpectations:
        """Normalise user arguments (rendered templates arrive as strings); `build(**e.to_dict()) == e`."""
        if isinstance(committers, str):
            committers = (committers,)
        if isinstance(required_partitions, str):
            required_partitions = (required_partitions,)
        return cls(
            job_id=job_id or None,
            committers=tuple(committers) if committers is not None else None,
            min_files=int(min_files) if min_files not in (None, "") else None,
            newer_than=parse_newer_than(newer_than),
            required_partitions=tuple(p for p in (required_partitions or ()) if p),
            allow_legacy=bool(allow_legacy),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (what a trigger's `serialize` may hold); `build` reads it back."""
        fields = asdict(self)
        fields["newer_than"] = self.newer_than.isoformat() if self.newer_than else None
        return {name: list(value) if isinstance(value, tuple) else value for name, value in fields.items()}

    def verify(
        self,
        data: SuccessData,
        label: str = SUCCESS_FILENAME,
        look_up: Callable[[SuccessData, list[str]], tuple[set[str], str]] | None = None,
    ) -> list[str]:
        """Every reason `data` fails these expectations; an empty list means it passes.

        `label` names the file in reasons. A legacy marker records no job ID, committer or
        partitions, so expecting any of them fails with one reason instead of passing silently.
        A required partition past those `data` lists inline (`PARTITIONS_LIMIT`) is asked of
        `look_up(data, names)`, which says which of `names` the job wrote and, for the others,
        where it looked (`check` passes `WrittenPartitions`, which reads the store); without it
        such a partition counts as missing, and the reason says it was not looked up.
        """
        reasons: list[str] = []
        if is_legacy(data):
            if self.job_id is not None or self.committers is not None or self.required_partitions:
                reasons.append(
                    "_SUCCESS is a legacy 0-byte marker: it records no job ID, committer or partitions"
                )
        elif not data.success:
            reasons.append(f"{label} says the job did not succeed (state {data.state!r})")
        if self.job_id is not None and not is_legacy(data) and data.job_id != self.job_id:
            reasons.append(f"job ID is {data.job_id!r}, expected {self.job_id!r}")
        committers = self.committers
        if (
            committers is not None
            and not is_legacy(data)
            and not _committer_matches(data.committer, committers)
        ):
            expected = " or ".join(repr(name) for name in committers)
            reasons.append(f"committer is {data.committer!r}, expected {expected}")
        if self.min_files is not None:
            count, exact = data.committed_file_count()
            if count < self.min_files:
                if exact:
                    reasons.append(f"{count} files committed, expected at least {self.min_files}")
                else:
                    reasons.append(
                        f"{count} file names recorded and no file count (Hadoop caps the list at 100), "
                        f"expected at least {self.min_files}"
                    )
        if self.newer_than is not None:
            threshold = (
                self.newer_than if self.newer_than.tzinfo else self.newer_than.replace(tzinfo=timezone.utc)
            )
            written = datetime.fromtimestamp(data.timestamp / 1000, tz=timezone.utc)
            if written <= threshold:
                reasons.append(f"written at {written.isoformat()}, not after {threshold.isoformat()}")
        if data.registration_pending:
            reasons.append(
                f"the partitions are not yet registered in table {data.table} (registration pending)"
            )
        if self.required_partitions and not is_legacy(data):
            present = {_partition_key(p) for p in data.partitions}
            missing = [p for p in self.required_partitions if _partition_key(p) not in present]
            note = ""
            if missing and not data.partitions_complete:
                inline = f"not among the {len(data.partitions)} of {data.total_partitions} listed inline"
                if look_up is None:
                    note = f" ({inline}, and not looked up past them)"
                else:
                    found, where = look_up(data, [_partition_key(p) for p in missing])
                    missing = [p for p in missing if _partition_key(p) not in found]
                    note = f" ({inline}, nor {where})"
            elif not data.lists_all_files and len(data.filenames) >= FILENAMES_LIMIT:
                note = f" (Hadoop lists only the first {FILENAMES_LIMIT} files)"
            if missing:
                reasons.append(f"missing partitions: {', '.join(missing)}{note}")
        return reasons

    def check(self, store: Store, destination: str | os.PathLike[str] | StorePath) -> SuccessCheck:
        """Find what proves `destination` was committed (by `job_id`, if expected) and judge it.

        Reads `<destination>/_SUCCESS`: one ranged GET of at most `SENSOR_READ_BYTES`, for a job of
        any size (`load_success`; a larger one of Hadoop's or an older one of ours is then read
        whole). When a `job_id` is expected and the `_SUCCESS` is absent or names another job (a
        later day of a partitioned table, say), the job's own record under
        `<destination>/_airflow_commit/` is read instead (a second such GET) and judged in its place;
        so is a table write's, whose record alone says whether its partitions are registered yet.
        When neither proves the job, the reasons say what each one said. A required partition past
        the ones listed inline (a job of more than `PARTITIONS_LIMIT`) costs more requests, never a
        read of the file list (`WrittenPartitions`).

        Raises InvalidCommitDataError naming the file when the `_SUCCESS` or the record cannot be
        trusted at all (LegacySuccessMarkerError for a 0-byte `_SUCCESS` unless `allow_legacy`), and
        StoreError when the store cannot be read.
        """
        path = success_path(destination)
        job_id = self.job_id
        try:
            data: SuccessData | None = load_success(store, path, allow_legacy=self.allow_legacy)
        except FileNotFoundInStoreError:
            data = None
        if data is not None and (job_id is None or (not is_legacy(data) and data.job_id == job_id)):
            if data.table is None:
                return self._judge(store, path, data, from_record=False)
            # A table write: only its record says whether its partitions are registered yet.
            job_id = data.job_id
        if job_id is None:
            return SuccessCheck("missing", path, reasons=(f"{path} does not exist yet",))

        destination = path.parent
        try:
            record_path: StorePath | None = job_record_path(destination, job_id)
        except ValueError:
            record_path = None  # such a job ID names no file: it cannot have a record of ours
        if record_path is not None:
            try:
                record = vouches_for_its_own(
                    load_job_record(store, destination, job_id, head=True), record_path, destination
                )
            except FileNotFoundInStoreError:
                pass
            else:
                return self._judge(store, record_path, record, from_record=True)
            no_record = f"no record of job {job_id!r} at {record_path} (not committed yet, or pruned)"
        else:
            no_record = f"job ID {job_id!r} is not usable in paths, so it has no record"
        if data is None:
            return SuccessCheck("missing", path, reasons=(f"{path} does not exist yet", no_record))
        judged = self._judge(store, path, data, from_record=False)
        return SuccessCheck("rejected", path, data, (*judged.reasons, no_record))

    def _judge(self, store: Store, path: StorePath, data: SuccessData, *, from_record: bool) -> SuccessCheck:
        """`data`, read from `path` (the `_SUCCESS`, or the job's record), judged."""
        found = SuccessCheck("accepted", path, data, from_record=from_record)
        reasons = self.verify(
            data,
            label="the job record" if from_record else SUCCESS_FILENAME,
            look_up=WrittenPartitions(store, found.destination, path),
        )
        return replace(found, state="rejected", reasons=tuple(reasons)) if reasons else found


@dataclass(frozen=True)
class WrittenPartitions:
    """Which partitions a job wrote, past those its `_SUCCESS` or record (`source`, for the job's
    `destination`) lists inline: looked up in the store, never by reading the file list.

    - In the job's partition list (`partitionList`, `file_list.find_partitions`): one ranged GET
      of its last 64 KiB, which holds all of a list of some thousands of partitions, and then one
      per row group (65,536 partitions) whose statistics cover a partition asked for.
    - When that list is gone (it goes with the job's records when they are pruned; the table's
      `_SUCCESS` stays) and the job's committer writes partition markers (``partitioned``): each
      partition's own `_SUCCESS`, one ranged GET of at most `SENSOR_READ_BYTES` each, which proves
      the partition when it names the job.
    """

    store: Store
    destination: StorePath
    source: StorePath

    def __call__(self, data: SuccessData, names: list[str]) -> tuple[set[str], str]:
        """(which of `names` the job of `data` wrote, where the others were looked for)."""
        ref = data.partition_list
        if ref is not None:
            try:
                found = find_partitions(self.store, self.destination, ref, names, str(self.source))
            except FileNotFoundInStoreError:
                pass
            else:
                return found, f"in its partition list {ref.path_under(self.destination)}"
        gone = "no partition list" if ref is None else f"its partition list {ref.path} is gone"
        if not _writes_partition_markers(data.committer):
            return set(), f"found: {gone}"
        found = {name for name in names if self._marker_names_job(name, data.job_id)}
        return found, f"found: {gone}, and their own {SUCCESS_FILENAME} do not name job {data.job_id!r}"

    def _marker_names_job(self, partition: str, job_id: str) -> bool:
        """Whether the partition's own `_SUCCESS` says job `job_id` wrote it (a later job that
        rewrote the partition replaced it, so another job's says nothing either way)."""
        try:
            path = self.destination.join(partition, SUCCESS_FILENAME)
            marker = SuccessData.read_head(self.store, path)
        except (InvalidPathError, FileNotFoundInStoreError, LegacySuccessMarkerError):
            return False
        return (
            marker.success
            and marker.job_id == job_id
            and partition in (_partition_key(name) for name in marker.partitions)
        )


def _writes_partition_markers(committer: str) -> bool:
    """Whether the committer a `_SUCCESS` names writes a `_SUCCESS` into each partition."""
    name = committer_named_in_success(committer)
    return name is not None and COMMITTERS[name].traits.partition_markers
