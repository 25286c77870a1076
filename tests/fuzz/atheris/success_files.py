"""Atheris target: `_SUCCESS` as sensors and the CLI read it (`SuccessData.from_bytes`, then its
summary and file count): read, or an InvalidCommitDataError naming the file."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.success import SuccessData

MAX_LEN = 4096
SOURCE = "s3://bucket/table/_SUCCESS"


def TestOneInput(data: bytes) -> None:
    success = accepted_or_refused(
        lambda: SuccessData.from_bytes(data, SOURCE), InvalidCommitDataError, SOURCE
    )
    if success is not None:
        success.summary()
        assert success.committed_file_count()[0] >= 0
