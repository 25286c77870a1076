"""The commit report plugin (`ui.app`) inside Airflow's own API app, behind Airflow's own auth manager.

No api-server: Airflow's `create_app()` builds the app in-process, mounting the provider's plugin as
it mounts every plugin, with the SimpleAuthManager, and `fastapi.testclient` sends it requests. A
real try (dag.test() of `CommittedSparkSubmitOperator` on the fake spark-submit) leaves the report
target and the task's "Commit report" link in XCom; the page at that link is refused without a
token or with a forged one, and shown to a viewer with a token the auth manager issued.
Part of the compatibility run (Airflow 3.1.1), whose API app is built the same way.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from dag_runs import load_dag, run_dag, task_instances, xcom
from fake_spark import install_fake_spark

from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store.local import LocalStore
from airflow_commit_provider.devtools.cloned_jobs import clone_jobs
from airflow_commit_provider.operators.report_link import CommitReportLink
from airflow_commit_provider.report.addresses import REPORT_TARGET_XCOM, URL_PREFIX
from airflow_commit_provider.ui.app import RECENT_COMMITS

DAY = datetime(2024, 3, 1, tzinfo=timezone.utc)
#: The users the SimpleAuthManager knows (name:role), for this test.
USERS = "reader:viewer"


@pytest.fixture
def api_client(airflow_db: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Airflow's API app with the plugins and the SimpleAuthManager, as the api-server builds it."""
    from airflow.api_fastapi.app import create_app, purge_cached_app
    from fastapi.testclient import TestClient

    monkeypatch.setenv(
        "AIRFLOW__CORE__AUTH_MANAGER",
        "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
    )
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", USERS)
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


def viewer_token() -> str:
    """A token the auth manager issues for the viewer, as its login endpoint would."""
    from airflow.api_fastapi.app import get_auth_manager

    manager = get_auth_manager()
    (user,) = [user for user in _users(manager) if user.get_name() == "reader"]
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
    assert other.status_code == 404 and "no records of job 'no-such-job'" in other.text

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
