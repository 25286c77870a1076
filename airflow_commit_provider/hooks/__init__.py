"""Airflow hooks of the commit provider."""

from airflow_commit_provider.hooks.commit_store import CommitStoreHook, S3Settings

__all__ = ["CommitStoreHook", "S3Settings"]
