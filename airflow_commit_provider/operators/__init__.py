"""Airflow operators of the commit provider."""

from airflow_commit_provider.operators.cleanup import (
    AbortMultipartUploadsOperator,
    CleanupTemporaryOperator,
    PruneCommitRecordsOperator,
)
from airflow_commit_provider.operators.spark_submit import CommittedSparkSubmitOperator

__all__ = [
    "AbortMultipartUploadsOperator",
    "CleanupTemporaryOperator",
    "CommittedSparkSubmitOperator",
    "PruneCommitRecordsOperator",
]
