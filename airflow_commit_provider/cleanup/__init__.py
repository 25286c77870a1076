"""Cleanup of what failed and killed jobs leave behind (pending uploads, temporary trees), and of old job records.

Run by the Airflow worker (the cleanup operators and a try's abort of a Hadoop job, `tries`) and by
the `airflow-commit` CLI (`uploads`, `temp`, `records`); never by Spark, so it is not shipped to
executors, and it imports no Airflow. Every kind
lists its scope as a `CleanupListing` of `Listed` items and reports what acting on it did as a
`CleanupReport` of `Outcome`s (`reports`).
"""

from __future__ import annotations

from airflow_commit_provider.cleanup.common import STOP_AFTER_FAILURES
from airflow_commit_provider.cleanup.records import (
    IndexReport,
    JobRecords,
    RecordListing,
    RecordPolicy,
    RecordPruneReport,
    find_job_records,
    prune_old_records,
    prune_records,
    record_policy,
    reindex_records,
)
from airflow_commit_provider.cleanup.reports import CleanupListing, CleanupReport, Listed, Outcome
from airflow_commit_provider.cleanup.scope import ScopeError, parse_scope
from airflow_commit_provider.cleanup.temp_trees import (
    TempCleanReport,
    TempTree,
    TempTreeListing,
    clean_stale_temp_trees,
    clean_temp_trees,
    find_temp_trees,
)
from airflow_commit_provider.cleanup.uploads import (
    AbortOutcome,
    AbortReport,
    UploadInfo,
    UploadListing,
    abort_and_verify,
    abort_pending_uploads,
    abort_uploads,
    list_pending_uploads,
)
from airflow_commit_provider.durations import (
    DEFAULT_MAX_JOB_DURATION,
    DEFAULT_OLDER_THAN,
    DEFAULT_RECORDS_OLDER_THAN,
    as_timedelta,
    format_duration,
    parse_duration,
)

__all__ = [
    "DEFAULT_MAX_JOB_DURATION",
    "DEFAULT_OLDER_THAN",
    "DEFAULT_RECORDS_OLDER_THAN",
    "STOP_AFTER_FAILURES",
    "AbortOutcome",
    "AbortReport",
    "CleanupListing",
    "CleanupReport",
    "IndexReport",
    "JobRecords",
    "Listed",
    "Outcome",
    "RecordListing",
    "RecordPolicy",
    "RecordPruneReport",
    "ScopeError",
    "TempCleanReport",
    "TempTree",
    "TempTreeListing",
    "UploadInfo",
    "UploadListing",
    "abort_and_verify",
    "abort_pending_uploads",
    "abort_uploads",
    "as_timedelta",
    "clean_stale_temp_trees",
    "clean_temp_trees",
    "find_job_records",
    "find_temp_trees",
    "format_duration",
    "list_pending_uploads",
    "parse_duration",
    "parse_scope",
    "prune_old_records",
    "prune_records",
    "record_policy",
    "reindex_records",
]
