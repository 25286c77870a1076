"""Airflow operators of the commit provider."""

from airflow_commit_provider.operators.cleanup import AbortMultipartUploadsOperator, CleanupTemporaryOperator

__all__ = ["AbortMultipartUploadsOperator", "CleanupTemporaryOperator"]
