"""One real Airflow deployment for the module: the checkout's wheel in its own virtualenv, PostgreSQL,
the four services on LocalExecutor, the session's embedded S3, local Spark and the session's YARN +
HDFS cluster (its ``HADOOP_CONF_DIR`` and a ``spark_yarn`` connection in the services' environment). The sdist and the
wheel are built once a session (`distributions`), for the deployment and the release check alike.

The connections reach the services as ``AIRFLOW_CONN_*`` variables of their environment, never on
a command line. The example DAGs are this checkout's ``dags_examples/`` and the test DAGs
``tests/deployment/dags/``, linked into the DAG folder. Intervals are shortened through the
environment only (how often the scheduler and the DAG processor look), never by mocking.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from deployment_services import (
    AirflowServices,
    Deployment,
    RestClient,
    clean_environment,
    kill_processes_of,
)
from deployment_venv import (
    REPO,
    SETUP_LOG,
    Distributions,
    build_distributions,
    cached_venv,
    install_wheel,
)
from support.standalone import free_port

from airflow_commit_provider.devtools.embedded_s3 import EmbeddedS3
from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster
from airflow_commit_provider.devtools.postgres import Postgres

HERE = Path(__file__).resolve().parent
#: Spark's JVM tuned to start fast (the jobs are small), as a platform team sets in spark-defaults.conf.
SPARK_DEFAULTS = """\
spark.driver.extraJavaOptions -XX:+UseSerialGC -XX:TieredStopAtLevel=1
spark.driver.bindAddress 127.0.0.1
spark.driver.host 127.0.0.1
spark.ui.enabled false
spark.sql.shuffle.partitions 2
"""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.airflow)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def build_work() -> Iterator[Path]:
    """The session's folder for the cached venv's log and the distributions built from the checkout."""
    work = Path(tempfile.mkdtemp(prefix="airflow-release-build-"))
    yield work
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def deployment_venv(build_work: Path) -> Path:
    """The cached virtualenv with Airflow, the provider's dependencies and the build tools."""
    return cached_venv(build_work)


@pytest.fixture(scope="session")
def distributions(build_work: Path, deployment_venv: Path) -> Distributions:
    """The checkout's sdist and wheel, built once a session with the cached venv's build tools."""
    return build_distributions(
        build_work / "build", build_work / SETUP_LOG, deployment_venv / "bin" / "python"
    )


@pytest.fixture(scope="module")
def deployment(
    embedded_s3: EmbeddedS3,
    hadoop_cluster: HadoopCluster,
    build_work: Path,
    deployment_venv: Path,
    distributions: Distributions,
) -> Iterator[Deployment]:
    work = Path(tempfile.mkdtemp(prefix="airflow-deployment-"))
    home = work / "airflow-home"
    bucket = embedded_s3.create_bucket(f"deploy-{secrets.token_hex(6)}")
    postgres: Postgres | None = None
    services: AirflowServices | None = None
    api: RestClient | None = None
    try:
        venv = deployment_venv
        install_wheel(venv, distributions.wheel, build_work / SETUP_LOG)
        dags = home / "dags"
        dags.mkdir(parents=True)
        (dags / "examples").symlink_to(REPO / "dags_examples", target_is_directory=True)
        (dags / "deployment").symlink_to(HERE / "dags", target_is_directory=True)
        spark_conf = work / "spark-conf"
        spark_conf.mkdir()
        (spark_conf / "spark-defaults.conf").write_text(SPARK_DEFAULTS)
        markers = work / "markers"
        markers.mkdir()
        (work / "tmp").mkdir()
        admin_password = secrets.token_urlsafe(18)
        passwords = home / "simple_auth_manager_passwords.json"
        passwords.write_text(json.dumps({"admin": admin_password}))
        jwt_secret, api_secret = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        postgres = Postgres()
        postgres.start()
        metadata_db = postgres.create_database("airflow")
        api_port = free_port()
        env = {
            **clean_environment(),
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "TMPDIR": str(work / "tmp"),
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_db.sqlalchemy_url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(api_port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": api_secret,
            "AIRFLOW__API_AUTH__JWT_SECRET": jwt_secret,
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            # Look for DAG files often and parse them in one process: the defaults (every 5 min, two
            # processes) suit a long-lived deployment, not one that lives a few minutes on 2 cores.
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
            "AIRFLOW_CONN_AWS_DEFAULT": embedded_s3.airflow_connection(),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
            # YARN cluster mode on the session's test cluster, followed through the RM (durable_yarn_write).
            "AIRFLOW_CONN_SPARK_YARN": json.dumps(
                {
                    "conn_type": "spark",
                    "host": "yarn",
                    "extra": {
                        "deploy-mode": "cluster",
                        "yarn_resourcemanager_webapp_address": hadoop_cluster.rm_webapp_url,
                    },
                }
            ),
            **hadoop_cluster.env(),
            "DAILY_INGEST_ROOT": f"s3://{bucket}",
            "SPARK_CONF_DIR": str(spark_conf),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": str(venv / "bin" / "python"),
            "PYSPARK_DRIVER_PYTHON": str(venv / "bin" / "python"),
        }
        services = AirflowServices(venv, home, env, api_port, admin_password)
        services.airflow("db", "migrate")
        services.start()
        api = services.wait_healthy()
        yield Deployment(
            api=api,
            s3=embedded_s3,
            bucket=bucket,
            home=home,
            markers=markers,
            secrets={
                "the embedded S3's secret key": embedded_s3.secret_key,
                "the JWT secret": jwt_secret,
                "the API secret key": api_secret,
                "the database password": metadata_db.password,
                "the API user's password": admin_password,
            },
        )
    finally:
        if api is not None:
            api.close()
        if services is not None:
            services.stop()
        kill_processes_of(home)
        if postgres is not None:
            postgres.stop()
        embedded_s3.delete_bucket(bucket)
        shutil.rmtree(work, ignore_errors=True)
