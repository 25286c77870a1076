"""The commit report pages, served inside Airflow's api-server by the provider's plugin: a task
instance's commit (also its "Commit" tab) and the Commits page of Airflow's menu.

A plugin's FastAPI app is mounted beside Airflow's API but not behind its security, so every
route here asks Airflow's own auth manager: the caller must be a signed-in user (the UI's session
cookie or a bearer token) allowed to read the DAG's task instances; the Commits page lists only
destinations of the DAGs the user may read, and only their commits. A page opens the store through
the connection the try used, read from the try's own XCom (`REPORT_TARGET_XCOM`); nothing in the URL
can point it at another store or connection.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, replace
from heapq import merge
from typing import Annotated, Any
from urllib.parse import urlencode

from airflow.api_fastapi.core_api.security import get_user
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from airflow_commit_provider.airflow_config import COMMITS_PAGE_DESTINATIONS, COMMITS_PER_DESTINATION
from airflow_commit_provider.compat import conf
from airflow_commit_provider.hooks.commit_store import CommitStoreHook
from airflow_commit_provider.report.addresses import REPORT_TARGET_XCOM, TASK_INSTANCE_PLACEHOLDERS, task_page
from airflow_commit_provider.report.commit_report import CommitSummary, list_commit_page, load_commit
from airflow_commit_provider.report.html import (
    DestinationCommits,
    render_commit,
    render_commit_list,
    render_notice,
)

#: Recent commits listed above a commit's page.
RECENT_COMMITS = 20
#: The newest report targets the Commits page reads besides each committed task's newest (see
#: `_newest_writers`): the destinations of templated tasks' recent runs.
RECENT_TARGETS_READ = 500

log = logging.getLogger(__name__)
app = FastAPI(title="Commit reports", docs_url=None, redoc_url=None, openapi_url=None)


@app.exception_handler(StarletteHTTPException)
async def _error_page(_request: Request, error: StarletteHTTPException) -> HTMLResponse:
    """Errors as a page (they show inside Airflow's UI, in the menu page's and the tab's frame)."""
    return HTMLResponse(
        render_notice(f"Commit report: {error.status_code}", str(error.detail)),
        status_code=error.status_code,
        headers=error.headers,
    )


def _authorized_reader(dag_id: str, user: Annotated[Any, Depends(get_user)]) -> Any:
    """The signed-in user, if allowed to read this DAG's task instances (else 403).

    With the DAG's team, as Airflow's own routes ask (`requires_access_dag`): in multi-team mode a
    DAG of another team is refused only when its team is named."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.models.dag import DagModel

    details = DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id))
    allowed = get_auth_manager().is_authorized_dag(
        method="GET", access_entity=DagAccessEntity.TASK_INSTANCE, details=details, user=user
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


@app.get("/tab/{dag_id}/{run_id}/{task_id}")
def task_commit_tab(
    dag_id: str,
    run_id: str,
    task_id: str,
    _user: Annotated[Any, Depends(_authorized_reader)],
    map_index: Annotated[str, Query(max_length=20)] = "-1",
) -> RedirectResponse:
    """The task instance page's "Commit" tab: the page of its commit (`task_commit_page`).

    Airflow's UI fills the tab's address in, and leaves ``{MAP_INDEX}`` as it is on the page of a
    task that is not mapped."""
    if map_index == TASK_INSTANCE_PLACEHOLDERS[3]:
        map_index = "-1"
    try:
        index = int(map_index)
    except ValueError:
        raise HTTPException(status_code=400, detail=f"map_index is not a number: {map_index!r}") from None
    return RedirectResponse(task_page(dag_id, run_id, task_id, index), status_code=303)


@dataclass(frozen=True)
class _Writer:
    """The newest try of a committed task that wrote a destination, from its report target XCom."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    destination: str
    aws_conn_id: str | None

    @property
    def page(self) -> str:
        return task_page(self.dag_id, self.run_id, self.task_id, self.map_index)

    def job_page(self, job_id: str) -> str:
        return self.page + ("&" if "?" in self.page else "?") + urlencode({"job": job_id})


@app.get("/commits", response_class=HTMLResponse)
def commits_page(user: Annotated[Any, Depends(get_user)]) -> HTMLResponse:
    """The destinations most recently written by the committed tasks of the DAGs the user may read,
    each with its newest commits: one read of the destination's records index, and the records of
    the commits listed (`list_commit_page`), never a listing of its records folder. Commits made by
    a DAG the user may not read are left out, though another DAG wrote the same destination."""
    from airflow.api_fastapi.app import get_auth_manager

    try:
        per_destination = COMMITS_PER_DESTINATION.read_count(conf)
        most = COMMITS_PAGE_DESTINATIONS.read_count(conf)
    except ValueError as error:
        raise HTTPException(status_code=500, detail=str(error)) from None
    readable = get_auth_manager().get_authorized_dag_ids(user=user, method="GET")
    writers = _newest_writers(readable, most)
    listed = [_destination_commits(writer, readable, per_destination) for writer in writers]
    return HTMLResponse(render_commit_list(listed, per_destination))


def _newest_writers(dag_ids: Collection[str], most: int) -> list[_Writer]:
    """Up to `most` destinations, the most recently written first, each with its newest writer.

    From the report target XComs of `dag_ids`: the newest of each committed task (and map index),
    as many rows as the DAGs have committed tasks whatever the number of their runs, so every task
    is found however long ago it ran; merged with the newest `RECENT_TARGETS_READ` of all, so a task
    whose destination changes from run to run (a templated one) shows its recent ones too."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import and_, func, select

    if not dag_ids:
        return []
    targets = select(XComModel).where(
        XComModel.key == REPORT_TARGET_XCOM, XComModel.dag_id.in_(list(dag_ids))
    )
    newest = (
        select(
            XComModel.dag_id,
            XComModel.task_id,
            XComModel.map_index,
            func.max(XComModel.timestamp).label("written_at"),
        )
        .where(XComModel.key == REPORT_TARGET_XCOM, XComModel.dag_id.in_(list(dag_ids)))
        .group_by(XComModel.dag_id, XComModel.task_id, XComModel.map_index)
        .subquery()
    )
    each_task = targets.join(
        newest,
        and_(
            XComModel.dag_id == newest.c.dag_id,
            XComModel.task_id == newest.c.task_id,
            XComModel.map_index == newest.c.map_index,
            XComModel.timestamp == newest.c.written_at,
        ),
    ).order_by(XComModel.timestamp.desc())
    writers: dict[str, _Writer] = {}
    with create_session() as session:
        recent = list(
            session.scalars(targets.order_by(XComModel.timestamp.desc()).limit(RECENT_TARGETS_READ))
        )
        rows = merge(
            session.scalars(each_task.execution_options(yield_per=100)),
            recent,
            key=lambda row: row.timestamp,
            reverse=True,
        )
        for row in rows:
            value = XComModel.deserialize_value(row)
            if not isinstance(value, dict) or not isinstance(value.get("destination"), str):
                continue
            destination = value["destination"]
            if destination not in writers:
                writers[destination] = _Writer(
                    row.dag_id, row.run_id, row.task_id, row.map_index, destination, value.get("aws_conn_id")
                )
            if len(writers) == most:
                break
    return list(writers.values())


def _destination_commits(writer: _Writer, readable: Collection[str], limit: int) -> DestinationCommits:
    """The newest `limit` commits of the writer's destination that the user may see; a store that
    cannot be read is said on its own line, the other destinations are still listed."""
    shown = DestinationCommits(
        destination=writer.destination,
        written_by=f"{writer.dag_id}.{writer.task_id}"
        + (f"[{writer.map_index}]" if writer.map_index >= 0 else "")
        + f" in {writer.run_id}",
        writer_link=writer.page,
        job_link=writer.job_page,
    )
    try:
        store = CommitStoreHook(aws_conn_id=writer.aws_conn_id).get_store(writer.destination)
        try:
            commits = list_commit_page(store, writer.destination, limit=limit).commits
        finally:
            store.close()
    except Exception as error:  # one unreadable store (refused, gone, its connection removed) hides no other
        log.warning("Commits page: listing the commits of %s failed: %s", writer.destination, error)
        return replace(shown, error=f"could not list its commits: {error}")
    return replace(shown, commits=[c for c in commits if _visible(c, readable)])


def _visible(commit: CommitSummary, readable: Collection[str]) -> bool:
    """A commit is shown unless it names a DAG the user may not read (one without a recorded origin,
    a Hadoop committer's, belongs to the destination)."""
    return commit.origin is None or commit.origin.key.dag_id in readable
