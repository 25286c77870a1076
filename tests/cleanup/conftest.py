"""Airflow settings for the cleanup tests, and an AWS connection to the embedded S3.

Airflow reads its configuration when first imported, so the environment is set when this
conftest is imported. `setdefault`: when the whole suite runs, tests/airflow/conftest.py has
already chosen a home, DAG folder and database, and these tests simply use those.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.openlineage import openlineage_file_transport

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3

REPO = Path(__file__).resolve().parents[2]
if "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="airflow-home-cleanup-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], True)
_HOME = os.environ["AIRFLOW_HOME"]
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(REPO / "dags_examples"))
os.environ.setdefault("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", f"sqlite:///{_HOME}/airflow.db")
for _name, _value in openlineage_file_transport(Path(_HOME)).items():
    os.environ.setdefault(_name, _value)


@pytest.fixture(scope="session")
def migrated_airflow_db() -> None:
    """`airflow db migrate` once per session, for the tests that run a DAG (idempotent)."""
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"], capture_output=True, text=True, check=False
    )
    if result.returncode:
        raise RuntimeError(f"airflow db migrate failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


@pytest.fixture
def aws_test_conn(embedded_s3: EmbeddedS3, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An Airflow AWS connection (id `aws_default`) to the embedded S3, from the environment."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)  # settings must come from the connection alone
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", embedded_s3.airflow_connection())
    yield "aws_default"


@pytest.fixture
def s3_env(embedded_s3: EmbeddedS3, monkeypatch: pytest.MonkeyPatch) -> str:
    """boto3's standard environment carries the credentials; the endpoint comes from --endpoint-url."""
    for name, value in embedded_s3.env().items():
        if name != "AWS_ENDPOINT_URL":
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    return embedded_s3.endpoint_url
