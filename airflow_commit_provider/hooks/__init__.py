"""Airflow hooks of the commit provider."""

from airflow_commit_provider.core.store.settings import S3Settings
from airflow_commit_provider.hooks.commit_store import CommitStoreHook
from airflow_commit_provider.hooks.spark_submit import CommittedSparkSubmitHook

__all__ = ["CommitStoreHook", "CommittedSparkSubmitHook", "S3Settings"]
