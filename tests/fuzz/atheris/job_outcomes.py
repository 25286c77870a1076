"""Atheris target: a job's outcome file, its commit point (`JobOutcome.from_bytes`): read as this
job's commit or abort, or an InvalidCommitDataError naming the file (a forged one included)."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.outcome import JobOutcome

MAX_LEN = 2048
JOB = "job-1"
SOURCE = "s3://bucket/table/_airflow_commit/job-1.outcome.json"


def TestOneInput(data: bytes) -> None:
    outcome = accepted_or_refused(
        lambda: JobOutcome.from_bytes(data, SOURCE, JOB), InvalidCommitDataError, SOURCE
    )
    if outcome is not None:
        assert outcome.job_id == JOB and outcome.decision in ("commit", "abort")
