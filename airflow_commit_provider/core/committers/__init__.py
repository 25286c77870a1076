"""Committers by name, as `fs.s3a.committer.name` and Spark users know them (see `registry`)."""

from __future__ import annotations

from airflow_commit_provider.core.committers.base import Committer, TaskAttempt
from airflow_commit_provider.core.committers.registry import (
    COMMITTERS,
    ENGINES,
    WritePlan,
    committer_class,
    committer_names,
    default_committer,
    resolve,
)
from airflow_commit_provider.core.committers.traits import CommitterTraits, JvmCommitter
from airflow_commit_provider.core.layout import JobLayout
from airflow_commit_provider.core.options import CommitOptions, TaskCommitResult
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.stages.context import ProgressCallback
from airflow_commit_provider.core.store.base import Store

__all__ = [
    "COMMITTERS",
    "ENGINES",
    "CommitOptions",
    "Committer",
    "CommitterTraits",
    "JobLayout",
    "JvmCommitter",
    "TaskAttempt",
    "TaskCommitResult",
    "WritePlan",
    "committer_class",
    "committer_names",
    "create_committer",
    "default_committer",
    "resolve",
]


def create_committer(
    name: str,
    store: Store,
    destination: str | StorePath,
    job_id: str,
    options: CommitOptions | None = None,
    progress: ProgressCallback | None = None,
) -> Committer:
    return committer_class(name)(store, destination, job_id, options, progress)
