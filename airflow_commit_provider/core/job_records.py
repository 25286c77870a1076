"""A committed job's own record: where it lives and how it is read back.

Every job that commits leaves one under `<destination>/_airflow_commit/` (`JobLayout.job_record`),
in the SuccessData format: the table's `_SUCCESS` is rewritten by each later job, the record is
not. Its own module because job commit writes it (`stages.success`) and the success check reads it
(`success.check`), and the check imports the committers, which import the stages.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.jsonio import read_json_bytes
from airflow_commit_provider.core.formats.success import LegacySuccessMarkerError, SuccessData
from airflow_commit_provider.core.layout import (
    RECORDS_INDEX_DIR,
    JobLayout,
    is_job_id,
    parse_index_entry_name,
    parse_record_name,
    validate_job_id,
)
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.base import FileStatus, Store


def job_record_path(destination: str | os.PathLike[str] | StorePath, job_id: str) -> StorePath:
    """Where job `job_id` keeps its record under `destination` (JobLayout owns its path)."""
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
    """One listing of a records directory: the files of each job by job ID, with their kind, and
    how many files are no job's (left alone by everyone).

    A job's files are its records (outcome, success, delivered: `RECORD_KINDS`), its entry in the
    records index (kind ``index``) and the files of its lists folder `<jobId>/` (kind ``lists``).
    A folder counts as a job's lists only when that job has a record or an index entry: a folder
    of no known job (a job still running, or anything else) is left alone. `advance` is called once
    per file listed (a progress bar's tick).
    """
    grouped: dict[str, list[tuple[str, FileStatus]]] = {}
    folders: dict[str, list[FileStatus]] = {}
    unrecognised = 0
    for status in store.list_files(records_dir):
        advance()
        parsed = job_file(status.path.relative_to(records_dir))
        if parsed is None:
            unrecognised += 1
        elif parsed[1] == "lists":
            folders.setdefault(parsed[0], []).append(status)
        else:
            grouped.setdefault(parsed[0], []).append((parsed[1], status))
    for job_id, files in folders.items():
        if job_id in grouped:
            grouped[job_id].extend(("lists", status) for status in files)
        else:
            unrecognised += len(files)
    return grouped, unrecognised


def job_file(relative: str) -> tuple[str, str] | None:
    """(job ID, kind) of a path relative to the records directory, or None when it is no job's."""
    top, _, below = relative.partition("/")
    if not below:
        return parse_record_name(top)
    if top == RECORDS_INDEX_DIR:
        entry = parse_index_entry_name(below)
        return None if entry is None else (entry[0], "index")
    return (top, "lists") if is_job_id(top) else None


def save_job_record(
    store: Store, destination: str | os.PathLike[str] | StorePath, record: SuccessData
) -> None:
    """Rewrite a committed job's record (the catalog registration adds what it registered); one
    whole-object write, so a reader sees the old record or the new one."""
    store.write_bytes(job_record_path(destination, record.job_id), record.to_bytes())
