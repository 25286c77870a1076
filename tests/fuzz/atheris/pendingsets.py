"""Atheris target: a pendingset (a staging or magic task's uploads) as job commit reads it
(`decode_pendingset`): read, with an upload ID and ETags per entry, or an InvalidCommitDataError
naming the file."""

from __future__ import annotations

import io

from support.fuzzing import accepted_or_refused

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.stages.entries import CommitEntry
from airflow_commit_provider.core.stages.manifests import decode_pendingset

MAX_LEN = 4096
SOURCE = "s3://bucket/table/__magic_job-job-1/job-job-1/00/manifests/task_job-1_m_000000-manifest.json"


def TestOneInput(data: bytes) -> None:
    entries: list[CommitEntry] = []
    loaded = accepted_or_refused(
        lambda: decode_pendingset(io.BytesIO(data), SOURCE, "task_job-1_m_000000", entries.append),
        InvalidCommitDataError,
        SOURCE,
    )
    if loaded is not None:
        assert all(entry.etags and entry.upload_id for entry in entries)
        assert loaded.files == len(entries)
