"""The "Commit report" extra link of `CommittedSparkSubmitOperator`.

Airflow 3 evaluates extra links on the worker when the try ends and keeps the address in XCom,
so the link is a plain address: the page reads the try's report target (`REPORT_TARGET_XCOM`)
itself, behind the UI's login.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

from airflow_commit_provider.compat import conf
from airflow_commit_provider.report.addresses import REPORT_TARGET_XCOM, task_page

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.types import TaskInstanceKey


class CommitReportLink(BaseOperatorLink):
    name = "Commit report"

    def get_link(self, operator: Any, *, ti_key: TaskInstanceKey) -> str:
        base_url = conf.get("api", "base_url", fallback="") or ""
        return task_page(ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index, base_url=base_url)


def push_report_target(context: Context, destination: str, aws_conn_id: str | None, job_id: str) -> None:
    """Tell the report page which commit this try makes, before it starts (an aborted try has a
    page too). No secret: the page opens the store through the connection, by its ID."""
    context["ti"].xcom_push(
        key=REPORT_TARGET_XCOM,
        value={"destination": destination, "aws_conn_id": aws_conn_id, "job_id": job_id},
    )
