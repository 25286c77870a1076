"""A committed job's own record: where it lives and how it is read back.

Every job that commits leaves one under `<destination>/_airflow_commit/` (`JobLayout.job_record`),
in the SuccessData format: the table's `_SUCCESS` is rewritten by each later job, the record is
not. Its own module because job commit writes it (`stages.success`) and the success check reads it
(`success_check`), and the check imports the committers, which import the stages.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import read_json_bytes
from airflow_commit_provider.core.formats.success import LegacySuccessMarkerError, SuccessData
from airflow_commit_provider.core.layout import JobLayout, parse_record_name, validate_job_id
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileStatus, Store


def job_record_path(destination: str | os.PathLike[str] | StorePath, job_id: str) -> StorePath:
    """Where job `job_id` keeps its record under `destination` (JobLayout owns the location)."""
    return JobLayout(StorePath.parse(destination), validate_job_id(job_id)).job_record


def load_job_record(
    store: Store, destination: str | os.PathLike[str] | StorePath, job_id: str, *, head: bool = False
) -> SuccessData:
    """The record job `job_id` left under `destination` when it committed.

    With `head`, only what a success check needs (`SuccessData.read_head`): one ranged GET of at
    most `SENSOR_READ_BYTES` for a record of ours of any size, so no `phases`, `partitionStats`
    or `lostAttempts` when the record is larger than that (an older record, with every file
    inline, is still read whole). Without it, the whole record, as the commit report needs it.

    Raises FileNotFoundInStoreError if there is none (not committed yet, or pruned), ValueError if
    `job_id` cannot name a record, and InvalidCommitDataError naming the file if the record is empty,
    corrupt, of a foreign format, or the record of another job (a copied or renamed file must never
    vouch for a job that did not write it).
    """
    path = job_record_path(destination, job_id)
    try:
        if head:
            record = SuccessData.read_head(store, path)
        else:
            record = SuccessData.from_bytes(read_json_bytes(store, path), str(path))
    except LegacySuccessMarkerError:
        raise InvalidCommitDataError(f"{path}: job record is empty (0 bytes)") from None
    if record.job_id != job_id:
        raise InvalidCommitDataError(
            f"{path}: this is the record of job {record.job_id!r}, expected job {job_id!r}"
        )
    return record


def group_job_records(
    store: Store, records_dir: StorePath, advance: Callable[[], None] = lambda: None
) -> tuple[dict[str, list[tuple[str, FileStatus]]], int]:
    """One listing of a records directory: its record files by job ID (with their kind: outcome,
    success, delivered), and how many files there are not records (left alone by everyone).

    `advance` is called once per file listed (a progress bar's tick).
    """
    grouped: dict[str, list[tuple[str, FileStatus]]] = {}
    unrecognised = 0
    for status in store.list_files(records_dir):
        advance()
        parsed = parse_record_name(status.path.name) if status.path.parent == records_dir else None
        if parsed is None:
            unrecognised += 1
            continue
        name, kind = parsed
        grouped.setdefault(name, []).append((kind, status))
    return grouped, unrecognised


def save_job_record(
    store: Store, destination: str | os.PathLike[str] | StorePath, record: SuccessData
) -> None:
    """Rewrite a committed job's record (the catalog registration adds what it registered); one
    whole-object write, so a reader sees the old record or the new one."""
    store.write_bytes(job_record_path(destination, record.job_id), record.to_bytes())
