"""Where the commit report pages live, and what a try leaves for them to find its commit.

One home for both sides, in the layer below both: the operator's extra link
(`operators.report_link`) builds these addresses on the worker, and the plugin's app (`ui.app`)
serves them in the api-server.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

#: Where the plugin mounts its app in the api-server.
URL_PREFIX = "/commit-report"
#: The XCom a try pushes before it writes: its destination, the connection it used and its job.
#: The page trusts this (the worker wrote it), never a destination or connection in the URL.
REPORT_TARGET_XCOM = "commit_report_target"


def task_page(dag_id: str, run_id: str, task_id: str, map_index: int = -1, *, base_url: str = "") -> str:
    """The page of the commit a task instance's latest try made (or aborted)."""
    path = "/".join(quote(part, safe="") for part in (dag_id, run_id, task_id))
    query = f"?{urlencode({'map_index': map_index})}" if map_index >= 0 else ""
    return f"{base_url.rstrip('/')}{URL_PREFIX}/tasks/{path}{query}"
