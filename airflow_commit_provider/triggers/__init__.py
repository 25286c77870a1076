"""Airflow triggers of the commit provider."""

from airflow_commit_provider.triggers.success_manifest import SuccessManifestTrigger

__all__ = ["SuccessManifestTrigger"]
