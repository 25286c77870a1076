"""Airflow sensors of the commit provider."""

from airflow_commit_provider.sensors.success_manifest import SuccessManifestSensor

__all__ = ["SuccessManifestSensor"]
