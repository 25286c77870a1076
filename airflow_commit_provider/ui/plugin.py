"""The provider's Airflow plugin: the commit report pages in the api-server (`ui.app`).

Registered by the package's ``airflow.plugins`` entry point alone (not also as the provider
info's ``plugins``: see `get_provider_info`), so installing the provider is enough; the task's
"Commit report" link (`operators.report_link`) points here.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_commit_provider.report.addresses import URL_PREFIX
from airflow_commit_provider.ui.app import app


class CommitReportPlugin(AirflowPlugin):
    name = "airflow_commit_report"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "Commit reports"}]
