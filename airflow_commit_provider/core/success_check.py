"""Loading and verifying a job's `_SUCCESS` or job record, shared by the CLI, sensor, trigger and operator.

A `_SUCCESS` file only proves that *some* job finished; downstream work usually needs to know
it was *this* job, from an expected committer, recently, with enough output. Verification
returns every failed condition as a sentence, so callers can say why, not just "no".

A table's `_SUCCESS` is rewritten by every job that commits to it, so with parallel backfills it
often names a later job. Each committed job also leaves a small record of its own under
`<destination>/_airflow_commit/` (`JobLayout.job_record`), in the same SuccessData format.
`check_success` is the one place that decides which of the two proves a given job: the `_SUCCESS`
when it names the job (one GET), else the job's record (a second GET).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Literal

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.success import (
    FILENAMES_LIMIT,
    SUCCESS_FILENAME,
    LegacySuccessMarkerError,
    SuccessData,
)
from airflow_commit_provider.core.layout import JobLayout, validate_job_id
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, Store

#: `state` of the SuccessData that stands for a classic 0-byte marker (only with allow_legacy).
LEGACY_STATE = "legacy-marker"

__all__ = [
    "LEGACY_STATE",
    "CheckState",
    "SuccessCheck",
    "SuccessExpectations",
    "check_success",
    "is_legacy",
    "job_record_path",
    "load_job_record",
    "load_success",
    "parse_newer_than",
    "success_path",
    "verify_success",
    "with_hadoop_partitions",
]


def success_path(location: str | os.PathLike[str] | StorePath) -> StorePath:
    """The `_SUCCESS` file for an output directory, or the location itself if it names one."""
    path = StorePath.parse(location)
    return path if path.name == SUCCESS_FILENAME else path.join(SUCCESS_FILENAME)


def load_success(
    store: Store, url: str | os.PathLike[str] | StorePath, allow_legacy: bool = False
) -> SuccessData:
    """Read and parse the `_SUCCESS` of `url` (the output directory or the file itself).

    Raises FileNotFoundInStoreError if it is absent, InvalidCommitDataError if it is corrupt,
    and LegacySuccessMarkerError for a classic 0-byte marker unless `allow_legacy`; then a
    SuccessData with `state == LEGACY_STATE`, no job ID and the file's modification time is
    returned, so a job-ID check on it fails with a reason instead of passing silently.
    """
    path = success_path(url)
    data = store.read_bytes(path)
    try:
        return with_hadoop_partitions(SuccessData.from_bytes(data, str(path)), path.parent)
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


def is_legacy(data: SuccessData) -> bool:
    return data.state == LEGACY_STATE


def with_hadoop_partitions(data: SuccessData, directory: StorePath) -> SuccessData:
    """`data` with the partitions its `filenames` lie in, when it is Hadoop's (which lists no
    partitions): their directories relative to `directory`, the one the `_SUCCESS` is in.

    Hadoop lists at most 100 files, so past that these are the partitions of the first 100.
    """
    if data.files is not None or data.partitions or not data.filenames:
        return data
    partitions: dict[str, None] = {}
    for name in data.filenames:
        try:
            relative = _listed_path(name, directory).relative_to(directory)
        except ValueError:
            continue  # a file outside the directory names no partition of it
        partition = relative.rpartition("/")[0]
        if partition:
            partitions.setdefault(partition)
    return replace(data, partitions=list(partitions))


def _listed_path(name: str, directory: StorePath) -> StorePath:
    """A Hadoop `filenames` entry as a path: the manifest committer lists percent-encoded URIs
    (``file:/...`` included), S3A lists ``/<key>``, the raw key in the directory's bucket."""
    if name.startswith("file:/") and not name.startswith("file://"):
        name = "file://" + name[len("file:") :]
    if "://" in name:
        return StorePath.from_uri(name)
    if directory.is_local:
        return StorePath("file", "", name)
    return StorePath(directory.scheme, directory.bucket, name.lstrip("/"))


def _partition_key(partition: str) -> str:
    return partition.strip("/")


def _committer_matches(recorded: str, wanted: Iterable[str]) -> bool:
    """Whether the committer a `_SUCCESS` names is one of `wanted`, by our registry's names:
    Hadoop's manifest committer writes its class name, ``staging`` is the directory committer."""
    # Imported here: the registry imports the stages, which import this module.
    from airflow_commit_provider.core.committers.registry import committer_named_in_success

    def canonical(name: str) -> str:
        return committer_named_in_success(name) or name.lower()

    return canonical(recorded) in {canonical(name) for name in wanted}


def verify_success(
    data: SuccessData,
    *,
    job_id: str | None = None,
    committers: Iterable[str] | str | None = None,
    min_files: int | None = None,
    newer_than: datetime | None = None,
    required_partitions: Iterable[str] | None = None,
    label: str = SUCCESS_FILENAME,
) -> list[str]:
    """Every reason `data` fails the given expectations; an empty list means it passes.

    `committers` is one name or several (any may match; compared case-insensitively);
    `newer_than` must be timezone-aware or is taken as UTC. `label` names the file in reasons.
    """
    reasons: list[str] = []
    if is_legacy(data):
        if job_id is not None or committers is not None or required_partitions:
            reasons.append(
                "_SUCCESS is a legacy 0-byte marker: it records no job ID, committer or partitions"
            )
    elif not data.success:
        reasons.append(f"{label} says the job did not succeed (state {data.state!r})")
    if job_id is not None and not is_legacy(data) and data.job_id != job_id:
        reasons.append(f"job ID is {data.job_id!r}, expected {job_id!r}")
    if committers is not None and not is_legacy(data):
        wanted = [committers] if isinstance(committers, str) else list(committers)
        if not _committer_matches(data.committer, wanted):
            expected = " or ".join(repr(name) for name in wanted)
            reasons.append(f"committer is {data.committer!r}, expected {expected}")
    if min_files is not None:
        count, exact = data.committed_file_count()
        if count < min_files:
            if exact:
                reasons.append(f"{count} files committed, expected at least {min_files}")
            else:
                reasons.append(
                    f"{count} file names recorded and no file count (Hadoop caps the list at 100), "
                    f"expected at least {min_files}"
                )
    if newer_than is not None:
        threshold = newer_than if newer_than.tzinfo else newer_than.replace(tzinfo=timezone.utc)
        written = datetime.fromtimestamp(data.timestamp / 1000, tz=timezone.utc)
        if written <= threshold:
            reasons.append(f"written at {written.isoformat()}, not after {threshold.isoformat()}")
    if required_partitions and not is_legacy(data):
        present = {_partition_key(p) for p in data.partitions}
        missing = [p for p in required_partitions if _partition_key(p) not in present]
        if missing:
            capped = data.files is None and len(data.filenames) >= FILENAMES_LIMIT
            note = f" (Hadoop lists only the first {FILENAMES_LIMIT} files)" if capped else ""
            reasons.append(f"missing partitions: {', '.join(missing)}{note}")
    return reasons


# Job records ------------------------------------------------------------------------------------
def job_record_path(destination: str | os.PathLike[str] | StorePath, job_id: str) -> StorePath:
    """Where job `job_id` keeps its record under `destination` (JobLayout owns the location)."""
    return JobLayout(StorePath.parse(destination), validate_job_id(job_id)).job_record


def load_job_record(
    store: Store, destination: str | os.PathLike[str] | StorePath, job_id: str
) -> SuccessData:
    """The record job `job_id` left under `destination` when it committed.

    Raises FileNotFoundInStoreError if there is none (not committed yet, or pruned), ValueError if
    `job_id` cannot name a record, and InvalidCommitDataError naming the file if the record is empty,
    corrupt, of a foreign format, or the record of another job (a copied or renamed file must never
    vouch for a job that did not write it).
    """
    path = job_record_path(destination, job_id)
    payload = store.read_bytes(path)
    try:
        record = SuccessData.from_bytes(payload, str(path))
    except LegacySuccessMarkerError:
        raise InvalidCommitDataError(f"{path}: job record is empty (0 bytes)") from None
    if record.job_id != job_id:
        raise InvalidCommitDataError(
            f"{path}: this is the record of job {record.job_id!r}, expected job {job_id!r}"
        )
    return record


# The one check ----------------------------------------------------------------------------------
CheckState = Literal["missing", "rejected", "accepted"]


@dataclass(frozen=True)
class SuccessCheck:
    """One look at a location for (optionally) one job: what was found and whether it qualifies.

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

    def describe(self) -> str:
        if self.state == "missing":
            return "; ".join(self.reasons) if self.reasons else f"{self.path} does not exist yet"
        if self.state == "rejected":
            return f"{self.path} does not qualify: {'; '.join(self.reasons)}"
        return f"{self.path} qualifies"


def check_success(
    store: Store,
    location: str | os.PathLike[str] | StorePath,
    *,
    job_id: str | None = None,
    committers: Iterable[str] | str | None = None,
    min_files: int | None = None,
    newer_than: datetime | None = None,
    required_partitions: Iterable[str] | None = None,
    allow_legacy: bool = False,
) -> SuccessCheck:
    """Find what proves `location` was committed (by `job_id`, if given) and judge it.

    Reads `<location>/_SUCCESS` (one GET). When `job_id` is given and the `_SUCCESS` is absent or
    names another job (a later day of a partitioned table, say), the job's own record under
    `<location>/_airflow_commit/` is read instead (a second GET) and judged in its place. When
    neither proves the job, the reasons say what each one said.

    Raises InvalidCommitDataError naming the file when the `_SUCCESS` or the record cannot be
    trusted at all (LegacySuccessMarkerError for a 0-byte `_SUCCESS` unless `allow_legacy`), and
    StoreError when the store cannot be read.
    """
    path = success_path(location)
    expectations = {
        "job_id": job_id,
        "committers": committers,
        "min_files": min_files,
        "newer_than": newer_than,
        "required_partitions": list(required_partitions) if required_partitions else None,
    }
    try:
        data: SuccessData | None = load_success(store, path, allow_legacy=allow_legacy)
    except FileNotFoundInStoreError:
        data = None
    if data is not None and (job_id is None or (not is_legacy(data) and data.job_id == job_id)):
        return _judge(path, data, from_record=False, **expectations)
    if job_id is None:
        return SuccessCheck("missing", path, reasons=(f"{path} does not exist yet",))

    destination = path.parent
    try:
        record_path: StorePath | None = job_record_path(destination, job_id)
    except ValueError:
        record_path = None  # such a job ID names no file: it cannot have a record of ours
    if record_path is not None:
        try:
            record = load_job_record(store, destination, job_id)
        except FileNotFoundInStoreError:
            pass
        else:
            return _judge(record_path, record, from_record=True, **expectations)
        no_record = f"no record of job {job_id!r} at {record_path} (not committed yet, or pruned)"
    else:
        no_record = f"job ID {job_id!r} is not usable in paths, so it has no record"
    if data is None:
        return SuccessCheck("missing", path, reasons=(f"{path} does not exist yet", no_record))
    judged = _judge(path, data, from_record=False, **expectations)
    return SuccessCheck("rejected", path, data, (*judged.reasons, no_record))


def _judge(path: StorePath, data: SuccessData, *, from_record: bool, **expectations: object) -> SuccessCheck:
    label = "the job record" if from_record else SUCCESS_FILENAME
    reasons = verify_success(data, label=label, **expectations)  # type: ignore[arg-type]
    state: CheckState = "rejected" if reasons else "accepted"
    return SuccessCheck(state, path, data, tuple(reasons), from_record)


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

    The sensor, its trigger and the operator state their expectations as one of these, so they
    all judge the same way: through `check_success`.
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
        """Normalise operator/trigger arguments (rendered templates arrive as strings)."""
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

    def check(self, store: Store, location: str | os.PathLike[str] | StorePath) -> SuccessCheck:
        """Look once (the `_SUCCESS`, or the job's record) and judge it; raises as `check_success`."""
        return check_success(
            store,
            location,
            job_id=self.job_id,
            committers=self.committers,
            min_files=self.min_files,
            newer_than=self.newer_than,
            required_partitions=self.required_partitions or None,
            allow_legacy=self.allow_legacy,
        )
