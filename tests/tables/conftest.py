"""Fixtures of the catalog-table tests: a Hive metastore kept in the session's PostgreSQL cluster
(tests/conftest.py's ``postgres``) that several Spark applications share (``devtools.hive_metastore``)."""

from __future__ import annotations

import secrets

import pytest
from tables_support import SharedMetastore

from airflow_commit_provider.devtools.hive_metastore import write_password_conf
from airflow_commit_provider.devtools.postgres import Postgres


@pytest.fixture(scope="session")
def shared_metastore(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> SharedMetastore:
    """A fresh, empty metastore database (the first application creates its schema)."""
    database = postgres.create_database(f"metastore_{secrets.token_hex(4)}")
    root = tmp_path_factory.mktemp("metastore")
    password_conf = root / "password-conf"
    write_password_conf(password_conf, database.password)
    return SharedMetastore(database, password_conf, root / "warehouse")
