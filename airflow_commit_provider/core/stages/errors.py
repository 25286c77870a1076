"""Errors that commit stages raise; each message names the job, task, file or path."""

from __future__ import annotations

from airflow_commit_provider.core.formats.errors import InvalidCommitDataError


class CommitError(RuntimeError):
    """A commit protocol step cannot proceed safely."""


class JobNotActiveError(CommitError):
    """The job was already committed or aborted; late task output is discarded."""


class JobFencedError(JobNotActiveError):
    """The job was aborted (fenced) before its commit point: it can never commit or start again."""


class OutputConflictError(CommitError):
    """conflict_mode='fail' and the destination (or a partition it writes) already holds data."""


class MissingManifestError(CommitError):
    """The driver reported a committed task whose manifest is not in the store."""


__all__ = [
    "CommitError",
    "InvalidCommitDataError",
    "JobFencedError",
    "JobNotActiveError",
    "MissingManifestError",
    "OutputConflictError",
]
