"""Tests on a real Spark standalone cluster (master + two workers on 127.0.0.1 and 127.0.0.2).

The cluster starts once per session, when the first test here asks for it, and always stops
(fixture teardown, and ``atexit`` in tests/support/standalone.py). The embedded S3 is the suite's
shared one (tests/conftest.py). Every test here is marked ``cluster``, ``spark`` and ``slow``.

Airflow: the operator tests run the real ``CommittedSparkSubmitOperator`` and ``SparkSubmitHook``.
Airflow reads its configuration when first imported, so a throwaway AIRFLOW_HOME (SQLite) is set
here at import unless tests/airflow/conftest.py already set one (whole-suite runs).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.standalone import StandaloneCluster

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

HERE = Path(__file__).resolve().parent
APP = HERE / "cluster_app.py"
VENV_BIN = Path(sys.executable).parent

if "airflow-commit-tests-home-" not in os.environ.get("AIRFLOW_HOME", ""):
    _HOME = Path(tempfile.mkdtemp(prefix="airflow-commit-tests-home-cluster-"))
    (_HOME / "dags").mkdir()
    atexit.register(shutil.rmtree, _HOME, True)
    os.environ.update(
        {
            "AIRFLOW_HOME": str(_HOME),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(_HOME / "dags"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{_HOME}/airflow.db",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(_HOME / "logs"),
        }
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            for mark in ("cluster", "spark", "slow"):
                item.add_marker(getattr(pytest.mark, mark))


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[StandaloneCluster]:
    """Master on 127.0.0.1, workers on 127.0.0.1 and 127.0.0.2 (2 cores, 2 GB each)."""
    with StandaloneCluster(worker_cores=2, worker_memory="2g") as cluster:
        yield cluster


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    """The directory the application writes its markers to (see cluster_app.py)."""
    directory = tmp_path / "markers"
    directory.mkdir()
    return directory


@pytest.fixture
def event_log_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "events"
    directory.mkdir()
    return directory


@pytest.fixture
def cluster_bucket(embedded_s3: EmbeddedS3) -> Iterator[str]:
    """A fresh bucket; not deleted (uploads and records are what the test checks, until its end)."""
    import contextlib

    bucket = embedded_s3.create_bucket(f"cluster-{uuid.uuid4().hex[:16]}")
    yield bucket
    with contextlib.suppress(Exception):
        embedded_s3.delete_bucket(bucket)
