"""The provider's Airflow plugin: the commit report pages in the api-server (`ui.app`), the
"Commits" page in Airflow's Browse menu and the "Commit" tab of a task instance's page.

Registered by the package's ``airflow.plugins`` entry point alone (not also as the provider
info's ``plugins``: see `get_provider_info`), so installing the provider is enough; the task's
"Commit report" link (`operators.report_link`) points here too.

The menu page and the tab are ``external_views`` (Airflow 3.1+): Airflow's UI shows our pages in a
frame, at ``/plugin/commits`` and on a task instance's page at ``.../plugin/commit``. Both sit
behind the same login and checks as the report (`ui.app`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from airflow.plugins_manager import AirflowPlugin

from airflow_commit_provider.compat import conf
from airflow_commit_provider.report.addresses import URL_PREFIX, commits_page, task_tab
from airflow_commit_provider.ui.app import app

#: Where Airflow is served below its host (``[api] base_url``'s path): the frames' addresses are
#: absolute paths on the host that serves the UI.
_BASE_PATH = urlsplit(conf.get("api", "base_url", fallback="") or "").path


class CommitReportPlugin(AirflowPlugin):
    name = "airflow_commit_report"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "Commit reports"}]
    external_views = [
        {
            "name": "Commits",
            "href": commits_page(base_url=_BASE_PATH),
            "destination": "nav",
            "category": "browse",
            "url_route": "commits",
        },
        {
            "name": "Commit",
            "href": task_tab(base_url=_BASE_PATH),
            "destination": "task_instance",
            "url_route": "commit",
        },
    ]
