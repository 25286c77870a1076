"""Cleanup of what failed and killed jobs leave behind (pending uploads, temporary trees), and of old job records.

Shared by the operators, the DAG and the `airflow-commit` CLI; no Airflow imports here.
"""

from __future__ import annotations

from airflow_commit_provider.core.cleanup.common import (
    PROGRESS_LOG_INTERVAL,
    STOP_AFTER_FAILURES,
    LoggingProgress,
    NoProgress,
    Progress,
    format_size,
)
from airflow_commit_provider.core.cleanup.durations import (
    DEFAULT_MAX_JOB_DURATION,
    DEFAULT_OLDER_THAN,
    DEFAULT_RECORDS_OLDER_THAN,
    as_timedelta,
    format_duration,
    parse_duration,
)
from airflow_commit_provider.core.cleanup.records import (
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
from airflow_commit_provider.core.cleanup.scope import ScopeError, parse_scope
from airflow_commit_provider.core.cleanup.temp_trees import (
    TempCleanReport,
    TempTree,
    TempTreeListing,
    clean_stale_temp_trees,
    clean_temp_trees,
    find_temp_trees,
)
from airflow_commit_provider.core.cleanup.uploads import (
    AbortOutcome,
    AbortReport,
    UploadInfo,
    UploadListing,
    abort_and_verify,
    abort_pending_uploads,
    abort_uploads,
    list_pending_uploads,
)

__all__ = [
    "DEFAULT_MAX_JOB_DURATION",
    "DEFAULT_OLDER_THAN",
    "DEFAULT_RECORDS_OLDER_THAN",
    "PROGRESS_LOG_INTERVAL",
    "STOP_AFTER_FAILURES",
    "AbortOutcome",
    "AbortReport",
    "IndexReport",
    "JobRecords",
    "LoggingProgress",
    "NoProgress",
    "Progress",
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
    "format_size",
    "list_pending_uploads",
    "parse_duration",
    "parse_scope",
    "prune_old_records",
    "prune_records",
    "record_policy",
    "reindex_records",
]
