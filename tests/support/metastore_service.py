"""The suite's one Thrift Hive metastore service (``devtools.hive_metastore.HiveMetastoreService``),
kept in a database of a private PostgreSQL cluster, started by the first test that asks for it and
stopped at the end of the session.

A test module imports `metastore_service_fixture` (pytest registers it as ``metastore_service``);
an application reaches the service with its ``spark_conf()``, a Thrift client with its ``uri``.
Tables are shared by every test of the session: name them uniquely.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from airflow_commit_provider.devtools.hive_metastore import HiveMetastoreService
from support.postgres import Postgres


@pytest.fixture(scope="session", name="metastore_service")
def metastore_service_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HiveMetastoreService]:
    """Hive's metastore on 127.0.0.1, its warehouse in the session's temporary directory."""
    with Postgres() as cluster:
        database = cluster.create_database(f"metastore_{secrets.token_hex(4)}")
        warehouse = tmp_path_factory.mktemp("metastore-warehouse")
        with HiveMetastoreService(
            database.jdbc_url, database.user, database.password, warehouse.as_uri()
        ) as service:
            yield service
