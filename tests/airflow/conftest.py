"""Airflow test environment: a throwaway AIRFLOW_HOME with SQLite, migrated once per session.

Airflow reads its configuration when first imported, so the environment is set when this
conftest is imported, before any test module imports Airflow. The DAG folder is a temporary
directory linking `dags_examples/` and `tests/airflow/dags/`, because `dag.test()` only runs DAGs
it finds in a DAG bundle.

The OpenLineage provider is enabled with its file transport (`support.openlineage` reads the
events back), emitting from a thread rather than a fork of the test process. New DAGs are not
paused, so an asset event queues the DAGs scheduled on it, as in a running deployment. An
asset's URI stays the same for the session: Airflow keeps what it first saw of an asset-scheduled
DAG's timetable for the partition keys it queues, and the tests parse the DAG folder many times.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.openlineage import openlineage_file_transport

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "dags_examples"
TEST_DAGS = Path(__file__).resolve().parent / "dags"

_HOME = Path(tempfile.mkdtemp(prefix="airflow-commit-tests-home-"))
_DAGS = _HOME / "dags"
_DAGS.mkdir()
(_DAGS / "examples").symlink_to(EXAMPLES, target_is_directory=True)
(_DAGS / "testdags").symlink_to(TEST_DAGS, target_is_directory=True)
atexit.register(shutil.rmtree, _HOME, True)

AIRFLOW_ENV = {
    "AIRFLOW_HOME": str(_HOME),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__DAGS_FOLDER": str(_DAGS),
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME}/airflow.db",
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(_HOME / "logs"),
    "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
    # The tries' local directories (tries.workdirs), not the worker's shared $TMPDIR/airflow-commit.
    "AIRFLOW__AIRFLOW_COMMIT__LOCAL_WORK_ROOT": str(_HOME / "tries"),
    # The daily example's root (its table is an asset: one URI per session, see test_daily_ingest_dag).
    "DAILY_INGEST_ROOT": f"s3://daily-ingest-{uuid.uuid4().hex[:12]}",
    **openlineage_file_transport(_HOME),
    # Spark's Python workers must be this interpreter (it has pyarrow), not `python3` from PATH.
    "PYSPARK_PYTHON": sys.executable,
    "PYSPARK_DRIVER_PYTHON": sys.executable,
}
if "airflow.settings" in sys.modules and os.environ.get("AIRFLOW_HOME") != str(_HOME):
    warnings.warn(
        "Airflow was imported before tests/airflow/conftest.py set AIRFLOW_HOME; the Airflow tests "
        "may use the default ~/airflow metadata DB",
        stacklevel=1,
    )
os.environ.update(AIRFLOW_ENV)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(here):
            item.add_marker(pytest.mark.airflow)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """`airflow db migrate` once per session on the temporary SQLite database."""
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env={**os.environ, **AIRFLOW_ENV},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode:
        raise RuntimeError(f"airflow db migrate failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return _HOME


@pytest.fixture
def no_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No AWS_* variables: S3 settings must come from the Airflow connection alone."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)


@pytest.fixture
def aws_default(
    embedded_s3: EmbeddedS3, monkeypatch: pytest.MonkeyPatch, no_aws_env: None
) -> Iterator[EmbeddedS3]:
    """`aws_default` pointing at the embedded S3 (credentials, region, endpoint_url in extras)."""
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", embedded_s3.airflow_connection())
    yield embedded_s3


@pytest.fixture
def spark_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))


@pytest.fixture
def unique_id() -> str:
    return uuid.uuid4().hex[:12]
