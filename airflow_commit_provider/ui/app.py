"""The commit report pages, served inside Airflow's api-server by the provider's plugin.

A plugin's FastAPI app is mounted beside Airflow's API but not behind its security, so every
route here asks Airflow's own auth manager: the caller must be a signed-in user (the UI's session
cookie or a bearer token) allowed to read the DAG's task instances. The page of a task instance
opens the store through the connection its try used, read from the try's own XCom
(`REPORT_TARGET_XCOM`); nothing in the URL can point it at another store or connection.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from airflow.api_fastapi.core_api.security import get_user
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse

from airflow_commit_provider.hooks.commit_store import CommitStoreHook
from airflow_commit_provider.report.addresses import REPORT_TARGET_XCOM
from airflow_commit_provider.report.commit_report import list_commit_page, load_commit
from airflow_commit_provider.report.html import render_commit

#: Recent commits listed above a commit's page.
RECENT_COMMITS = 20

app = FastAPI(title="Commit reports", docs_url=None, redoc_url=None, openapi_url=None)


def _authorized_reader(dag_id: str, user: Annotated[Any, Depends(get_user)]) -> Any:
    """The signed-in user, if allowed to read this DAG's task instances (else 403)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    allowed = get_auth_manager().is_authorized_dag(
        method="GET", access_entity=DagAccessEntity.TASK_INSTANCE, details=DagDetails(id=dag_id), user=user
    )
    if not allowed:
        raise HTTPException(status_code=403, detail=f"not allowed to read the task instances of DAG {dag_id}")
    return user


@app.get("/tasks/{dag_id}/{run_id}/{task_id}", response_class=HTMLResponse)
def task_commit_page(
    dag_id: str,
    run_id: str,
    task_id: str,
    _user: Annotated[Any, Depends(_authorized_reader)],
    map_index: int = -1,
    job: Annotated[str | None, Query(max_length=200)] = None,
    page: Annotated[int, Query(ge=1)] = 1,
    commits_after: Annotated[str | None, Query(max_length=200)] = None,
    partition_page: Annotated[int, Query(ge=1)] = 1,
) -> HTMLResponse:
    """The commit of the task instance's latest try, or another commit (`job`) to the same
    destination, with page `page` of its files and `partition_page` of its partitions, under a page
    of its recent commits (older ones after the cursor `commits_after`)."""
    target = _report_target(dag_id, run_id, task_id, map_index)
    destination, job_id = target["destination"], job or target["job_id"]
    store = CommitStoreHook(aws_conn_id=target.get("aws_conn_id")).get_store(destination)
    try:
        try:
            commits = list_commit_page(store, destination, limit=RECENT_COMMITS, after=commits_after)
        except ValueError as error:
            raise HTTPException(status_code=400, detail=str(error)) from None
        try:
            report = load_commit(store, destination, job_id, page=page - 1, partition_page=partition_page - 1)
        except ValueError as error:
            raise HTTPException(status_code=404, detail=str(error)) from None
    finally:
        store.close()

    def address(**query: Any) -> str:
        base = {"map_index": map_index} if map_index >= 0 else {}
        listed = {"commits_after": commits_after} if commits_after is not None else {}
        return "?" + urlencode({**base, **listed, **query})

    html = render_commit(
        report,
        commits.commits,
        page_link=lambda number: address(job=job_id, page=number + 1, partition_page=partition_page),
        partition_page_link=lambda number: address(job=job_id, page=page, partition_page=number + 1),
        job_link=lambda other: address(job=other),
        older_link=None if commits.after is None else address(job=job_id, commits_after=commits.after),
    )
    return HTMLResponse(html)


def _report_target(dag_id: str, run_id: str, task_id: str, map_index: int) -> dict[str, Any]:
    """What the try pushed before it wrote (its destination, connection and job), or 404."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(
            run_id=run_id, key=REPORT_TARGET_XCOM, dag_ids=dag_id, task_ids=task_id, map_indexes=map_index
        )
        row = session.scalars(query.limit(1)).first()
        value = XComModel.deserialize_value(row) if row is not None else None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("destination"), str)
        or not value.get("job_id")
    ):
        raise HTTPException(
            status_code=404,
            detail=f"task {dag_id}.{task_id} of run {run_id} recorded no commit (it has not started one)",
        )
    return value
