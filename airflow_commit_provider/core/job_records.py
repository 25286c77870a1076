"""A committed job's own record: where it lives and how it is read back.

Every job that commits leaves one under `<destination>/_airflow_commit/` (`JobLayout.job_record`),
in the SuccessData format: the table's `_SUCCESS` is rewritten by each later job, the record is
not. Its own module because job commit writes it (`stages.success`) and the success check reads it
(`success_check`), and the check imports the committers, which import the stages.
"""

from __future__ import annotations

import os

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.success import LegacySuccessMarkerError, SuccessData
from airflow_commit_provider.core.layout import JobLayout, validate_job_id
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import Store


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


def save_job_record(
    store: Store, destination: str | os.PathLike[str] | StorePath, record: SuccessData
) -> None:
    """Rewrite a committed job's record (the catalog registration adds what it registered); one
    whole-object write, so a reader sees the old record or the new one."""
    store.write_bytes(job_record_path(destination, record.job_id), record.to_bytes())
