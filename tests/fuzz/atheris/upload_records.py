"""Atheris target: the records of the multipart uploads an attempt started, read by abort
(`parse_upload_records`): locations and upload IDs, or an InvalidCommitDataError naming the file."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.uploads import parse_upload_records

MAX_LEN = 2048
SOURCE = "s3://bucket/table/_temporary/job-1/00/uploads/attempt_job-1_m_000000_0/1.json"


def TestOneInput(data: bytes) -> None:
    records = accepted_or_refused(lambda: parse_upload_records(data, SOURCE), InvalidCommitDataError, SOURCE)
    assert records is None or all(isinstance(path, StorePath) for path, _upload in records)
