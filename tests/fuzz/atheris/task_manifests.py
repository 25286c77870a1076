"""Atheris target: a task manifest as job commit reads it from the store (`decode_task_manifest`):
read, or an InvalidCommitDataError naming the file."""

from __future__ import annotations

import io

from support.fuzzing import accepted_or_refused

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.stages.entries import CommitEntry
from airflow_commit_provider.core.stages.manifests import decode_task_manifest

MAX_LEN = 4096
SOURCE = "s3://bucket/table/_temporary/job-1/00/manifests/task_job-1_m_000000-manifest.json"


def TestOneInput(data: bytes) -> None:
    entries: list[CommitEntry] = []
    loaded = accepted_or_refused(
        lambda: decode_task_manifest(io.BytesIO(data), SOURCE, "task_job-1_m_000000", entries.append),
        InvalidCommitDataError,
        SOURCE,
    )
    if loaded is not None:
        assert all(entry.size >= 0 for entry in entries) and loaded.total_bytes >= 0
        assert loaded.files == len(entries)
