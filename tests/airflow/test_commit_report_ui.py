"""The commit report plugin (`ui.app`) inside Airflow's own API app, behind Airflow's own auth manager.

No api-server: Airflow's `create_app()` builds the app in-process, mounting the provider's plugin as
it mounts every plugin, with the SimpleAuthManager, and `fastapi.testclient` sends it requests. A
real try (dag.test() of `CommittedSparkSubmitOperator` on the fake spark-submit) leaves the report
target and the task's "Commit report" link in XCom; the page at that link is refused without a
token or with a forged one, and shown to a viewer with a token the auth manager issued.
The Commits page and the task instance's Commit tab are checked the same way, in multi-team mode
(Airflow 3.2+), the SimpleAuthManager's only way to keep a DAG from a user: a user of another team
sees none of the DAG's commits. tests/deployment opens both in a real browser.
Part of the compatibility run (Airflow 3.1.1), whose API app is built the same way.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from dag_runs import load_dag, run_dag, task_instances, xcom
from fake_spark import install_fake_spark
from packaging.version import Version

from airflow_commit_provider.airflow_config import COMMITS_PAGE_DESTINATIONS
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.devtools.cloned_jobs import clone_jobs
from airflow_commit_provider.operators.report_link import CommitReportLink
from airflow_commit_provider.report.addresses import (
    REPORT_TARGET_XCOM,
    URL_PREFIX,
    commits_page,
    task_page,
    task_tab,
)
from airflow_commit_provider.ui.app import RECENT_COMMITS

DAY = datetime(2024, 3, 1, tzinfo=timezone.utc)
#: The users the SimpleAuthManager knows (name:role), for this test.
USERS = "reader:viewer"
#: In multi-team mode (name:role:teams): the test DAGs are the team `WRITERS`' during the test.
WRITERS = "writers"
TEAM_USERS = f"reader:viewer:{WRITERS},outsider:viewer:others"


@pytest.fixture
def api_client(airflow_db: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Airflow's API app with the plugins and the SimpleAuthManager, as the api-server builds it."""
    yield from _api_client(monkeypatch, USERS)


@pytest.fixture
def team_api_client(dag_of_team: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The same app in multi-team mode (its teams exist first: the auth manager checks them)."""
    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    yield from _api_client(monkeypatch, TEAM_USERS)


def _api_client(monkeypatch: pytest.MonkeyPatch, users: str) -> Iterator[Any]:
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from fastapi.testclient import TestClient

    monkeypatch.setenv(
        "AIRFLOW__CORE__AUTH_MANAGER",
        "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
    )
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", users)
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "commit-report-test-" + "s" * 48)
    # Airflow 3.1 signs `"iss": []` when no issuer is set, which the PyJWT of constraints/oldest.txt
    # refuses to encode (a deployment on 3.1 needs `[api_auth] jwt_issuer` for its logins too).
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_ISSUER", "airflow-commit-tests")
    purge_cached_app()
    try:
        with TestClient(create_app(apps="core")) as client:
            yield client
    finally:
        purge_cached_app()


def viewer_token(name: str = "reader") -> str:
    """A token the auth manager issues for the viewer `name`, as its login endpoint would."""
    from airflow.api_fastapi.app import get_auth_manager

    manager = get_auth_manager()
    (user,) = [user for user in _users(manager) if user.get_name() == name]
    return str(manager.generate_jwt(user))


def _users(manager: Any) -> list[Any]:
    """The configured users as the auth manager's user objects (3.1 returns dicts, later versions users)."""
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return [
        user if isinstance(user, SimpleAuthManagerUser) else SimpleAuthManagerUser(**user)
        for user in manager.get_users()
    ]


def test_the_page_of_a_committed_try_is_behind_airflow_login(
    api_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spark_default: None
) -> None:
    install_fake_spark(tmp_path, monkeypatch)
    destination = (tmp_path / "table").as_uri()
    dagrun = run_dag(load_dag("test_committed_spark_retries"), DAY, {"destination": destination})
    assert task_instances(dagrun)["write"].state == "success"
    written = xcom(dagrun, "write")
    target = xcom(dagrun, "write", REPORT_TARGET_XCOM)
    assert target == {"destination": destination, "aws_conn_id": "aws_default", "job_id": written["job_id"]}
    link = xcom(dagrun, "write", CommitReportLink().xcom_key)
    assert link is not None and link.startswith(f"{URL_PREFIX}/tasks/test_committed_spark_retries/"), link

    refused = api_client.get(link)
    assert refused.status_code in (401, 403), refused.text
    forged = api_client.get(link, headers={"Authorization": "Bearer not-a-token-the-manager-signed"})
    assert forged.status_code in (401, 403), forged.text
    assert written["job_id"] not in refused.text + forged.text

    page = api_client.get(link, headers={"Authorization": f"Bearer {viewer_token()}"})
    assert page.status_code == 200, page.text
    assert f"Commit {written['job_id']} (committed)" in page.text
    assert 'data-testid="files"' in page.text and f"part-00001-{written['job_id']}.csv" in page.text
    other = api_client.get(f"{link}?job=no-such-job", headers={"Authorization": f"Bearer {viewer_token()}"})
    assert other.status_code == 404 and "no records of job 'no-such-job'" in html.unescape(other.text)

    # More commits than the page lists: the older ones are a link away (the records index's cursor).
    table = StorePath.parse(destination)
    older = {f"older-{n:02d}": 1_700_000_000_000 + n for n in range(RECENT_COMMITS)}
    clone_jobs(LocalStore(), table, written["job_id"], older)
    headers = {"Authorization": f"Bearer {viewer_token()}"}
    page = api_client.get(link, headers=headers)
    found = re.search(r'href="([^"]*)" data-testid="older-commits"', page.text)
    assert page.status_code == 200 and found is not None, page.text
    rest = api_client.get(link.split("?")[0] + html.unescape(found[1]), headers=headers)
    assert rest.status_code == 200 and f"Commit {written['job_id']} (committed)" in rest.text
    rows = re.compile(r">(older-[0-9]{2})</a></td>")  # a row's first cell: its job, linked
    assert rows.findall(page.text) == [f"older-{n:02d}" for n in range(RECENT_COMMITS - 1, 0, -1)]
    assert rows.findall(rest.text) == ["older-00"], "the next page: the rest, newest first"
    bad = api_client.get(f"{link.split('?')[0]}?commits_after=x", headers=headers)
    assert bad.status_code == 400 and "is not a cursor of a list of commits" in bad.text


@pytest.fixture
def dag_of_team(airflow_db: Path) -> Iterator[Any]:
    """The teams of `TEAM_USERS`, and a callable that gives a DAG's bundle (the test DAGs') to the
    team `WRITERS`, whose DAGs `outsider` may then not read; as it was afterwards."""
    from airflow import __version__ as airflow_version

    if Version(Version(airflow_version).base_version) < Version("3.2"):
        pytest.skip("multi-team mode (the SimpleAuthManager's DAG access by team) came in Airflow 3.2")
    from airflow.models.dag import DagModel
    from airflow.models.team import Team
    from airflow.models.team import dag_bundle_team_association_table as owners
    from airflow.utils.session import create_session
    from sqlalchemy import delete, insert, select

    with create_session() as session:
        session.add_all([Team(name=WRITERS), Team(name="others")])
    bundles: list[str] = []

    def give(dag_id: str) -> None:
        with create_session() as session:
            bundle = session.scalar(select(DagModel.bundle_name).where(DagModel.dag_id == dag_id))
            assert bundle is not None, dag_id
            session.execute(insert(owners).values(dag_bundle_name=bundle, team_name=WRITERS))
            bundles.append(bundle)
        forget_dag_teams()

    yield give
    with create_session() as session:
        for bundle in bundles:
            session.execute(delete(owners).where(owners.c.dag_bundle_name == bundle))
        session.execute(delete(Team).where(Team.name.in_([WRITERS, "others"])))
    forget_dag_teams()


def forget_dag_teams() -> None:
    """Airflow keeps a DAG's team for `[core] team_name_cache_ttl` (30 s): a deployment sees a new
    owner that much later; this test, whose earlier requests read the DAG's team, sees it now."""
    from airflow.models import dag

    dag._team_name_cache.clear()


def test_the_commits_page_and_the_tab_show_only_what_the_user_may_read(
    team_api_client: Any,
    dag_of_team: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spark_default: None,
) -> None:
    install_fake_spark(tmp_path, monkeypatch)
    # Two runs of one task, its destination templated: each run's is listed, the newest first.
    dag_id = "test_committed_spark_retries"
    earlier = (tmp_path / "earlier").as_uri()
    run_dag(load_dag(dag_id), DAY - timedelta(days=1), {"destination": earlier})
    destination = (tmp_path / "table").as_uri()
    dagrun = run_dag(load_dag(dag_id), DAY, {"destination": destination})
    written = xcom(dagrun, "write")
    dag_of_team(dag_id)
    # The newest two destinations: the session's other tests wrote others, which are not this test's.
    monkeypatch.setenv(COMMITS_PAGE_DESTINATIONS.environment_variable, "2")
    reader = {"Authorization": f"Bearer {viewer_token('reader')}"}
    outsider = {"Authorization": f"Bearer {viewer_token('outsider')}"}

    # Registered as Airflow's UI reads plugins: a menu page in Browse, a task instance tab.
    plugins = team_api_client.get("/api/v2/plugins", headers=reader)
    assert plugins.status_code == 200, plugins.text
    (ours,) = [p for p in plugins.json()["plugins"] if p["name"] == "airflow_commit_report"]
    views = {view["name"]: view for view in ours["external_views"]}
    assert (views["Commits"]["href"], views["Commits"]["destination"]) == (commits_page(), "nav")
    assert views["Commits"]["category"] == "browse"
    assert (views["Commit"]["href"], views["Commit"]["destination"]) == (task_tab(), "task_instance")

    page = commits_page()
    assert team_api_client.get(page).status_code in (401, 403), "no token, no page"
    shown = team_api_client.get(page, headers=reader)
    assert shown.status_code == 200, shown.text
    assert re.findall(r'data-testid="destination-name">([^<]*)<', shown.text) == [destination, earlier]
    job_page = task_page(dag_id, dagrun.run_id, "write") + "?job=" + written["job_id"]
    assert f'<a href="{html.escape(job_page)}">{written["job_id"]}</a>' in shown.text, shown.text
    hidden = team_api_client.get(page, headers=outsider)
    assert hidden.status_code == 200 and 'data-testid="no-destinations"' in hidden.text, hidden.text
    assert destination not in hidden.text and written["job_id"] not in hidden.text

    # The tab: Airflow fills in the task instance, and leaves {MAP_INDEX} on an unmapped task's page.
    tab = task_tab().format(
        DAG_ID=quote(dag_id, safe=""),
        RUN_ID=quote(dagrun.run_id, safe=""),
        TASK_ID="write",
        MAP_INDEX="{MAP_INDEX}",
    )
    opened = team_api_client.get(tab, headers=reader)
    assert opened.status_code == 200 and f"Commit {written['job_id']} (committed)" in opened.text
    assert [step.headers["location"] for step in opened.history] == [
        task_page(dag_id, dagrun.run_id, "write")
    ]
    refused = team_api_client.get(tab, headers=outsider)
    assert refused.status_code == 403 and written["job_id"] not in refused.text
    assert "not allowed to read the task instances of DAG test_committed_spark_retries" in refused.text
