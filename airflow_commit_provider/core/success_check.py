"""Loading and verifying a job's `_SUCCESS`, shared by the CLI and the Airflow sensor.

A `_SUCCESS` file only proves that *some* job finished; downstream work usually needs to know
it was *this* job, from an expected committer, recently, with enough output. Verification
returns every failed condition as a sentence, so callers can say why, not just "no".
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime, timezone

from airflow_commit_provider.core.formats.success import (
    SUCCESS_FILENAME,
    LegacySuccessMarkerError,
    SuccessData,
)
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileNotFoundInStoreError, Store

#: `state` of the SuccessData that stands for a classic 0-byte marker (only with allow_legacy).
LEGACY_STATE = "legacy-marker"

__all__ = ["LEGACY_STATE", "is_legacy", "load_success", "success_path", "verify_success"]


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
        return SuccessData.from_bytes(data, str(path))
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


def _file_count(data: SuccessData) -> tuple[int, bool]:
    """(count, exact): Hadoop's own files carry only the first 100 `filenames`, a lower bound."""
    if data.file_count is not None:
        return data.file_count, True
    if data.files is not None:
        return len(data.files), True
    return len(data.filenames), False


def _partition_key(partition: str) -> str:
    return partition.strip("/")


def verify_success(
    data: SuccessData,
    *,
    job_id: str | None = None,
    committers: Iterable[str] | str | None = None,
    min_files: int | None = None,
    newer_than: datetime | None = None,
    required_partitions: Iterable[str] | None = None,
) -> list[str]:
    """Every reason `data` fails the given expectations; an empty list means it passes.

    `committers` is one name or several (any may match; compared case-insensitively);
    `newer_than` must be timezone-aware or is taken as UTC.
    """
    reasons: list[str] = []
    if is_legacy(data):
        if job_id is not None or committers is not None or required_partitions:
            reasons.append(
                "_SUCCESS is a legacy 0-byte marker: it records no job ID, committer or partitions"
            )
    elif not data.success:
        reasons.append(f"_SUCCESS says the job did not succeed (state {data.state!r})")
    if job_id is not None and not is_legacy(data) and data.job_id != job_id:
        reasons.append(f"job ID is {data.job_id!r}, expected {job_id!r}")
    if committers is not None and not is_legacy(data):
        wanted = [committers] if isinstance(committers, str) else list(committers)
        if data.committer.lower() not in {name.lower() for name in wanted}:
            expected = " or ".join(repr(name) for name in wanted)
            reasons.append(f"committer is {data.committer!r}, expected {expected}")
    if min_files is not None:
        count, exact = _file_count(data)
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
            reasons.append(f"missing partitions: {', '.join(missing)}")
    return reasons
