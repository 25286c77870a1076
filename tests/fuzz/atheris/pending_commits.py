"""Atheris target: a magic task's `.pending` (or `.pendingset`) file of Hadoop's format
(`read_pending_commits`): read, or an InvalidCommitDataError naming the file."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.pending import read_pending_commits

MAX_LEN = 2048
SOURCE = "s3://bucket/t/__magic_job-job-1/a.pending"


def TestOneInput(data: bytes) -> None:
    accepted_or_refused(lambda: read_pending_commits(data, SOURCE), InvalidCommitDataError, SOURCE)
