"""Atheris target: a committed job's record as the success check reads it back from a real local
store (`load_job_record`): this job's record, or an InvalidCommitDataError naming the file (a
record copied from another job, or empty, included)."""

from __future__ import annotations

import tempfile

from support.fuzzing import accepted_or_refused

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.job_records import job_record_path, load_job_record
from airflow_commit_provider.core.store.local import LocalStore

MAX_LEN = 4096
JOB = "job-1"
STORE = LocalStore()


def TestOneInput(data: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="atheris-job-record-") as destination:
        record_path = job_record_path(destination, JOB)
        STORE.write_bytes(record_path, data)
        record = accepted_or_refused(
            lambda: load_job_record(STORE, destination, JOB), InvalidCommitDataError, str(record_path)
        )
    assert record is None or record.job_id == JOB
