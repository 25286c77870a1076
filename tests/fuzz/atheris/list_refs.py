"""Atheris target: a list reference as `_SUCCESS`, a record or an outcome holds it
(`ListRef.from_json`): refused with an InvalidCommitDataError naming the file and field, or a path
under the table, named by the SHA-256 it gives."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused, text_of

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.file_list import ListRef
from airflow_commit_provider.core.formats.jsonio import load_json
from airflow_commit_provider.core.paths import StorePath

MAX_LEN = 1024
SOURCE = "s3://bucket/table/_SUCCESS"
ROOT = StorePath.parse("s3://bucket/table")


def TestOneInput(data: bytes) -> None:
    ref = accepted_or_refused(
        lambda: ListRef.from_json(load_json(text_of(data), SOURCE), SOURCE, "fileList"),
        InvalidCommitDataError,
        SOURCE,
    )
    if ref is not None:
        location = ref.path_under(ROOT)
        assert location.is_under(ROOT) and location.name.endswith(f"-{ref.sha256}.parquet")
