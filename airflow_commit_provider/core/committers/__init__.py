"""Committers by name, as `fs.s3a.committer.name` and Spark users know them."""

from __future__ import annotations

from airflow_commit_provider.core.committers.base import Committer, TaskAttempt
from airflow_commit_provider.core.committers.file_output import FileOutputV1Committer, FileOutputV2Committer
from airflow_commit_provider.core.committers.magic import MagicCommitter
from airflow_commit_provider.core.committers.manifest import ManifestCommitter
from airflow_commit_provider.core.committers.staging import PartitionedCommitter, StagingCommitter
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.options import CommitOptions, TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import ProgressCallback
from airflow_commit_provider.core.store.base import Store

COMMITTERS: dict[str, type[Committer]] = {
    cls.name: cls
    for cls in (
        FileOutputV1Committer,
        FileOutputV2Committer,
        ManifestCommitter,
        StagingCommitter,
        PartitionedCommitter,
        MagicCommitter,
    )
}

__all__ = [
    "COMMITTERS",
    "CommitOptions",
    "Committer",
    "JobLayout",
    "TaskAttempt",
    "TaskCommitResult",
    "create_committer",
]


def create_committer(
    name: str,
    store: Store,
    destination: str | StorePath,
    job_id: str,
    options: CommitOptions | None = None,
    progress: ProgressCallback | None = None,
) -> Committer:
    try:
        cls = COMMITTERS[name]
    except KeyError:
        raise ValueError(
            f"unknown committer {name!r}: choose one of {', '.join(sorted(COMMITTERS))}"
        ) from None
    return cls(store, destination, job_id, options, progress)
