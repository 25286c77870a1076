"""Atheris target: a committed job's record as the success check reads it back from a real local
store (`load_job_record`): this job's record, or an InvalidCommitDataError naming the file (a
record copied from another job, or empty, included)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from support.fuzzing import accepted_or_refused

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.job_records import job_record_path, load_job_record
from airflow_commit_provider.core.store.local import LocalStore

MAX_LEN = 4096
JOB = "job-1"
#: One destination per process, each input written over the last as another process would: a
#: directory per input cost ten times the read under test. Removed at exit; libFuzzer exits
#: without Python's clean-up, so the campaign points TMPDIR at a directory of its own.
DESTINATION = tempfile.TemporaryDirectory(prefix="atheris-job-records-")
RECORD = job_record_path(DESTINATION.name, JOB)
Path(RECORD.key).parent.mkdir(parents=True)
STORE = LocalStore()


def TestOneInput(data: bytes) -> None:
    Path(RECORD.key).write_bytes(data)
    record = accepted_or_refused(
        lambda: load_job_record(STORE, DESTINATION.name, JOB), InvalidCommitDataError, str(RECORD)
    )
    assert record is None or record.job_id == JOB
