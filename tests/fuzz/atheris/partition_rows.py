"""Atheris target: the rows per partition a task recorded in its manifest's extra data
(`read_partition_rows`): counts that are whole and not negative, or an InvalidCommitDataError
naming the file."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused, text_of

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.partition_rows import PARTITION_ROWS_KEY, read_partition_rows

MAX_LEN = 1024
SOURCE = "s3://bucket/table/_temporary/job-1/00/manifests/task_job-1_m_000000-manifest.json"


def TestOneInput(data: bytes) -> None:
    extra = {PARTITION_ROWS_KEY: text_of(data)}
    rows = accepted_or_refused(lambda: read_partition_rows(extra, SOURCE), InvalidCommitDataError, SOURCE)
    assert rows is None or all(isinstance(count, int) and count >= 0 for count in rows.values())
