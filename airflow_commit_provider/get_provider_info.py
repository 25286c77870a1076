"""Provider metadata that Airflow reads through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    """Return the provider description (schema: airflow/provider_info.schema.json).

    Only keys that point at modules that exist belong here; hooks, operators, sensors and
    triggers are added as those modules land.
    """
    return {
        "package-name": "airflow-commit-provider",
        "name": "Commit Protocols",
        "description": (
            "Hadoop/Spark output commit protocols in Python: zero-rename S3 committers "
            "(directory/partitioned staging, magic), the manifest committer and file-v1/v2 "
            "baselines, with _SUCCESS sensors and cleanup of pending uploads."
        ),
        "integrations": [
            {
                "integration-name": "Commit Protocols",
                "tags": ["software"],
            }
        ],
    }
