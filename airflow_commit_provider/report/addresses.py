"""Where the commit report pages live, and what a try leaves for them to find its commit.

One home for both sides, in the layer below both: the operator's extra link
(`operators.report_link`) builds these addresses on the worker, and the plugin's app (`ui.app`)
serves them in the api-server.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

#: Where the plugin mounts its app in the api-server.
URL_PREFIX = "/commit-report"
#: What Airflow's UI puts in a task instance view's address for the task instance it shows
#: (``external_views`` with ``destination: "task_instance"``). It leaves ``{MAP_INDEX}`` as it is
#: on the page of a task that is not mapped.
TASK_INSTANCE_PLACEHOLDERS = ("{DAG_ID}", "{RUN_ID}", "{TASK_ID}", "{MAP_INDEX}")
#: The XCom a try pushes before it writes: its destination, the connection it used and its job.
#: The page trusts this (the worker wrote it), never a destination or connection in the URL.
REPORT_TARGET_XCOM = "commit_report_target"


def task_page(dag_id: str, run_id: str, task_id: str, map_index: int = -1, *, base_url: str = "") -> str:
    """The page of the commit a task instance's latest try made (or aborted)."""
    path = "/".join(quote(part, safe="") for part in (dag_id, run_id, task_id))
    query = f"?{urlencode({'map_index': map_index})}" if map_index >= 0 else ""
    return f"{base_url.rstrip('/')}{URL_PREFIX}/tasks/{path}{query}"


def commits_page(*, base_url: str = "") -> str:
    """The Commits page: the recent commits of the destinations of the DAGs the user may read."""
    return f"{base_url.rstrip('/')}{URL_PREFIX}/commits"


def task_tab(*, base_url: str = "") -> str:
    """The address of the task instance page's "Commit" tab, for Airflow's UI to fill in
    (`TASK_INSTANCE_PLACEHOLDERS`); it leads to the task instance's `task_page`."""
    dag_id, run_id, task_id, map_index = TASK_INSTANCE_PLACEHOLDERS
    return f"{base_url.rstrip('/')}{URL_PREFIX}/tab/{dag_id}/{run_id}/{task_id}?map_index={map_index}"
