"""Provider metadata that Airflow reads through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_commit_provider import __version__
from airflow_commit_provider.airflow_config import provider_config

INTEGRATION = "Commit Protocols"


def get_provider_info() -> dict[str, Any]:
    """Return the provider description (schema: airflow/provider_info.schema.json).

    No ``connection-types``: S3 paths use the Amazon provider's ``aws`` connection type
    (``aws_default``), Spark the Spark provider's ``spark`` type (``spark_default``), and local paths
    need none. Registering ``aws`` again would clash with the Amazon provider's registration.

    No ``plugins``: the plugin (`ui.plugin`) is registered by the ``airflow.plugins`` entry point
    alone, which Airflow reads wherever it loads plugins. Airflow reads a provider's ``plugins``
    only with ``[core] lazy_discover_providers = False``, and then registering it from both sources
    logs "Plugin 'airflow_commit_report' already registered, skipping".

    ``versions`` is read from ``__version__``, the one owner: Airflow itself takes the version from
    the installed package's metadata, which pyproject.toml builds from the same attribute.
    """
    return {
        "package-name": "airflow-commit-provider",
        "name": "Commit Protocols",
        "description": (
            "Hadoop/Spark output commit protocols in Python: zero-rename S3 committers "
            "(directory/partitioned staging, magic), the manifest committer and file-v1/v2 "
            "baselines, with _SUCCESS sensors and cleanup of pending uploads."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "tags": ["software"],
            }
        ],
        "hooks": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_commit_provider.hooks.commit_store",
                    "airflow_commit_provider.hooks.spark_submit",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_commit_provider.operators.spark_submit",
                    "airflow_commit_provider.operators.cleanup",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_commit_provider.sensors.success_manifest"],
            }
        ],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["airflow_commit_provider.triggers.success_manifest"],
            }
        ],
        # `airflow commit-protocols ...` (Airflow 3.2+; 3.1 ignores it): the commands of `airflow-commit`.
        "cli": ["airflow_commit_provider.cli.definition.get_cli_commands"],
        "extra-links": ["airflow_commit_provider.operators.report_link.CommitReportLink"],
        "config": provider_config(),
    }
